package dev.tally.jedis;

/** The statistic {@code STATS.ADD ... REPORT ... BY} ranks a period by. */
public enum ReportStat {
  MEAN, MAX, COUNT, SUM, P50, P90, P99;

  String word() {
    return name().toLowerCase(java.util.Locale.ROOT);
  }
}
