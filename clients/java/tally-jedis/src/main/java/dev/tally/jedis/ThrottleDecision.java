package dev.tally.jedis;

import java.time.Duration;

/**
 * The answer of {@code TSTHROTTLE.ALLOW}. Times are whole milliseconds rounded up: waiting
 * that long is enough.
 *
 * @param allowed the request was admitted (and stored)
 * @param limit {@code maxBurst + 1}
 * @param remaining how many more requests of 1 fit now
 * @param retryAfter zero when allowed; else the wait before the same request fits; negative
 *     ({@code -1 ms}) when its quantity is more than a whole burst, so that no wait helps
 * @param resetAfter the wait until the subject is back to a full burst
 */
public record ThrottleDecision(
    boolean allowed, long limit, long remaining, Duration retryAfter, Duration resetAfter) {

  /** False when the quantity is more than a whole burst: it can never pass. */
  public boolean canEverPass() {
    return !retryAfter.isNegative();
  }
}
