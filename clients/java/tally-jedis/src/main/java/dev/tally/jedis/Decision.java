package dev.tally.jedis;

import java.time.Duration;
import java.util.List;

/**
 * The answer of {@code TSCOUNTER.LIMIT}.
 *
 * @param allowed the increment was applied
 * @param retryAfter zero when allowed; else the wait after which the same call would pass if
 *     nothing else were written; negative ({@code -1 ms}) when the increment exceeds some
 *     window's max, so that no wait helps
 * @param sums each window's sum after the call, in the order the windows were given
 * @param windows with details, each window's state in the same order; else empty
 */
public record Decision(boolean allowed, Duration retryAfter, List<Long> sums, List<WindowState> windows) {
  public Decision {
    sums = List.copyOf(sums);
    windows = List.copyOf(windows);
  }

  /** False when the increment is more than some window's max: it can never pass. */
  public boolean canEverPass() {
    return !retryAfter.isNegative();
  }
}
