package dev.tally.jedis;

import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import redis.clients.jedis.CommandObject;
import redis.clients.jedis.PipeliningBase;
import redis.clients.jedis.Response;

/**
 * {@link Tally}'s handles on a Jedis pipeline or transaction: {@code Tally.pipeline(jedis.pipelined())}
 * (a {@code JedisPooled}'s {@code Pipeline} or a {@code JedisCluster}'s {@code ClusterPipeline}) or
 * {@code Tally.pipeline(jedis.multi())}. The methods are {@link Tally}'s, answering Jedis
 * {@link Response}s that are filled when the pipeline syncs or the transaction executes; a
 * server error is thrown by {@code Response.get()} as a {@code JedisDataException}.
 */
public final class TallyPipeline {
  private final PipeliningBase pipeline;
  private final Commands commands;

  TallyPipeline(PipeliningBase pipeline, boolean cluster) {
    this.pipeline = Objects.requireNonNull(pipeline, "pipeline");
    this.commands = cluster ? Commands.CLUSTER : Commands.STANDALONE;
  }

  Commands commands() {
    return commands;
  }

  public PipeliningBase pipeline() {
    return pipeline;
  }

  <T> Response<T> execute(CommandObject<T> command) {
    return pipeline.executeCommand(command);
  }

  public PipelinedCounter counter(String key) {
    return new PipelinedCounter(this, key);
  }

  public PipelinedLeaderboard leaderboard(String key) {
    return new PipelinedLeaderboard(this, key);
  }

  public PipelinedStats stats(String key) {
    return new PipelinedStats(this, key);
  }

  public PipelinedThrottle throttle(String key) {
    return new PipelinedThrottle(this, key);
  }

  /** {@link Tally#mlimit(Map, long)}. */
  public Response<MultiDecision> mlimit(Map<String, List<WindowLimit>> limits, long increment) {
    return execute(commands.mlimit(limits, increment, null, false));
  }

  public Response<MultiDecision> mlimit(
      Map<String, List<WindowLimit>> limits, long increment, Instant at, boolean details) {
    return execute(commands.mlimit(limits, increment, at, details));
  }

  public Response<List<Long>> msum(List<String> keys, Duration... windows) {
    return execute(commands.msum(keys, Arrays.asList(windows), null));
  }

  public Response<List<Long>> msum(List<String> keys, List<Duration> windows, Instant at) {
    return execute(commands.msum(keys, windows, at));
  }

  public Response<Summary> mget(List<String> keys) {
    return execute(commands.mget(keys, null));
  }

  public Response<Summary> mget(List<String> keys, Duration window) {
    return execute(commands.mget(keys, window));
  }

  public Response<List<Double>> mquantile(List<String> keys, double... qs) {
    return execute(commands.mquantile(keys, Tally.boxed(qs), null));
  }

  public Response<List<Double>> mquantile(List<String> keys, List<Double> qs, Duration window) {
    return execute(commands.mquantile(keys, qs, window));
  }
}
