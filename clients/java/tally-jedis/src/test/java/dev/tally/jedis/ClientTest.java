package dev.tally.jedis;

import static dev.tally.jedis.Fixtures.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import redis.clients.jedis.JedisPooled;

/** Every helper's reply, on every server, in RESP2 and RESP3. */
class ClientTest {
  private final Keys keys = new Keys();

  private static Slot slot(long start, long count) {
    return new Slot(at(start), count);
  }

  @ParameterizedTest(name = "{0} resp{1}")
  @MethodSource("dev.tally.jedis.Fixtures#matrix")
  void counter(String server, int protocol) {
    try (JedisPooled j = client(server, protocol)) {
      Tally t = new Tally(j);
      Counter c = t.counter(keys.k("c"));
      c.create(List.of(Resolution.of(Duration.ofHours(1), 5000), Resolution.of(Duration.ofDays(1), 5000)));
      serverError("ERR key already exists", c::create);
      assertEquals(3, c.incrby(3, at(T)));
      assertEquals(2, c.incrby(2, at(T + HOUR)));
      assertEquals(1, c.incr(at(T + 2 * DAY)));
      assertEquals(7, c.incrby(6, at(T + 2 * DAY)));

      assertEquals(List.of(2L, 5L, 5L, 5L), c.sum(
          List.of(Duration.ofHours(1), Duration.ofHours(2), Duration.ofDays(1), Duration.ofDays(7)), at(T + HOUR)));
      assertEquals(List.of(slot(T, 5), slot(T + 2 * DAY, 7)),
          c.range(Duration.ofDays(1), at(T), at(T + 3 * DAY), false));
      assertEquals(List.of(slot(T, 5), slot(T + DAY, 0), slot(T + 2 * DAY, 7), slot(T + 3 * DAY, 0)),
          c.range(Duration.ofDays(1), at(T), at(T + 3 * DAY), true));
      assertEquals(List.of(slot(T, 3), slot(T + HOUR, 2)), c.range(Duration.ofHours(1), at(T), at(T + HOUR), false));

      CounterInfo info = c.info();
      assertEquals(List.of(Resolution.of(ms(HOUR), 5000), Resolution.of(ms(DAY), 5000)), info.resolutions());
      assertEquals(5, info.slots());
      assertEquals(at(T), info.first());
      assertEquals(at(T + 2 * DAY), info.last());
      assertTrue(info.memory() > 0);
      Counter missing = t.counter(keys.k("missing"));
      assertNull(missing.info());
      assertEquals(List.of(0L, 0L), missing.sum(Duration.ofHours(1), Duration.ofDays(1)));
      assertEquals(List.of(), missing.range(Duration.ofHours(1)));

      j.set(keys.k("s"), "x");
      serverError("WRONGTYPE Operation against a key holding the wrong kind of value", t.counter(keys.k("s"))::incr);
      serverError("ERR window '365d' is longer than any resolution keeps (at most 120d)",
          () -> t.counter(keys.k("c2")).sum(Duration.ofDays(365)));
      serverError("ERR timestamp is too far in the future", () -> t.counter(keys.k("c2")).incr(at(99999999999999L)));
      assertThrows(IllegalArgumentException.class, () -> c.sum(Duration.ofNanos(1500)));
    }
  }

  @ParameterizedTest(name = "{0} resp{1}")
  @MethodSource("dev.tally.jedis.Fixtures#matrix")
  void counterLimit(String server, int protocol) {
    try (JedisPooled j = client(server, protocol)) {
      Tally t = new Tally(j);
      Counter c = t.counter(keys.k("l"));
      c.create(List.of(Resolution.of(Duration.ofHours(1), 5000), Resolution.of(Duration.ofDays(1), 5000)));
      c.incrby(3, at(T));
      c.incrby(2, at(T + HOUR));
      WindowLimit h5 = WindowLimit.of(Duration.ofHours(1), 5);
      assertEquals(new Decision(true, Duration.ZERO, List.of(3L), List.of()),
          c.limit(1, List.of(h5), at(T + HOUR), false));
      Decision refused = c.limit(1, List.of(h5, WindowLimit.of(Duration.ofHours(2), 6)), at(T + HOUR), false);
      assertEquals(new Decision(false, ms(HOUR), List.of(3L, 6L), List.of()), refused);
      assertTrue(refused.canEverPass());
      Decision never = c.limit(10, List.of(h5), at(T + HOUR), false);
      assertEquals(new Decision(false, ms(-1), List.of(3L), List.of()), never);
      assertFalse(never.canEverPass());
      assertEquals(new Decision(true, Duration.ZERO, List.of(3L, 6L), List.of()),
          c.limit(0, List.of(h5, WindowLimit.of(Duration.ofDays(1), 100)), at(T + HOUR), false));
      serverError("ERR value is not an integer or out of range: increment is an integer >= 0", () -> c.limit(-1, h5));

      // Details: at T+2h the 1h window holds the 2 of T+2h (gone at T+3h); the 4h window
      // also holds the 3 of T, which leaves it at T+4h.
      Counter d = t.counter(keys.k("d"));
      d.create(List.of(Resolution.of(Duration.ofHours(1), 1000)));
      d.incrby(3, at(T));
      d.incrby(2, at(T + 2 * HOUR));
      List<WindowLimit> w = List.of(h5, WindowLimit.of(Duration.ofHours(4), 5));
      List<WindowState> states = List.of(new WindowState(2, 3, ms(HOUR)), new WindowState(5, 0, ms(2 * HOUR)));
      assertEquals(new Decision(true, Duration.ZERO, List.of(2L, 5L), states), d.limit(0, w, at(T + 2 * HOUR), true));
      assertEquals(new Decision(false, ms(2 * HOUR), List.of(2L, 5L), states), d.limit(1, w, at(T + 2 * HOUR), true));
      assertEquals(new Decision(true, Duration.ZERO, List.of(3L), List.of(new WindowState(3, 2, ms(HOUR)))),
          d.limit(1, List.of(h5), at(T + 2 * HOUR), true));
      assertEquals(List.of(new WindowState(0, 4, Duration.ZERO)),
          t.counter(keys.k("missing")).limit(0, List.of(WindowLimit.of(Duration.ofMinutes(1), 4)), null, true).windows());

      // Now, with the default resolutions of an auto-created key.
      Counter fresh = t.counter(keys.k("fresh"));
      List<Boolean> allowed = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        allowed.add(fresh.limit(1, WindowLimit.of(Duration.ofMinutes(1), 2)).allowed());
      }
      assertEquals(List.of(true, true, false), allowed);
    }
  }

  @ParameterizedTest(name = "{0} resp{1}")
  @MethodSource("dev.tally.jedis.Fixtures#matrix")
  void mlimitAndMsum(String server, int protocol) {
    try (JedisPooled j = client(server, protocol)) {
      Tally t = new Tally(j);
      String user = keys.k("{m}:user");
      String ip = keys.k("{m}:ip");
      for (String k : List.of(user, ip)) {
        t.counter(k).create(List.of(Resolution.of(Duration.ofHours(1), 1000)));
      }
      t.counter(user).incrby(3, at(T));
      t.counter(ip).incrby(1, at(T));
      Map<String, List<WindowLimit>> limits = new LinkedHashMap<>();
      limits.put(user, List.of(WindowLimit.of(Duration.ofHours(1), 5), WindowLimit.of(Duration.ofHours(2), 10)));
      limits.put(ip, List.of(WindowLimit.of(Duration.ofHours(1), 2)));
      Map<String, List<Long>> sums = new LinkedHashMap<>();
      sums.put(user, List.of(4L, 4L));
      sums.put(ip, List.of(2L));
      assertEquals(new MultiDecision(true, Duration.ZERO, sums, Map.of()), t.mlimit(limits, 1, at(T), false));
      Map<String, List<WindowState>> windows = new LinkedHashMap<>();
      windows.put(user, List.of(new WindowState(4, 1, ms(HOUR)), new WindowState(4, 6, ms(2 * HOUR))));
      windows.put(ip, List.of(new WindowState(2, 0, ms(HOUR))));
      MultiDecision refused = t.mlimit(limits, 1, at(T), true);
      assertEquals(new MultiDecision(false, ms(HOUR), sums, windows), refused);
      assertEquals(List.of(user, ip), new ArrayList<>(refused.sums().keySet()));
      assertEquals(List.of(4L), t.counter(user).sum(List.of(Duration.ofHours(1)), at(T)));
      assertEquals(ms(-1), t.mlimit(limits, 10, at(T), false).retryAfter());
      serverError("ERR value is not an integer or out of range: increment is an integer >= 0", () -> t.mlimit(limits, -1));
      j.set(keys.k("{m}:s"), "x");
      Map<String, List<WindowLimit>> bad = new LinkedHashMap<>();
      bad.put(keys.k("{m}:new"), List.of(WindowLimit.of(Duration.ofMinutes(1), 5)));
      bad.put(keys.k("{m}:s"), List.of(WindowLimit.of(Duration.ofMinutes(1), 5)));
      serverError("WRONGTYPE Operation against a key holding the wrong kind of value", () -> t.mlimit(bad, 1));
      assertFalse(j.exists(keys.k("{m}:new")));

      // MSUM: each window summed over the keys; a missing key counts 0.
      String login = keys.k("{svc}:/login");
      String search = keys.k("{svc}:/search");
      for (String k : List.of(login, search)) {
        t.counter(k).create(List.of(Resolution.of(Duration.ofHours(1), 1000), Resolution.of(Duration.ofDays(1), 1000)));
      }
      t.counter(login).incrby(3, at(T));
      t.counter(search).incrby(5, at(T));
      t.counter(search).incrby(10, at(T - 3 * HOUR));
      assertEquals(List.of(8L, 18L), t.msum(List.of(login, search, keys.k("{svc}:/none")),
          List.of(Duration.ofHours(1), Duration.ofDays(1)), at(T)));
      assertEquals(List.of(3L), t.msum(List.of(login), List.of(Duration.ofHours(1)), at(T)));
      serverError("ERR window '5000d' is longer than any resolution keeps (at most 1000d)",
          () -> t.msum(List.of(login, search), Duration.ofDays(5000)));
    }
  }

  @ParameterizedTest(name = "{0} resp{1}")
  @MethodSource("dev.tally.jedis.Fixtures#matrix")
  void leaderboard(String server, int protocol) {
    try (JedisPooled j = client(server, protocol)) {
      Tally t = new Tally(j);
      Leaderboard b = t.leaderboard(keys.k("daily"));
      b.create(Duration.ofDays(3650), Duration.ofDays(1));
      serverError("ERR key already exists", b::create);
      Map<String, Long> first = new LinkedHashMap<>();
      first.put("alice", 4L);
      first.put("bob", 2L);
      assertEquals(List.of(4L, 2L), b.incrby(first, at(T)));
      assertEquals(5, b.incr("alice", 1, at(T + 2 * DAY)));
      assertEquals(List.of(1L), b.incrby(Map.of("carol", 1L), at(T)));

      Entry alice = new Entry("alice", 5);
      Entry bob = new Entry("bob", 2);
      Entry carol = new Entry("carol", 1);
      assertEquals(List.of(alice, bob, carol), b.top(10));
      assertEquals(List.of(bob), b.top(1, 1, null));
      assertEquals(List.of(), b.top(10, 0, Duration.ofDays(1)));
      assertEquals(5L, b.score("alice"));
      assertNull(b.score("nobody"));
      assertEquals(0L, b.rank("alice"));
      assertEquals(2L, b.rank("carol"));
      assertNull(b.rank("nobody"));
      assertEquals(0L, b.rank("alice", true));
      assertNull(b.rank("nobody", true));
      assertEquals(java.util.Arrays.asList(5L, null, 1L), b.scores("alice", "nobody", "carol"));
      assertEquals(List.of(alice, bob, carol), b.around("bob", 1));
      assertEquals(List.of(alice), b.around("alice", 0));
      assertEquals(List.of(), b.around("nobody", 3));
      serverError("ERR count must be between 0 and 1000", () -> b.around("alice", 1001));
      assertThrows(IllegalArgumentException.class, b::scores);
      assertEquals(List.of(slot(T, 4), slot(T + 2 * DAY, 1)), b.history("alice"));
      assertEquals(List.of(), b.history("alice", Duration.ofDays(1)));
      assertEquals(List.of(), b.history("nobody"));
      assertEquals(new LeaderboardInfo(ms(3650 * DAY), ms(DAY), 3, 2, at(T), 0, 0), b.info());

      Leaderboard missing = t.leaderboard(keys.k("missing"));
      assertNull(missing.info());
      assertEquals(List.of(), missing.top(10));
      serverError("ERR increment must be a non-zero integer", () -> b.incr("alice", 0));

      // Unlikes lower a count in the slot of `at`, never below 0; REM removes a member everywhere.
      Map<String, Long> unlike = new LinkedHashMap<>();
      unlike.put("alice", -1L);
      unlike.put("bob", -2L);
      assertEquals(List.of(4L, 0L), b.incrby(unlike, at(T)));
      Map<String, Long> tooMany = new LinkedHashMap<>();
      tooMany.put("alice", -1L);
      tooMany.put("carol", -2L);
      serverError("ERR count would go below zero", () -> b.incrby(tooMany, at(T)));
      assertEquals(List.of(new Entry("alice", 4), carol), b.top(10));
      assertEquals(1, b.rem("alice", "nobody", "alice"));
      assertEquals(0, b.rem("alice"));
      assertNull(b.score("alice"));
      assertEquals(List.of(carol), b.top(10));
      assertEquals(0, missing.rem("x"));

      // Standings: equal totals share a tie rank; AROUND follows TOP's order.
      Leaderboard games = t.leaderboard(keys.k("games"));
      Map<String, Long> g = new LinkedHashMap<>();
      g.put("ann", 9L);
      g.put("bob", 7L);
      g.put("cat", 7L);
      g.put("dan", 5L);
      games.incrby(g);
      List<Long> ranks = new ArrayList<>();
      for (String name : List.of("ann", "bob", "cat", "dan")) {
        ranks.add(games.rank(name, true));
      }
      assertEquals(List.of(0L, 1L, 1L, 3L), ranks);
      assertEquals(List.of(1L, 2L), List.of(games.rank("cat"), games.rank("bob")));
      assertEquals(List.of(new Entry("cat", 7), new Entry("bob", 7), new Entry("dan", 5)), games.around("dan", 2));

      // UTF-8 members come back as they went in; the default window and slot.
      Leaderboard hourly = t.leaderboard(keys.k("hourly"));
      Map<String, Long> posts = new LinkedHashMap<>();
      posts.put("post:1", 1L);
      posts.put("café", 3L);
      assertEquals(List.of(1L, 3L), hourly.incrby(posts));
      assertEquals(List.of(new Entry("café", 3), new Entry("post:1", 1)), hourly.top(10));
      assertEquals(ms(DAY), hourly.info().window());
      assertEquals(2, hourly.info().members());
    }
  }

  @ParameterizedTest(name = "{0} resp{1}")
  @MethodSource("dev.tally.jedis.Fixtures#matrix")
  void stats(String server, int protocol) {
    try (JedisPooled j = client(server, protocol)) {
      Tally t = new Tally(j);
      Stats s = t.stats(keys.k("daily"));
      s.create(Duration.ofDays(1), 2000);
      assertEquals(2, s.add(List.of(1.5, 2.5), at(T), null));
      assertEquals(1, s.add(List.of(10.0), at(T + 2 * DAY), null));
      List<Period> periods = s.range();
      assertEquals(2, periods.size());
      double sd = Math.sqrt(0.5); // the sample stddev of 1.5 and 2.5
      assertEquals(new Period(at(T), new Summary(2, 4.0, 1.5, 2.5, 2.0, sd, 1.5, 2.5, 2.5)), periods.get(0));
      Period second = new Period(at(T + 2 * DAY), new Summary(1, 10, 10, 10, 10, 0, 10, 10, 10));
      assertEquals(second, periods.get(1));
      assertEquals(List.of(second), s.range(at(T + DAY), null));
      assertNull(s.get()); // the current period is empty
      Summary whole = s.get(Duration.ofDays(2000));
      assertEquals(3, whole.count());
      assertEquals(14.0, whole.sum());
      assertEquals(1.5, whole.min());
      assertEquals(10.0, whole.max());
      assertEquals(14.0 / 3, whole.mean(), 1e-12);
      assertEquals(List.of(1.5, 10.0), s.quantile(List.of(0.0, 1.0), Duration.ofDays(2000)));
      assertNull(s.quantile(0.5));
      StatsInfo info = s.info();
      assertEquals(ms(DAY), info.period());
      assertEquals(2000, info.keep());
      assertEquals(2, info.periods());
      assertTrue(info.memory() > 0);
      assertNull(t.stats(keys.k("missing")).info());
      assertNull(t.stats(keys.k("missing")).get());

      Stats latency = t.stats(keys.k("latency{page}"));
      assertEquals(3, latency.add(12, 8, 232));
      assertEquals(4, latency.add(List.of(40.0), null, Report.of(keys.k("slowest{page}"), "/checkout")));
      assertEquals(5, latency.add(List.of(1.0), null, Report.of(keys.k("slowest{page}"), "/home").keep(1)));
      // KEEP 1 keeps the highest mean: /checkout's 73 (12, 8, 232, 40) over /home's 58.6.
      assertEquals(1, j.zcard(keys.k("slowest{page}")));
      assertEquals(73.0, j.zscore(keys.k("slowest{page}"), "/checkout"));
      Summary now = latency.get();
      assertEquals(List.of(5L, 1.0, 232.0, 232.0), List.of(now.count(), now.min(), now.max(), now.p90()));
      serverError("ERR value is not a valid float", () -> latency.add(Double.POSITIVE_INFINITY));
      serverError("ERR quantile must be between 0 and 1", () -> latency.quantile(2));

      Stats tail = t.stats(keys.k("{shop}:/tail"));
      assertEquals(4, tail.add(List.of(1.0, 1.0, 1.0, 900.0), null,
          Report.of(keys.k("{shop}:slow"), "/tail").by(ReportStat.P99)));
      assertEquals(900.0, j.zscore(keys.k("{shop}:slow"), "/tail"));

      // CDF: exact between data points, 0 below the min and 1 at or above the max.
      Stats cdf = t.stats(keys.k("cdf"));
      assertNull(cdf.cdf(1));
      assertEquals(4, cdf.add(10, 20, 30, 40));
      assertEquals(List.of(0.0, 1.0, 1.0, 0.0), cdf.cdf(5, 40, 100, 9.99));
      assertEquals(List.of(0.5, 0.75, 0.25), cdf.cdf(25, 35, 15));
      assertEquals(List.of(1.0), cdf.cdf(List.of(40.0), Duration.ofDays(1)));

      // MGET / MQUANTILE: one summary over several objects.
      Stats cart = t.stats(keys.k("{shop}:/cart"));
      Stats pay = t.stats(keys.k("{shop}:/pay"));
      cart.add(10, 20, 30);
      pay.add(100, 300);
      List<String> both = List.of(cart.key(), pay.key(), keys.k("{shop}:/none"));
      Summary union = t.mget(both);
      assertEquals(List.of(5L, 460.0, 10.0, 300.0, 92.0),
          List.of(union.count(), union.sum(), union.min(), union.max(), union.mean()));
      assertEquals(union, t.mget(both, Duration.ofHours(2)));
      List<Double> q = t.mquantile(both, 0, 0.5, 1);
      assertEquals(10.0, q.get(0));
      assertEquals(30.0, q.get(1), 0.3);
      assertEquals(300.0, q.get(2));
      assertNull(t.mget(List.of(keys.k("{shop}:/none"))));
      assertNull(t.mquantile(List.of(keys.k("{shop}:/none")), 0.5));
    }
  }

  @ParameterizedTest(name = "{0} resp{1}")
  @MethodSource("dev.tally.jedis.Fixtures#matrix")
  void throttle(String server, int protocol) {
    long t0 = (System.currentTimeMillis() / 1000 - 60) * 1000; // a past second: replies with AT are exact
    try (JedisPooled j = client(server, protocol)) {
      Tally t = new Tally(j);
      Throttle th = t.throttle(keys.k("th"));
      Duration minute = Duration.ofMinutes(1);
      // 30 a minute, bursts of 15: T = 2 s, tau = 32 s.
      assertEquals(new ThrottleDecision(true, 16, 15, Duration.ZERO, ms(2000)), th.allow(15, 30, minute, 1, at(t0)));
      assertEquals(new ThrottleDecision(true, 16, 0, Duration.ZERO, ms(32000)), th.allow(15, 30, minute, 15, at(t0)));
      ThrottleDecision refused = th.allow(15, 30, minute, 1, at(t0 + 500));
      assertEquals(new ThrottleDecision(false, 16, 0, ms(1500), ms(31500)), refused);
      assertTrue(refused.canEverPass());
      assertEquals(ms(-1), th.allow(15, 30, minute, 17, at(t0 + 500)).retryAfter());
      assertEquals(new ThrottleDecision(true, 16, 2, Duration.ZERO, ms(28000)), th.allow(15, 30, minute, 0, at(t0 + 4000)));
      assertEquals(String.valueOf((t0 + 32000) * 1_000_000), j.get(keys.k("th")));
      // Without AT: the server's clock; the key expires when the burst is back.
      // (An interval of 10 s: a stall of the test between the two commands cannot expire it.)
      assertEquals(new ThrottleDecision(true, 5, 4, Duration.ZERO, ms(10_000)),
          t.throttle(keys.k("now")).allow(4, 10, Duration.ofSeconds(100)));
      long pttl = j.pttl(keys.k("now"));
      assertTrue(pttl > 0 && pttl <= 10_001, "pttl " + pttl);
      serverError("ERR rate is too high", () -> th.allow(0, 2_000_000, Duration.ofMillis(1)));
      serverError("ERR value is not an integer or out of range: count is an integer >= 1", () -> th.allow(1, 0, Duration.ofSeconds(1)));
      j.set(keys.k("s"), "text");
      serverError("WRONGTYPE Operation against a key holding the wrong kind of value",
          () -> t.throttle(keys.k("s")).allow(1, 1, Duration.ofSeconds(1)));
    }
  }
}
