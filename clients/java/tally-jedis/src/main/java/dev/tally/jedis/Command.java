package dev.tally.jedis;

import java.nio.charset.StandardCharsets;
import redis.clients.jedis.commands.ProtocolCommand;

/** tally's commands, as Jedis sends them. */
public enum Command implements ProtocolCommand {
  TSCOUNTER_CREATE("TSCOUNTER.CREATE"),
  TSCOUNTER_INCR("TSCOUNTER.INCR"),
  TSCOUNTER_INCRBY("TSCOUNTER.INCRBY"),
  TSCOUNTER_SUM("TSCOUNTER.SUM"),
  TSCOUNTER_RANGE("TSCOUNTER.RANGE"),
  TSCOUNTER_INFO("TSCOUNTER.INFO"),
  TSCOUNTER_LIMIT("TSCOUNTER.LIMIT"),
  TSCOUNTER_MLIMIT("TSCOUNTER.MLIMIT"),
  TSCOUNTER_MSUM("TSCOUNTER.MSUM"),
  TSRANK_CREATE("TSRANK.CREATE"),
  TSRANK_INCRBY("TSRANK.INCRBY"),
  TSRANK_TOP("TSRANK.TOP"),
  TSRANK_SCORE("TSRANK.SCORE"),
  TSRANK_MSCORE("TSRANK.MSCORE"),
  TSRANK_RANK("TSRANK.RANK"),
  TSRANK_AROUND("TSRANK.AROUND"),
  TSRANK_HISTORY("TSRANK.HISTORY"),
  TSRANK_REM("TSRANK.REM"),
  TSRANK_INFO("TSRANK.INFO"),
  STATS_CREATE("STATS.CREATE"),
  STATS_ADD("STATS.ADD"),
  STATS_GET("STATS.GET"),
  STATS_QUANTILE("STATS.QUANTILE"),
  STATS_CDF("STATS.CDF"),
  STATS_RANGE("STATS.RANGE"),
  STATS_INFO("STATS.INFO"),
  STATS_MGET("STATS.MGET"),
  STATS_MQUANTILE("STATS.MQUANTILE"),
  TSTHROTTLE_ALLOW("TSTHROTTLE.ALLOW");

  private final byte[] raw;

  Command(String name) {
    this.raw = name.getBytes(StandardCharsets.US_ASCII);
  }

  @Override
  public byte[] getRaw() {
    return raw;
  }

  @Override
  public String toString() {
    return new String(raw, StandardCharsets.US_ASCII);
  }
}
