package dev.tally.jedis;

/**
 * The statistics of a window ({@code STATS.GET}) or of one period ({@code STATS.RANGE}).
 * {@code count}, {@code min} and {@code max} are exact; {@code stddev} is the sample standard
 * deviation (0 for one value); the quantiles come from the sketch (within 1% relative error).
 */
public record Summary(
    long count, double sum, double min, double max, double mean, double stddev, double p50, double p90, double p99) {}
