package dev.tally.jedis;

import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import redis.clients.jedis.CommandObject;

/**
 * A sliding-window leaderboard ({@code TSRANK.*}) at one key. Members are strings (UTF-8).
 * In a cluster the key needs a hash tag ({@code {likes}}), so that its derived keys share
 * its slot.
 */
public final class Leaderboard {
  private final Tally tally;
  private final String key;

  Leaderboard(Tally tally, String key) {
    this.tally = tally;
    this.key = key;
  }

  public String key() {
    return key;
  }

  private <T> T run(CommandObject<T> command) {
    return tally.execute(command);
  }

  /** {@code TSRANK.CREATE} with the configured window and slot; throws if the key exists. */
  public void create() {
    run(tally.commands().boardCreate(key, null, null, null));
  }

  /** {@code TSRANK.CREATE key WINDOW window SLOT slot} (null: the configured default). */
  public void create(Duration window, Duration slot) {
    run(tally.commands().boardCreate(key, window, slot, null));
  }

  /** {@code TSRANK.CREATE key WINDOW window SLOT slot CAPACITY capacity}: at most
   * {@code capacity} members kept per slot, totals within {@link LeaderboardInfo#error()}. */
  public void create(Duration window, Duration slot, long capacity) {
    run(tally.commands().boardCreate(key, window, slot, capacity));
  }

  /** Adds to several members at once (in the map's order); their new window totals, in order. */
  public List<Long> incrby(Map<String, Long> increments) {
    return run(tally.commands().boardIncrBy(key, increments, null));
  }

  /** Adds to several members in the slot of {@code at} (null: now); their new totals. */
  public List<Long> incrby(Map<String, Long> increments, Instant at) {
    return run(tally.commands().boardIncrBy(key, increments, at));
  }

  /** Adds 1 to one member; its new window total. */
  public long incr(String member) {
    return run(tally.commands().boardIncr(key, member, 1, null));
  }

  /** Adds to one member (a negative increment lowers its count); its new window total. */
  public long incr(String member, long increment) {
    return run(tally.commands().boardIncr(key, member, increment, null));
  }

  public long incr(String member, long increment, Instant at) {
    return run(tally.commands().boardIncr(key, member, increment, at));
  }

  /** The {@code count} highest totals, highest first (ties by member, descending). */
  public List<Entry> top(long count) {
    return run(tally.commands().boardTop(key, count, 0, null));
  }

  /** {@code top} from {@code offset}, over the latest {@code window} (null: the whole window). */
  public List<Entry> top(long count, long offset, Duration window) {
    return run(tally.commands().boardTop(key, count, offset, window));
  }

  /** The member's window total, or null. */
  public Long score(String member) {
    return run(tally.commands().boardScore(key, member));
  }

  /** Each member's window total (null for one without), in order ({@code TSRANK.MSCORE}). */
  public List<Long> scores(String... members) {
    return run(tally.commands().boardScores(key, Arrays.asList(members)));
  }

  /** 0 for the highest total; null for a member without one. */
  public Long rank(String member) {
    return run(tally.commands().boardRank(key, member, false));
  }

  /** With {@code ties}, the competition rank: how many members have a strictly higher total
   * (totals 9, 7, 7, 5 rank 0, 1, 1, 3). */
  public Long rank(String member, boolean ties) {
    return run(tally.commands().boardRank(key, member, ties));
  }

  /** From {@code count} places above {@code member} to {@code count} below it, in
   * {@code top}'s order; empty for a member without a total. */
  public List<Entry> around(String member, long count) {
    return run(tally.commands().boardAround(key, member, count));
  }

  /** The member's non-zero slots of the window, oldest first. */
  public List<Slot> history(String member) {
    return run(tally.commands().boardHistory(key, member, null));
  }

  /** The member's non-zero slots of the latest {@code window}, oldest first. */
  public List<Slot> history(String member, Duration window) {
    return run(tally.commands().boardHistory(key, member, window));
  }

  /** Removes members entirely; how many of them had a non-zero window total. */
  public long rem(String... members) {
    return run(tally.commands().boardRem(key, Arrays.asList(members)));
  }

  /** {@code TSRANK.INFO}, or null for a missing key. */
  public LeaderboardInfo info() {
    return run(tally.commands().boardInfo(key));
  }
}
