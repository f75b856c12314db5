package dev.tally.jedis;

import java.time.Duration;
import java.util.Objects;

/**
 * One resolution of a counter: slots of {@code resolution}, the latest {@code samples} kept.
 *
 * @param resolution the length of one slot, a whole number of milliseconds
 * @param samples how many slots are kept
 */
public record Resolution(Duration resolution, long samples) {
  public Resolution {
    Objects.requireNonNull(resolution, "resolution");
  }

  /** {@code Resolution.of(Duration.ofSeconds(1), 60)}: a minute of seconds. */
  public static Resolution of(Duration resolution, long samples) {
    return new Resolution(resolution, samples);
  }
}
