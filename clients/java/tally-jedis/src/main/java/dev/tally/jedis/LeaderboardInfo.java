package dev.tally.jedis;

import java.time.Duration;
import java.time.Instant;

/**
 * {@code TSRANK.INFO}.
 *
 * @param window the window the board ranks over
 * @param slot the length of one slot
 * @param members the members with a total
 * @param slots the slots of the window that hold counts
 * @param oldest the oldest such slot's start, null when there is none
 * @param capacity the members kept per slot ({@code CAPACITY}), 0 for an exact board (and for
 *     a server that does not answer the field)
 * @param error the bound on any listed total's error, 0 for an exact board
 */
public record LeaderboardInfo(
    Duration window, Duration slot, long members, long slots, Instant oldest, long capacity, long error) {}
