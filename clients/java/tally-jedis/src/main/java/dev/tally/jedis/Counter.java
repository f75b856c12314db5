package dev.tally.jedis;

import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import redis.clients.jedis.CommandObject;

/**
 * A multi-resolution counter ({@code TSCOUNTER.*}) at one key. Making it costs no round
 * trip; every method is one command.
 */
public final class Counter {
  private final Tally tally;
  private final String key;

  Counter(Tally tally, String key) {
    this.tally = tally;
    this.key = key;
  }

  public String key() {
    return key;
  }

  private <T> T run(CommandObject<T> command) {
    return tally.execute(command);
  }

  /** {@code TSCOUNTER.CREATE} with the configured resolutions; throws if the key exists. */
  public void create() {
    run(tally.commands().counterCreate(key, null));
  }

  /** {@code TSCOUNTER.CREATE key RESOLUTIONS ...}; throws if the key exists. */
  public void create(List<Resolution> resolutions) {
    run(tally.commands().counterCreate(key, resolutions));
  }

  /** Adds 1 now; the new count of the finest slot. */
  public long incr() {
    return run(tally.commands().counterIncrBy(key, 1, null));
  }

  /** Adds 1 at {@code at}; the new count of the finest slot that keeps it. */
  public long incr(Instant at) {
    return run(tally.commands().counterIncrBy(key, 1, at));
  }

  public long incrby(long increment) {
    return run(tally.commands().counterIncrBy(key, increment, null));
  }

  public long incrby(long increment, Instant at) {
    return run(tally.commands().counterIncrBy(key, increment, at));
  }

  /** The events in each window ending now, in order. */
  public List<Long> sum(Duration... windows) {
    return run(tally.commands().counterSum(key, Arrays.asList(windows), null));
  }

  /** The events in each window ending at {@code at} (null: now), in order. */
  public List<Long> sum(List<Duration> windows, Instant at) {
    return run(tally.commands().counterSum(key, windows, at));
  }

  /** The non-zero slots of one resolution over its kept range, oldest first. */
  public List<Slot> range(Duration resolution) {
    return run(tally.commands().counterRange(key, resolution, null, null, false));
  }

  /** The slots of one resolution from {@code from} to {@code to} (null: the kept range's ends);
   * {@code empty} lists the zeros too. */
  public List<Slot> range(Duration resolution, Instant from, Instant to, boolean empty) {
    return run(tally.commands().counterRange(key, resolution, from, to, empty));
  }

  /** {@code TSCOUNTER.INFO}, or null for a missing key. */
  public CounterInfo info() {
    return run(tally.commands().counterInfo(key));
  }

  /** {@code TSCOUNTER.LIMIT}: applies {@code increment} now only if every window's sum plus it
   * stays within its max. */
  public Decision limit(long increment, WindowLimit... windows) {
    return run(tally.commands().counterLimit(key, increment, Arrays.asList(windows), null, false));
  }

  /** {@code TSCOUNTER.LIMIT} at {@code at} (null: now); {@code details} also answers each
   * window's room left and reset time ({@link Decision#windows()}). */
  public Decision limit(long increment, List<WindowLimit> windows, Instant at, boolean details) {
    return run(tally.commands().counterLimit(key, increment, windows, at, details));
  }
}
