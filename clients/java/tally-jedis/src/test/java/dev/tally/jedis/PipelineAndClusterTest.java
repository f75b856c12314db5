package dev.tally.jedis;

import static dev.tally.jedis.Fixtures.*;
import static org.junit.jupiter.api.Assertions.*;

import dev.tally.testing.Cluster;
import dev.tally.testing.Server;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;
import redis.clients.jedis.AbstractPipeline;
import redis.clients.jedis.AbstractTransaction;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.RedisProtocol;
import redis.clients.jedis.Response;
import redis.clients.jedis.exceptions.JedisClusterOperationException;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * Pipelines and transactions on a JedisPooled, and a three-primary cluster (of the "redis"
 * kind of TALLY_SERVERS, else the first) through JedisCluster and its ClusterPipeline.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PipelineAndClusterTest {
  private Cluster cluster;

  @BeforeAll
  void startCluster() {
    String[] kind = Server.kind("redis");
    cluster = new Cluster(kind[0], kind[1]);
  }

  @AfterAll
  void stopCluster() {
    if (cluster != null) {
      boolean alive = cluster.nodes.stream().allMatch(Server::alive);
      cluster.close();
      assertTrue(alive, "a cluster node died during the tests");
    }
  }

  private JedisCluster clusterClient(int protocol) {
    return new JedisCluster(Set.of(new HostAndPort("127.0.0.1", cluster.nodes.get(0).port)),
        DefaultJedisClientConfig.builder().protocol(protocol == 3 ? RedisProtocol.RESP3 : RedisProtocol.RESP2).build());
  }

  @ParameterizedTest(name = "{0} resp{1}")
  @MethodSource("dev.tally.jedis.Fixtures#matrix")
  void pipelineAndTransaction(String server, int protocol) {
    Keys keys = new Keys();
    try (JedisPooled j = client(server, protocol)) {
      String c = keys.k("pc");
      String b = keys.k("pb");
      String s = keys.k("ps");
      Response<Void> created;
      Response<Long> incr;
      Response<List<Long>> sum;
      Response<Decision> limit;
      Response<List<Long>> totals;
      Response<List<Entry>> top;
      Response<Long> missingScore;
      Response<Long> added;
      Response<Summary> summary;
      Response<ThrottleDecision> allow;
      Response<Void> again;
      Response<MultiDecision> multi;
      try (AbstractPipeline p = j.pipelined()) {
        TallyPipeline tp = Tally.pipeline(p);
        created = tp.counter(c).create(List.of(Resolution.of(Duration.ofHours(1), 1000)));
        incr = tp.counter(c).incrby(4, at(T));
        sum = tp.counter(c).sum(List.of(Duration.ofHours(1)), at(T));
        limit = tp.counter(c).limit(1, List.of(WindowLimit.of(Duration.ofHours(1), 4)), at(T), false);
        Map<String, Long> inc = new LinkedHashMap<>();
        inc.put("x", 2L);
        inc.put("y", 1L);
        totals = tp.leaderboard(b).incrby(inc);
        top = tp.leaderboard(b).top(10);
        missingScore = tp.leaderboard(b).score("z");
        added = tp.stats(s).add(1, 2, 3);
        summary = tp.stats(s).get();
        allow = tp.throttle(keys.k("pt")).allow(0, 1, Duration.ofMinutes(1), 1, at(T));
        again = tp.counter(c).create();
        multi = tp.mlimit(Map.of(keys.k("pm"), List.of(WindowLimit.of(Duration.ofMinutes(1), 1))), 1);
        p.sync();
      }
      assertNull(created.get());
      assertEquals(4L, incr.get());
      assertEquals(List.of(4L), sum.get());
      assertEquals(new Decision(false, ms(HOUR), List.of(4L), List.of()), limit.get());
      assertEquals(List.of(2L, 1L), totals.get());
      assertEquals(List.of(new Entry("x", 2), new Entry("y", 1)), top.get());
      assertNull(missingScore.get());
      assertEquals(3L, added.get());
      assertEquals(2.0, summary.get().mean());
      assertEquals(new ThrottleDecision(true, 1, 0, Duration.ZERO, ms(60_000)), allow.get());
      JedisDataException e = assertThrows(JedisDataException.class, again::get);
      assertEquals("ERR key already exists", e.getMessage());
      assertTrue(multi.get().allowed());

      Response<Long> incrInTx;
      Response<List<Long>> sumInTx;
      try (AbstractTransaction tx = j.multi()) {
        TallyPipeline tp = Tally.pipeline(tx);
        incrInTx = tp.counter(c).incrby(1, at(T + HOUR));
        sumInTx = tp.counter(c).sum(List.of(Duration.ofHours(2)), at(T + HOUR));
        tx.exec();
      }
      assertEquals(1L, incrInTx.get());
      assertEquals(List.of(5L), sumInTx.get());
    }
  }

  @ParameterizedTest(name = "resp{0}")
  @ValueSource(ints = {2, 3})
  void cluster(int protocol) {
    Keys keys = new Keys();
    try (JedisCluster j = clusterClient(protocol)) {
      Tally t = new Tally(j);
      String run = keys.k("");
      List<String> counters = new ArrayList<>();
      Set<Integer> nodes = new HashSet<>();
      for (int i = 0; i < 30; i++) {
        counters.add("c:" + run + i);
        nodes.add(JedisClusterCRC16.getSlot(counters.get(i)) * 3 / 16384);
      }
      assertEquals(3, nodes.size(), "the keys spread over the three primaries");
      // One moment for every counter call: the finest slot (1 s) stays the same however slow
      // the machine (it is kept for 2 minutes).
      java.time.Instant now = java.time.Instant.now();
      for (int i = 0; i < counters.size(); i++) {
        Counter c = t.counter(counters.get(i));
        assertEquals(i + 1, c.incrby(i + 1, now));
        assertFalse(c.limit(1, List.of(WindowLimit.of(Duration.ofMinutes(1), i + 1)), now, false).allowed());
        assertEquals(List.of((long) i + 1), c.sum(List.of(Duration.ofMinutes(1)), now));
        assertTrue(t.throttle("th:" + run + i).allow(0, 1, Duration.ofMinutes(1)).allowed());
      }
      Leaderboard b = t.leaderboard("{board}:" + run);
      assertEquals(3, b.incr("a", 3));
      assertEquals(List.of(new Entry("a", 3)), b.top(5));
      Stats s = t.stats("{st}:" + run + "a");
      s.add(List.of(5.0), null, Report.of("{st}:" + run + "rank", "a"));
      assertEquals(5.0, j.zscore("{st}:" + run + "rank", "a"));

      // Keys of one hash tag go together; keys of two slots are refused by Jedis before sending.
      Map<String, List<WindowLimit>> limits = new LinkedHashMap<>();
      limits.put("{u1}:" + run + "ip", List.of(WindowLimit.of(Duration.ofMinutes(1), 1)));
      limits.put("{u1}:" + run + "user", List.of(WindowLimit.of(Duration.ofMinutes(1), 2)));
      assertTrue(t.mlimit(limits, 1).allowed());
      assertFalse(t.mlimit(limits, 1).allowed());
      assertEquals(List.of(2L), t.msum(List.of("{u1}:" + run + "ip", "{u1}:" + run + "user"), Duration.ofMinutes(1)));
      Map<String, List<WindowLimit>> spread = new LinkedHashMap<>();
      spread.put(counters.get(0), List.of(WindowLimit.of(Duration.ofMinutes(1), 100)));
      spread.put(counters.get(1), List.of(WindowLimit.of(Duration.ofMinutes(1), 100)));
      if (JedisClusterCRC16.getSlot(counters.get(0)) != JedisClusterCRC16.getSlot(counters.get(1))) {
        assertThrows(JedisClusterOperationException.class, () -> t.mlimit(spread, 1));
      }

      // A ClusterPipeline routes each command by its key.
      List<Response<Long>> incrs = new ArrayList<>();
      try (AbstractPipeline p = j.pipelined()) {
        TallyPipeline tp = Tally.pipeline(p);
        for (String k : counters) {
          incrs.add(tp.counter(k).incr(now));
        }
        p.sync();
      }
      for (int i = 0; i < counters.size(); i++) {
        assertEquals(i + 2, incrs.get(i).get());
      }
    }
  }

  @Test
  void capacity() {
    Keys keys = new Keys();
    String[] kind = Server.kind("redis");
    try (JedisPooled j = client(kind[0], 3)) {
      Tally t = new Tally(j);
      Leaderboard b = t.leaderboard(keys.k("trending"));
      b.create(Duration.ofHours(1), Duration.ofMinutes(1), 2);
      LeaderboardInfo info = b.info();
      assertEquals(2, info.capacity());
      assertEquals(0, info.error());
      Map<String, Long> inc = new LinkedHashMap<>();
      inc.put("a", 3L);
      inc.put("b", 1L);
      assertEquals(List.of(3L, 1L), b.incrby(inc));
      assertEquals(List.of(new Entry("a", 3), new Entry("b", 1)), b.top(10));
      assertEquals(0, b.info().error());
    }
  }
}
