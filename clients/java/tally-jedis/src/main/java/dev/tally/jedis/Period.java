package dev.tally.jedis;

import java.time.Instant;

/**
 * One stored period of a statistics object ({@code STATS.RANGE}).
 *
 * @param start the period's start
 * @param summary its statistics
 */
public record Period(Instant start, Summary summary) {}
