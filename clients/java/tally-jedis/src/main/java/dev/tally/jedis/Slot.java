package dev.tally.jedis;

import java.time.Instant;

/**
 * A slot of a counter or of a leaderboard member's history.
 *
 * @param start the slot's start (slots are aligned to the epoch)
 * @param count its count
 */
public record Slot(Instant start, long count) {}
