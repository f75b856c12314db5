package dev.tally.jedis;

import static dev.tally.jedis.Command.*;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import redis.clients.jedis.ClusterCommandArguments;
import redis.clients.jedis.CommandArguments;
import redis.clients.jedis.CommandObject;

/**
 * Every tally command as a Jedis {@link CommandObject}: the arguments, with the keys marked
 * (cluster routing), and the parser of the reply. {@link Tally} runs them on a
 * {@code UnifiedJedis}, {@link TallyPipeline} appends them to a pipeline or transaction;
 * {@code jedis.executeCommand(...)} takes them as they are.
 *
 * <p>{@link #STANDALONE} builds them for a single server (or a proxy), {@link #CLUSTER} for
 * {@code JedisCluster} and its {@code ClusterPipeline}, which read the hash slot from Jedis's
 * {@code ClusterCommandArguments} (and refuse keys of two slots before sending).
 */
public final class Commands {
  public static final Commands STANDALONE = new Commands(false);
  public static final Commands CLUSTER = new Commands(true);

  private final boolean cluster;

  private Commands(boolean cluster) {
    this.cluster = cluster;
  }

  private CommandArguments newArgs(Command c) {
    return cluster ? new ClusterCommandArguments(c) : new CommandArguments(c);
  }

  // ------------------------------------------------------------------ arguments ----

  /** A duration as whole milliseconds; a finer one is refused rather than rounded. */
  static long ms(Duration d) {
    Objects.requireNonNull(d, "duration");
    if (d.getNano() % 1_000_000 != 0) {
      throw new IllegalArgumentException("a duration is a whole number of milliseconds, not " + d);
    }
    return d.toMillis();
  }

  private CommandArguments args(Command c, String key) {
    return newArgs(c).key(Objects.requireNonNull(key, "key"));
  }

  private static void at(CommandArguments a, Instant at) {
    if (at != null) {
      a.add("AT").add(at.toEpochMilli());
    }
  }

  private static void window(CommandArguments a, Duration window) {
    if (window != null) {
      a.add("WINDOW").add(ms(window));
    }
  }

  private static void windowLimits(CommandArguments a, List<WindowLimit> windows) {
    for (WindowLimit w : windows) {
      a.add(ms(w.window())).add(w.max());
    }
  }

  private static <T> CommandObject<T> cmd(CommandArguments a, java.util.function.Function<Object, T> parse) {
    return new CommandObject<>(a, Replies.builder(parse));
  }

  private static void nonEmpty(java.util.Collection<?> items, String what) {
    if (items.isEmpty()) {
      throw new IllegalArgumentException(what + " needs at least one item");
    }
  }

  // ------------------------------------------------------------------ counters ----

  public CommandObject<Void> counterCreate(String key, List<Resolution> resolutions) {
    CommandArguments a = args(TSCOUNTER_CREATE, key);
    if (resolutions != null) {
      nonEmpty(resolutions, "resolutions");
      a.add("RESOLUTIONS");
      for (Resolution r : resolutions) {
        a.add(ms(r.resolution()) + ":" + r.samples());
      }
    }
    return cmd(a, Replies::ok);
  }

  public CommandObject<Long> counterIncrBy(String key, long increment, Instant at) {
    CommandArguments a = args(TSCOUNTER_INCRBY, key).add(increment);
    at(a, at);
    return cmd(a, Replies::num);
  }

  public CommandObject<List<Long>> counterSum(String key, List<Duration> windows, Instant at) {
    nonEmpty(windows, "sum");
    CommandArguments a = args(TSCOUNTER_SUM, key);
    windows.forEach(w -> a.add(ms(w)));
    at(a, at);
    return cmd(a, Replies::nums);
  }

  public CommandObject<List<Slot>> counterRange(
      String key, Duration resolution, Instant from, Instant to, boolean empty) {
    CommandArguments a = args(TSCOUNTER_RANGE, key).add(ms(resolution));
    if (from != null) {
      a.add("FROM").add(from.toEpochMilli());
    }
    if (to != null) {
      a.add("TO").add(to.toEpochMilli());
    }
    if (empty) {
      a.add("EMPTY");
    }
    return cmd(a, Replies::slots);
  }

  public CommandObject<CounterInfo> counterInfo(String key) {
    return cmd(args(TSCOUNTER_INFO, key), Replies::counterInfo);
  }

  public CommandObject<Decision> counterLimit(
      String key, long increment, List<WindowLimit> windows, Instant at, boolean details) {
    nonEmpty(windows, "limit");
    CommandArguments a = args(TSCOUNTER_LIMIT, key).add(increment);
    windowLimits(a, windows);
    at(a, at);
    if (details) {
      a.add("DETAILS");
    }
    return cmd(a, r -> Replies.decision(r, details));
  }

  public CommandObject<MultiDecision> mlimit(
      Map<String, List<WindowLimit>> limits, long increment, Instant at, boolean details) {
    nonEmpty(limits.keySet(), "mlimit");
    List<String> keys = new ArrayList<>(limits.keySet());
    CommandArguments a = newArgs(TSCOUNTER_MLIMIT).add(keys.size());
    keys.forEach(a::key);
    a.add(increment);
    for (String k : keys) {
      List<WindowLimit> windows = limits.get(k);
      nonEmpty(windows, "each counter of mlimit");
      a.add(windows.size());
      windowLimits(a, windows);
    }
    at(a, at);
    if (details) {
      a.add("DETAILS");
    }
    return cmd(a, r -> Replies.multiDecision(r, keys, details));
  }

  public CommandObject<List<Long>> msum(List<String> keys, List<Duration> windows, Instant at) {
    nonEmpty(keys, "msum");
    nonEmpty(windows, "msum");
    CommandArguments a = newArgs(TSCOUNTER_MSUM).add(keys.size());
    keys.forEach(a::key);
    windows.forEach(w -> a.add(ms(w)));
    at(a, at);
    return cmd(a, Replies::nums);
  }

  // -------------------------------------------------------------- leaderboards ----

  public CommandObject<Void> boardCreate(String key, Duration window, Duration slot, Long capacity) {
    CommandArguments a = args(TSRANK_CREATE, key);
    if (window != null) {
      a.add("WINDOW").add(ms(window));
    }
    if (slot != null) {
      a.add("SLOT").add(ms(slot));
    }
    if (capacity != null) {
      a.add("CAPACITY").add(capacity.longValue());
    }
    return cmd(a, Replies::ok);
  }

  public CommandObject<List<Long>> boardIncrBy(String key, Map<String, Long> increments, Instant at) {
    nonEmpty(increments.keySet(), "incrby");
    CommandArguments a = args(TSRANK_INCRBY, key);
    increments.forEach((member, n) -> a.add(n.longValue()).add(member));
    at(a, at);
    return cmd(a, Replies::nums);
  }

  public CommandObject<Long> boardIncr(String key, String member, long increment, Instant at) {
    CommandArguments a = args(TSRANK_INCRBY, key).add(increment).add(Objects.requireNonNull(member, "member"));
    at(a, at);
    return cmd(a, Replies::num);
  }

  public CommandObject<List<Entry>> boardTop(String key, long count, long offset, Duration window) {
    CommandArguments a = args(TSRANK_TOP, key).add(count);
    if (offset != 0) {
      a.add("OFFSET").add(offset);
    }
    a.add("WITHSCORES");
    window(a, window);
    return cmd(a, Replies::entries);
  }

  public CommandObject<Long> boardScore(String key, String member) {
    return cmd(args(TSRANK_SCORE, key).add(member), Replies::optionalNum);
  }

  public CommandObject<List<Long>> boardScores(String key, List<String> members) {
    nonEmpty(members, "scores");
    CommandArguments a = args(TSRANK_MSCORE, key);
    members.forEach(a::add);
    return cmd(a, Replies::optionalNums);
  }

  public CommandObject<Long> boardRank(String key, String member, boolean ties) {
    CommandArguments a = args(TSRANK_RANK, key).add(member);
    if (ties) {
      a.add("TIES");
    }
    return cmd(a, Replies::optionalNum);
  }

  public CommandObject<List<Entry>> boardAround(String key, String member, long count) {
    return cmd(args(TSRANK_AROUND, key).add(member).add(count).add("WITHSCORES"), Replies::entries);
  }

  public CommandObject<List<Slot>> boardHistory(String key, String member, Duration window) {
    CommandArguments a = args(TSRANK_HISTORY, key).add(member);
    window(a, window);
    return cmd(a, Replies::slots);
  }

  public CommandObject<Long> boardRem(String key, List<String> members) {
    nonEmpty(members, "rem");
    CommandArguments a = args(TSRANK_REM, key);
    members.forEach(a::add);
    return cmd(a, Replies::num);
  }

  public CommandObject<LeaderboardInfo> boardInfo(String key) {
    return cmd(args(TSRANK_INFO, key), Replies::boardInfo);
  }

  // ---------------------------------------------------------------- statistics ----

  public CommandObject<Void> statsCreate(String key, Duration period, Integer keep) {
    CommandArguments a = args(STATS_CREATE, key);
    if (period != null) {
      a.add("PERIOD").add(ms(period));
    }
    if (keep != null) {
      a.add("KEEP").add(keep.intValue());
    }
    return cmd(a, Replies::ok);
  }

  private static void doubles(CommandArguments a, List<Double> values) {
    for (Double v : values) {
      a.add(Double.toString(v));
    }
  }

  public CommandObject<Long> statsAdd(String key, List<Double> values, Instant at, Report report) {
    nonEmpty(values, "add");
    CommandArguments a = args(STATS_ADD, key);
    doubles(a, values);
    at(a, at);
    if (report != null) {
      a.add("REPORT").key(report.rankKey()).add(report.member());
      if (report.keep() != null) {
        a.add("KEEP").add(report.keep().intValue());
      }
      if (report.by() != null) {
        a.add("BY").add(report.by().word());
      }
    }
    return cmd(a, Replies::num);
  }

  public CommandObject<Summary> statsGet(String key, Duration window) {
    CommandArguments a = args(STATS_GET, key);
    window(a, window);
    return cmd(a, Replies::summary);
  }

  public CommandObject<List<Double>> statsQuantile(String key, List<Double> qs, Duration window) {
    nonEmpty(qs, "quantile");
    CommandArguments a = args(STATS_QUANTILE, key);
    doubles(a, qs);
    window(a, window);
    return cmd(a, Replies::doublesOrNull);
  }

  public CommandObject<List<Double>> statsCdf(String key, List<Double> values, Duration window) {
    nonEmpty(values, "cdf");
    CommandArguments a = args(STATS_CDF, key);
    doubles(a, values);
    window(a, window);
    return cmd(a, Replies::doublesOrNull);
  }

  public CommandObject<List<Period>> statsRange(String key, Instant from, Instant to) {
    CommandArguments a = args(STATS_RANGE, key);
    if (from != null) {
      a.add("FROM").add(from.toEpochMilli());
    }
    if (to != null) {
      a.add("TO").add(to.toEpochMilli());
    }
    return cmd(a, Replies::periods);
  }

  public CommandObject<StatsInfo> statsInfo(String key) {
    return cmd(args(STATS_INFO, key), Replies::statsInfo);
  }

  public CommandObject<Summary> mget(List<String> keys, Duration window) {
    nonEmpty(keys, "mget");
    CommandArguments a = newArgs(STATS_MGET).add(keys.size());
    keys.forEach(a::key);
    window(a, window);
    return cmd(a, Replies::summary);
  }

  public CommandObject<List<Double>> mquantile(List<String> keys, List<Double> qs, Duration window) {
    nonEmpty(keys, "mquantile");
    nonEmpty(qs, "mquantile");
    CommandArguments a = newArgs(STATS_MQUANTILE).add(keys.size());
    keys.forEach(a::key);
    doubles(a, qs);
    window(a, window);
    return cmd(a, Replies::doublesOrNull);
  }

  // ----------------------------------------------------------------- throttles ----

  public CommandObject<ThrottleDecision> throttleAllow(
      String key, long maxBurst, long count, Duration period, long quantity, Instant at) {
    CommandArguments a =
        args(TSTHROTTLE_ALLOW, key).add(maxBurst).add(count).add(ms(period) + "ms").add("QUANTITY").add(quantity);
    at(a, at);
    return cmd(a, Replies::throttle);
  }
}
