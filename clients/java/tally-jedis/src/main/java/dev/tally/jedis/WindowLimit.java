package dev.tally.jedis;

import java.time.Duration;
import java.util.Objects;

/**
 * One window of a limit: at most {@code max} events in the latest {@code window}
 * ({@code TSCOUNTER.LIMIT key increment window max ...}).
 *
 * @param window the window's length, a whole number of milliseconds
 * @param max the most events the window may hold, {@code >= 0}
 */
public record WindowLimit(Duration window, long max) {
  public WindowLimit {
    Objects.requireNonNull(window, "window");
  }

  /** {@code WindowLimit.of(Duration.ofMinutes(1), 100)}: at most 100 in a minute. */
  public static WindowLimit of(Duration window, long max) {
    return new WindowLimit(window, max);
  }
}
