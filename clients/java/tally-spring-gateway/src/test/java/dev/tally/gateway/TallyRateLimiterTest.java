package dev.tally.gateway;

import static org.junit.jupiter.api.Assertions.*;

import dev.tally.jedis.ThrottleDecision;
import dev.tally.testing.Server;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.springframework.cloud.gateway.filter.ratelimit.RateLimiter;
import org.springframework.cloud.gateway.route.RouteDefinitionRouteLocator;
import redis.clients.jedis.JedisPooled;

/**
 * The limiter against RedisRateLimiter's own token bucket: its Lua script (read from the
 * spring-cloud-gateway jar on the test classpath) and TSTHROTTLE.ALLOW run side by side in
 * the same server on the same schedule, with the same explicit times.
 */
class TallyRateLimiterTest {
  private final String run = UUID.randomUUID().toString().substring(0, 12);

  static String bucketScript() throws IOException {
    try (InputStream in = RateLimiter.class.getClassLoader()
        .getResourceAsStream("META-INF/scripts/request_rate_limiter.lua")) {
      assertNotNull(in, "request_rate_limiter.lua is in the gateway's jar");
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  private static TallyRateLimiter.Config config(int rate, int burst, int requested) {
    return new TallyRateLimiter.Config().setReplenishRate(rate).setBurstCapacity(burst).setRequestedTokens(requested);
  }

  /**
   * Requests at whole seconds, where the token bucket (which refills a second's worth at each
   * whole second of the server's TIME) and GCRA (one token every 1/rate) hold the same tokens:
   * every decision and every remaining count is the same.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("dev.tally.testing.Server#names")
  void sameDecisionsAsTheTokenBucketAtWholeSeconds(String server) throws IOException {
    Server s = Server.of(server);
    try (JedisPooled j = new JedisPooled("127.0.0.1", s.port)) {
      String sha = j.scriptLoad(bucketScript());
      TallyRateLimiter limiter = new TallyRateLimiter(j, 1, 1, 1);
      Random random = new Random(42);
      long base = System.currentTimeMillis() / 1000 - 600; // a past second: AT is exact
      int[][] configs = {{1, 1, 1}, {2, 4, 1}, {5, 10, 3}, {10, 10, 10}, {3, 7, 2}, {4, 4, 5}};
      for (int[] c : configs) {
        TallyRateLimiter.Config config = config(c[0], c[1], c[2]);
        String bucketKey = "test:" + run + ":bucket:" + c[0] + ":" + c[1] + ":" + c[2];
        String gcraKey = "test:" + run + ":gcra:" + c[0] + ":" + c[1] + ":" + c[2];
        long t = base;
        int allowed = 0;
        for (int i = 0; i < 300; i++) {
          t += random.nextInt(4) == 0 ? random.nextInt(3) : 0; // several requests a second, some gaps
          @SuppressWarnings("unchecked")
          List<Long> bucket = (List<Long>) j.evalsha(sha, List.of(bucketKey + ".tokens", bucketKey + ".timestamp"),
              List.of(String.valueOf(c[0]), String.valueOf(c[1]), String.valueOf(t), String.valueOf(c[2])));
          ThrottleDecision gcra = limiter.decide(config, gcraKey, Instant.ofEpochSecond(t));
          // The schedule's times are not the server's: keep every key, so that a stall of the
          // test (keys expire on the server's clock) cannot reset one side alone.
          j.persist(bucketKey + ".tokens");
          j.persist(bucketKey + ".timestamp");
          j.persist(gcraKey);
          String where = "request " + i + " at +" + (t - base) + " s with " + config;
          assertEquals(bucket.get(0) == 1, gcra.allowed(), where);
          assertEquals(bucket.get(1), gcra.remaining(), where);
          allowed += gcra.allowed() ? 1 : 0;
        }
        assertTrue(c[2] > c[1] ? allowed == 0 : allowed > 0, "allowed " + allowed);
      }
    }
  }

  /** Between whole seconds they differ: GCRA refills one token every 1/rate, the bucket a
   * second's worth at each whole second. 2 a second, burst 2, drained at t = 0 (the key kept
   * however slow the test, as above): */
  @Test
  void refillsOneTokenAtATime() throws IOException {
    Server s = Server.of(Server.kinds().get(0)[0]);
    try (JedisPooled j = new JedisPooled("127.0.0.1", s.port)) {
      TallyRateLimiter limiter = new TallyRateLimiter(j, 1, 1, 1);
      TallyRateLimiter.Config config = config(2, 2, 1);
      String key = "test:" + run + ":refill";
      long t0 = (System.currentTimeMillis() / 1000 - 60) * 1000;
      java.util.function.LongFunction<ThrottleDecision> at = ms -> {
        ThrottleDecision d = limiter.decide(config, key, Instant.ofEpochMilli(t0 + ms));
        j.persist(key);
        return d;
      };
      assertEquals(1, at.apply(0).remaining());
      assertEquals(0, at.apply(0).remaining());
      assertFalse(at.apply(499).allowed());
      // Half a second later one token is back (the bucket would wait for t0 + 1 s, then give 2).
      ThrottleDecision half = at.apply(500);
      assertTrue(half.allowed());
      assertEquals(0, half.remaining());
      assertTrue(at.apply(1000).allowed());
      assertFalse(at.apply(1000).allowed());
    }
  }

  @Test
  void headersConfigurationAndFailOpen() {
    Server s = Server.of(Server.kinds().get(0)[0]);
    try (JedisPooled j = new JedisPooled("127.0.0.1", s.port)) {
      // (1 token a second: the key lives 4 s after the first request.)
      TallyRateLimiter limiter = new TallyRateLimiter(j, 1, 5, 4);
      String id = run + ":h";
      RateLimiter.Response first = limiter.isAllowed("route", id).block();
      assertTrue(first.isAllowed());
      assertEquals(Map.of("X-RateLimit-Remaining", "1", "X-RateLimit-Replenish-Rate", "1",
          "X-RateLimit-Burst-Capacity", "5", "X-RateLimit-Requested-Tokens", "4"), first.getHeaders());
      assertTrue(j.pttl("tally_rate_limiter.{route." + id + "}") > 0);
      // A route's own configuration wins over the instance's default, and over default-filters'.
      limiter.getConfig().put("own", config(2, 2, 1));
      limiter.getConfig().put(RouteDefinitionRouteLocator.DEFAULT_FILTERS, config(7, 7, 1));
      assertEquals(2, limiter.loadConfiguration("own").getReplenishRate());
      assertEquals(1, limiter.loadConfiguration("other").getReplenishRate());
      TallyRateLimiter propertiesOnly = new TallyRateLimiter(j, null);
      propertiesOnly.getConfig().put(RouteDefinitionRouteLocator.DEFAULT_FILTERS, config(7, 7, 1));
      assertEquals(7, propertiesOnly.loadConfiguration("other").getReplenishRate());
      assertThrows(IllegalArgumentException.class, () -> new TallyRateLimiter(j, null).loadConfiguration("x"));

      // A burst capacity of 0 refuses every request, as the token bucket does.
      limiter.getConfig().put("closed", new TallyRateLimiter.Config().setBurstCapacity(0).setReplenishRate(0));
      RateLimiter.Response closed = limiter.isAllowed("closed", id).block();
      assertFalse(closed.isAllowed());
      assertEquals("0", closed.getHeaders().get("X-RateLimit-Remaining"));

      limiter.setIncludeHeaders(false);
      assertEquals(Map.of(), limiter.isAllowed("route", id).block().getHeaders());
    }
    // The server is away: the request passes with -1 remaining, as with RedisRateLimiter.
    try (JedisPooled away = new JedisPooled("127.0.0.1", Server.freePort())) {
      RateLimiter.Response open = new TallyRateLimiter(away, 1, 1, 1).isAllowed("route", "x").block();
      assertTrue(open.isAllowed());
      assertEquals("-1", open.getHeaders().get("X-RateLimit-Remaining"));
      assertEquals("1", open.getHeaders().get("X-RateLimit-Burst-Capacity"));
    }
  }
}
