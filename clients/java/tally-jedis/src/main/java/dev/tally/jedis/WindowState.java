package dev.tally.jedis;

import java.time.Duration;

/**
 * One window of a limit answered with details ({@code DETAILS}).
 *
 * @param sum the window's sum after the call
 * @param remaining {@code max(0, max - sum)}
 * @param reset the time from the call until the window's sum next falls (zero when the sum is 0)
 */
public record WindowState(long sum, long remaining, Duration reset) {}
