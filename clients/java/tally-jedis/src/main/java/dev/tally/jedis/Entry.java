package dev.tally.jedis;

/**
 * A leaderboard member and its window total.
 *
 * @param member the member, decoded as UTF-8
 * @param score its total over the window
 */
public record Entry(String member, long score) {}
