package dev.tally.jedis;

import java.util.Objects;

/**
 * {@code STATS.ADD ... REPORT rankkey member [KEEP n] [BY stat]}: after adding, sets
 * {@code member}'s score in the sorted set {@code rankKey} to a statistic of the period the
 * values went to, and keeps the {@code keep} highest (the "slowest pages" ranking). In a
 * cluster {@code rankKey} must share the statistics key's hash slot.
 *
 * @param rankKey the native sorted set to rank in
 * @param member the member to set
 * @param keep how many of the highest to keep, null for the server's default (100)
 * @param by the statistic, null for the default (the mean)
 */
public record Report(String rankKey, String member, Integer keep, ReportStat by) {
  public Report {
    Objects.requireNonNull(rankKey, "rankKey");
    Objects.requireNonNull(member, "member");
  }

  /** Ranks {@code member} by the period's mean, keeping the server's default of 100. */
  public static Report of(String rankKey, String member) {
    return new Report(rankKey, member, null, null);
  }

  public Report keep(int n) {
    return new Report(rankKey, member, n, by);
  }

  public Report by(ReportStat stat) {
    return new Report(rankKey, member, keep, stat);
  }
}
