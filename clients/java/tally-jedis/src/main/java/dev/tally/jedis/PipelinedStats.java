package dev.tally.jedis;

import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import redis.clients.jedis.CommandObject;
import redis.clients.jedis.Response;

/**
 * The pipelined form of {@link Stats}: the same methods, answering Jedis {@code Response}s
 * filled when the pipeline syncs (or the transaction executes). Windowed statistics ({@code STATS.*}) at one key. */
public final class PipelinedStats {
  private final TallyPipeline tally;
  private final String key;

  PipelinedStats(TallyPipeline tally, String key) {
    this.tally = tally;
    this.key = key;
  }

  public String key() {
    return key;
  }

  private <T> Response<T> run(CommandObject<T> command) {
    return tally.execute(command);
  }

  /** {@code STATS.CREATE} with the configured period and keep; throws if the key exists. */
  public Response<Void> create() {
    return run(tally.commands().statsCreate(key, null, null));
  }

  /** {@code STATS.CREATE key PERIOD period KEEP keep} (null: the configured default). */
  public Response<Void> create(Duration period, Integer keep) {
    return run(tally.commands().statsCreate(key, period, keep));
  }

  /** Adds values to the current period; the period's count. */
  public Response<Long> add(double... values) {
    return run(tally.commands().statsAdd(key, Tally.boxed(values), null, null));
  }

  /** Adds values to the period of {@code at} (null: now); with a {@link Report}, also ranks a
   * statistic of that period in a sorted set. The period's count. */
  public Response<Long> add(List<Double> values, Instant at, Report report) {
    return run(tally.commands().statsAdd(key, values, at, report));
  }

  /** The current period's summary, or null when it is empty. */
  public Response<Summary> get() {
    return run(tally.commands().statsGet(key, null));
  }

  /** The latest {@code window}'s summary, or null when it is empty. */
  public Response<Summary> get(Duration window) {
    return run(tally.commands().statsGet(key, window));
  }

  /** Quantiles of the current period, in order; null when it is empty. */
  public Response<List<Double>> quantile(double... qs) {
    return run(tally.commands().statsQuantile(key, Tally.boxed(qs), null));
  }

  public Response<List<Double>> quantile(List<Double> qs, Duration window) {
    return run(tally.commands().statsQuantile(key, qs, window));
  }

  /** The share of the current period's values at or below each value; null when empty. */
  public Response<List<Double>> cdf(double... values) {
    return run(tally.commands().statsCdf(key, Tally.boxed(values), null));
  }

  public Response<List<Double>> cdf(List<Double> values, Duration window) {
    return run(tally.commands().statsCdf(key, values, window));
  }

  /** Every stored period, oldest first. */
  public Response<List<Period>> range() {
    return run(tally.commands().statsRange(key, null, null));
  }

  /** The periods from the one containing {@code from} to the one containing {@code to}. */
  public Response<List<Period>> range(Instant from, Instant to) {
    return run(tally.commands().statsRange(key, from, to));
  }

  /** {@code STATS.INFO}, or null for a missing key. */
  public Response<StatsInfo> info() {
    return run(tally.commands().statsInfo(key));
  }
}
