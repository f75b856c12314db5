package dev.tally.jedis;

import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The answer of {@code TSCOUNTER.MLIMIT}: one decision for every counter at once.
 *
 * @param allowed the increment was applied to every counter
 * @param retryAfter as in {@link Decision#retryAfter()}, for the whole call
 * @param sums per counter key, in the order given: its windows' sums after the call
 * @param windows with details, per counter key its windows' states; else empty
 */
public record MultiDecision(
    boolean allowed,
    Duration retryAfter,
    Map<String, List<Long>> sums,
    Map<String, List<WindowState>> windows) {
  public MultiDecision {
    sums = Collections.unmodifiableMap(new LinkedHashMap<>(sums));
    windows = Collections.unmodifiableMap(new LinkedHashMap<>(windows));
  }

  /** False when the increment is more than some window's max: it can never pass. */
  public boolean canEverPass() {
    return !retryAfter.isNegative();
  }
}
