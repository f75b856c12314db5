package dev.tally.jedis;

import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import redis.clients.jedis.CommandObject;

/** Windowed statistics ({@code STATS.*}) at one key. */
public final class Stats {
  private final Tally tally;
  private final String key;

  Stats(Tally tally, String key) {
    this.tally = tally;
    this.key = key;
  }

  public String key() {
    return key;
  }

  private <T> T run(CommandObject<T> command) {
    return tally.execute(command);
  }

  /** {@code STATS.CREATE} with the configured period and keep; throws if the key exists. */
  public void create() {
    run(tally.commands().statsCreate(key, null, null));
  }

  /** {@code STATS.CREATE key PERIOD period KEEP keep} (null: the configured default). */
  public void create(Duration period, Integer keep) {
    run(tally.commands().statsCreate(key, period, keep));
  }

  /** Adds values to the current period; the period's count. */
  public long add(double... values) {
    return run(tally.commands().statsAdd(key, Tally.boxed(values), null, null));
  }

  /** Adds values to the period of {@code at} (null: now); with a {@link Report}, also ranks a
   * statistic of that period in a sorted set. The period's count. */
  public long add(List<Double> values, Instant at, Report report) {
    return run(tally.commands().statsAdd(key, values, at, report));
  }

  /** The current period's summary, or null when it is empty. */
  public Summary get() {
    return run(tally.commands().statsGet(key, null));
  }

  /** The latest {@code window}'s summary, or null when it is empty. */
  public Summary get(Duration window) {
    return run(tally.commands().statsGet(key, window));
  }

  /** Quantiles of the current period, in order; null when it is empty. */
  public List<Double> quantile(double... qs) {
    return run(tally.commands().statsQuantile(key, Tally.boxed(qs), null));
  }

  public List<Double> quantile(List<Double> qs, Duration window) {
    return run(tally.commands().statsQuantile(key, qs, window));
  }

  /** The share of the current period's values at or below each value; null when empty. */
  public List<Double> cdf(double... values) {
    return run(tally.commands().statsCdf(key, Tally.boxed(values), null));
  }

  public List<Double> cdf(List<Double> values, Duration window) {
    return run(tally.commands().statsCdf(key, values, window));
  }

  /** Every stored period, oldest first. */
  public List<Period> range() {
    return run(tally.commands().statsRange(key, null, null));
  }

  /** The periods from the one containing {@code from} to the one containing {@code to}. */
  public List<Period> range(Instant from, Instant to) {
    return run(tally.commands().statsRange(key, from, to));
  }

  /** {@code STATS.INFO}, or null for a missing key. */
  public StatsInfo info() {
    return run(tally.commands().statsInfo(key));
  }
}
