package dev.tally.jedis;

import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import redis.clients.jedis.CommandObject;
import redis.clients.jedis.Response;

/**
 * The pipelined form of {@link Counter}: the same methods, answering Jedis {@code Response}s
 * filled when the pipeline syncs (or the transaction executes).
 *
 * <p>A multi-resolution counter ({@code TSCOUNTER.*}) at one key. Making it costs no round
 * trip; every method is one command.
 */
public final class PipelinedCounter {
  private final TallyPipeline tally;
  private final String key;

  PipelinedCounter(TallyPipeline tally, String key) {
    this.tally = tally;
    this.key = key;
  }

  public String key() {
    return key;
  }

  private <T> Response<T> run(CommandObject<T> command) {
    return tally.execute(command);
  }

  /** {@code TSCOUNTER.CREATE} with the configured resolutions; throws if the key exists. */
  public Response<Void> create() {
    return run(tally.commands().counterCreate(key, null));
  }

  /** {@code TSCOUNTER.CREATE key RESOLUTIONS ...}; throws if the key exists. */
  public Response<Void> create(List<Resolution> resolutions) {
    return run(tally.commands().counterCreate(key, resolutions));
  }

  /** Adds 1 now; the new count of the finest slot. */
  public Response<Long> incr() {
    return run(tally.commands().counterIncrBy(key, 1, null));
  }

  /** Adds 1 at {@code at}; the new count of the finest slot that keeps it. */
  public Response<Long> incr(Instant at) {
    return run(tally.commands().counterIncrBy(key, 1, at));
  }

  public Response<Long> incrby(long increment) {
    return run(tally.commands().counterIncrBy(key, increment, null));
  }

  public Response<Long> incrby(long increment, Instant at) {
    return run(tally.commands().counterIncrBy(key, increment, at));
  }

  /** The events in each window ending now, in order. */
  public Response<List<Long>> sum(Duration... windows) {
    return run(tally.commands().counterSum(key, Arrays.asList(windows), null));
  }

  /** The events in each window ending at {@code at} (null: now), in order. */
  public Response<List<Long>> sum(List<Duration> windows, Instant at) {
    return run(tally.commands().counterSum(key, windows, at));
  }

  /** The non-zero slots of one resolution over its kept range, oldest first. */
  public Response<List<Slot>> range(Duration resolution) {
    return run(tally.commands().counterRange(key, resolution, null, null, false));
  }

  /** The slots of one resolution from {@code from} to {@code to} (null: the kept range's ends);
   * {@code empty} lists the zeros too. */
  public Response<List<Slot>> range(Duration resolution, Instant from, Instant to, boolean empty) {
    return run(tally.commands().counterRange(key, resolution, from, to, empty));
  }

  /** {@code TSCOUNTER.INFO}, or null for a missing key. */
  public Response<CounterInfo> info() {
    return run(tally.commands().counterInfo(key));
  }

  /** {@code TSCOUNTER.LIMIT}: applies {@code increment} now only if every window's sum plus it
   * stays within its max. */
  public Response<Decision> limit(long increment, WindowLimit... windows) {
    return run(tally.commands().counterLimit(key, increment, Arrays.asList(windows), null, false));
  }

  /** {@code TSCOUNTER.LIMIT} at {@code at} (null: now); {@code details} also answers each
   * window's room left and reset time ({@link Decision#windows()}). */
  public Response<Decision> limit(long increment, List<WindowLimit> windows, Instant at, boolean details) {
    return run(tally.commands().counterLimit(key, increment, windows, at, details));
  }
}
