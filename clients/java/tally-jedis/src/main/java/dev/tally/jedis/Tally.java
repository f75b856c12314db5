package dev.tally.jedis;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import redis.clients.jedis.ClusterPipeline;
import redis.clients.jedis.CommandObject;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.PipeliningBase;
import redis.clients.jedis.UnifiedJedis;

/**
 * Entry point: {@code new Tally(jedis)} over any {@link UnifiedJedis} ({@code JedisPooled},
 * {@code JedisCluster}), then {@link #counter}, {@link #leaderboard}, {@link #stats},
 * {@link #throttle}. Making these handles costs no round trip. Every command names its keys,
 * so a cluster routes it like a native command. Server errors are thrown as Jedis's
 * {@code JedisDataException} with the server's text. Thread-safe as the client is.
 */
public final class Tally {
  private final UnifiedJedis jedis;
  private final Commands commands;

  /** Over a {@code JedisPooled}, a {@code JedisCluster}, or any other {@code UnifiedJedis}. */
  public Tally(UnifiedJedis jedis) {
    this(jedis, jedis instanceof JedisCluster);
  }

  /** {@code cluster}: the client routes by hash slot (a {@code UnifiedJedis} made over a
   * cluster connection provider rather than as a {@code JedisCluster}). */
  public Tally(UnifiedJedis jedis, boolean cluster) {
    this.jedis = Objects.requireNonNull(jedis, "jedis");
    this.commands = cluster ? Commands.CLUSTER : Commands.STANDALONE;
  }

  Commands commands() {
    return commands;
  }

  public UnifiedJedis jedis() {
    return jedis;
  }

  /** The same handles on a pipeline or transaction ({@code jedis.pipelined()},
   * {@code jedis.multi()}): their methods answer Jedis {@code Response}s. */
  public static TallyPipeline pipeline(PipeliningBase pipeline) {
    return new TallyPipeline(pipeline, pipeline instanceof ClusterPipeline);
  }

  <T> T execute(CommandObject<T> command) {
    return jedis.executeCommand(command);
  }

  static List<Double> boxed(double[] values) {
    List<Double> out = new ArrayList<>(values.length);
    for (double v : values) {
      out.add(v);
    }
    return out;
  }

  public Counter counter(String key) {
    return new Counter(this, key);
  }

  public Leaderboard leaderboard(String key) {
    return new Leaderboard(this, key);
  }

  public Stats stats(String key) {
    return new Stats(this, key);
  }

  public Throttle throttle(String key) {
    return new Throttle(this, key);
  }

  /**
   * {@code TSCOUNTER.MLIMIT}: applies {@code increment} to every counter only if every window
   * of every counter allows it, else writes nothing anywhere. {@code limits} maps each counter
   * key (1 to 16, in the map's order: use a {@code LinkedHashMap} or {@code Map.of} for one)
   * to its windows. In a cluster the keys must share a hash slot ({@code {user:42}:ip}).
   */
  public MultiDecision mlimit(Map<String, List<WindowLimit>> limits, long increment) {
    return execute(commands.mlimit(limits, increment, null, false));
  }

  /** {@code TSCOUNTER.MLIMIT} at {@code at} (null: now), with details when asked. */
  public MultiDecision mlimit(Map<String, List<WindowLimit>> limits, long increment, Instant at, boolean details) {
    return execute(commands.mlimit(limits, increment, at, details));
  }

  /** {@code TSCOUNTER.MSUM}: each window ending now summed over the counters {@code keys}. */
  public List<Long> msum(List<String> keys, Duration... windows) {
    return execute(commands.msum(keys, Arrays.asList(windows), null));
  }

  public List<Long> msum(List<String> keys, List<Duration> windows, Instant at) {
    return execute(commands.msum(keys, windows, at));
  }

  /** {@code STATS.MGET}: the summary of every object's current period as if they were one;
   * null when all are empty. */
  public Summary mget(List<String> keys) {
    return execute(commands.mget(keys, null));
  }

  public Summary mget(List<String> keys, Duration window) {
    return execute(commands.mget(keys, window));
  }

  /** {@code STATS.MQUANTILE}: quantiles of every object's current period; null when empty. */
  public List<Double> mquantile(List<String> keys, double... qs) {
    return execute(commands.mquantile(keys, boxed(qs), null));
  }

  public List<Double> mquantile(List<String> keys, List<Double> qs, Duration window) {
    return execute(commands.mquantile(keys, qs, window));
  }
}
