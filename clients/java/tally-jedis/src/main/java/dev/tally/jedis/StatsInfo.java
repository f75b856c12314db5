package dev.tally.jedis;

import java.time.Duration;

/**
 * {@code STATS.INFO}.
 *
 * @param period the length of one period
 * @param keep how many periods are kept, the current one included
 * @param periods the periods stored
 * @param memory the key's {@code MEMORY USAGE} in bytes
 */
public record StatsInfo(Duration period, long keep, long periods, long memory) {}
