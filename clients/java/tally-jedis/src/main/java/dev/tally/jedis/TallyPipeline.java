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

  TallyPipeline(PipeliningBase pipeline) {
    this.pipeline = Objects.requireNonNull(pipeline, "pipeline");
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
    return execute(Commands.mlimit(limits, increment, null, false));
  }

  public Response<MultiDecision> mlimit(
      Map<String, List<WindowLimit>> limits, long increment, Instant at, boolean details) {
    return execute(Commands.mlimit(limits, increment, at, details));
  }

  public Response<List<Long>> msum(List<String> keys, Duration... windows) {
    return execute(Commands.msum(keys, Arrays.asList(windows), null));
  }

  public Response<List<Long>> msum(List<String> keys, List<Duration> windows, Instant at) {
    return execute(Commands.msum(keys, windows, at));
  }

  public Response<Summary> mget(List<String> keys) {
    return execute(Commands.mget(keys, null));
  }

  public Response<Summary> mget(List<String> keys, Duration window) {
    return execute(Commands.mget(keys, window));
  }

  public Response<List<Double>> mquantile(List<String> keys, double... qs) {
    return execute(Commands.mquantile(keys, Tally.boxed(qs), null));
  }

  public Response<List<Double>> mquantile(List<String> keys, List<Double> qs, Duration window) {
    return execute(Commands.mquantile(keys, qs, window));
  }
}
