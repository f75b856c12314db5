package dev.tally.gateway;

import static org.junit.jupiter.api.Assertions.*;

import com.sun.net.httpserver.HttpServer;
import dev.tally.testing.Server;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.cloud.gateway.filter.ratelimit.KeyResolver;
import org.springframework.cloud.gateway.route.RouteLocator;
import org.springframework.cloud.gateway.route.builder.RouteLocatorBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import reactor.core.publisher.Mono;
import redis.clients.jedis.JedisPooled;

/**
 * A real Spring Cloud Gateway on a local port, in front of a small HTTP backend, with two
 * rate-limited routes: {@code /props/**} configured by properties (2 a second, burst 4),
 * {@code /dsl/**} by the Java DSL (2 tokens a second, burst 4, 2 tokens a request: 1
 * request a second, bursts of 2). The rates are low so that a client slowed down by a
 * loaded machine still asks faster than them. Requests go over HTTP; every answer (200 or 429, and its
 * X-RateLimit-Remaining) is checked against the GCRA model at both ends of its round trip.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class GatewayTest {
  private HttpServer backend;
  private ConfigurableApplicationContext gateway;
  private int port;
  private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
      .connectTimeout(Duration.ofSeconds(10)).build();
  private final String run = UUID.randomUUID().toString().substring(0, 12);

  @SpringBootConfiguration
  @EnableAutoConfiguration
  static class App {
    @Bean(destroyMethod = "close")
    JedisPooled jedis(@Value("${test.redis.port}") int port) {
      return new JedisPooled("127.0.0.1", port);
    }

    /** The subject is the X-User header; a request without one is refused (403). */
    @Bean
    KeyResolver userKeyResolver() {
      return exchange -> Mono.justOrEmpty(exchange.getRequest().getHeaders().getFirst("X-User"));
    }

    @Bean
    RouteLocator dslRoutes(RouteLocatorBuilder routes, KeyResolver userKeyResolver,
        @Value("${test.backend}") String backend) {
      return routes.routes()
          .route("dsl", r -> r.path("/dsl/**").filters(f -> f.requestRateLimiter()
              .rateLimiter(TallyRateLimiter.class, c -> c.setReplenishRate(2).setBurstCapacity(4).setRequestedTokens(2))
              .configure(c -> c.setKeyResolver(userKeyResolver))).uri(backend))
          .build();
    }
  }

  @BeforeAll
  void start() throws IOException, InterruptedException {
    Server redis = Server.of(Server.kinds().get(0)[0]);
    backend = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    backend.createContext("/", exchange -> {
      byte[] body = "ok".getBytes(StandardCharsets.UTF_8);
      exchange.sendResponseHeaders(200, body.length);
      exchange.getResponseBody().write(body);
      exchange.close();
    });
    backend.start();
    String routes = "spring.cloud.gateway.server.webflux.routes[0].";
    String args = routes + "filters[0].args.";
    gateway = new SpringApplicationBuilder(App.class).web(WebApplicationType.REACTIVE).properties(
        "server.port=0",
        "server.address=127.0.0.1",
        "spring.main.banner-mode=off",
        "server.shutdown=immediate", // no graceful wait for the client's idle keep-alive connections
        "logging.level.root=WARN",
        "test.redis.port=" + redis.port,
        "test.backend=http://127.0.0.1:" + backend.getAddress().getPort(),
        routes + "id=props",
        routes + "uri=${test.backend}",
        routes + "predicates[0]=Path=/props/**",
        routes + "filters[0].name=RequestRateLimiter",
        args + "key-resolver=#{@userKeyResolver}",
        args + "tally-rate-limiter.replenishRate=2",
        args + "tally-rate-limiter.burstCapacity=4",
        args + "tally-rate-limiter.requestedTokens=1").run();
    port = Integer.parseInt(gateway.getEnvironment().getProperty("local.server.port"));
    // Warm the gateway (JIT, connections) on subjects of their own before anything is timed.
    for (int i = 0; i < 20; i++) {
      get("/props/w", run + ":warm");
      get("/dsl/w", run + ":warm");
    }
  }

  @AfterAll
  void stop() {
    if (gateway != null) {
      gateway.close();
    }
    if (backend != null) {
      backend.stop(0);
    }
  }

  /** One request over HTTP: its status, headers, and the client's clock around it (s). */
  record Call(double sent, double received, int status, String body, Map<String, List<String>> headers) {
    long remaining() {
      return Long.parseLong(headers.get("x-ratelimit-remaining").get(0));
    }
  }

  private Call get(String path, String user) throws IOException, InterruptedException {
    HttpRequest.Builder req = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
        .timeout(Duration.ofSeconds(20));
    if (user != null) {
      req.header("X-User", user);
    }
    double sent = System.nanoTime() / 1e9;
    HttpResponse<String> res = http.send(req.build(), HttpResponse.BodyHandlers.ofString());
    double received = System.nanoTime() / 1e9;
    Map<String, List<String>> headers = new java.util.HashMap<>();
    res.headers().map().forEach((k, v) -> headers.put(k.toLowerCase(java.util.Locale.ROOT), v));
    return new Call(sent, received, res.statusCode(), res.body(), headers);
  }

  /**
   * Requests one after another, a few ms apart, for {@code seconds} and until a few have been
   * refused (on a slow machine a round trip may take long; at most 60 s).
   */
  private List<Call> drive(String path, String user, double seconds) throws Exception {
    List<Call> calls = new ArrayList<>();
    double start = System.nanoTime() / 1e9;
    int refused = 0;
    while (System.nanoTime() / 1e9 < start + seconds || (refused < 5 && System.nanoTime() / 1e9 < start + 60)) {
      Call call = get(path, user);
      calls.add(call);
      refused += call.status() == 429 ? 1 : 0;
      Thread.sleep(10);
    }
    return calls;
  }

  /**
   * Checks every call against GCRA with {@code rate} tokens a second, {@code burst} tokens
   * and {@code q} tokens a request. With t the (unknown) server times and U(i..j) the tokens of
   * the allowed calls from i to j, a call j is allowed iff for every allowed i before it
   * U(i..j-1) + q <= burst + rate * (t_j - t_i), and leaves
   * min(burst, min_i floor(burst - U(i..j) + rate * (t_j - t_i))) tokens. Each t lies within
   * its call's round trip (plus a few ms for the server clock's granularity), so each check
   * is made at the bound that favours the server: a loaded machine widens the bounds and
   * never fails the test.
   */
  private static void checkModel(List<Call> calls, int rate, int burst, int q, String what) {
    final double slack = 0.005;
    List<Integer> allowed = new ArrayList<>();
    for (int j = 0; j < calls.size(); j++) {
      Call c = calls.get(j);
      boolean ok = c.status() == 200;
      assertTrue(ok || c.status() == 429, what + " call " + j + " status " + c.status());
      assertEquals(List.of(String.valueOf(rate)), c.headers().get("x-ratelimit-replenish-rate"));
      assertEquals(List.of(String.valueOf(burst)), c.headers().get("x-ratelimit-burst-capacity"));
      assertEquals(List.of(String.valueOf(q)), c.headers().get("x-ratelimit-requested-tokens"));
      // Could it have been refused / must it have been? Look at every allowed call before it.
      boolean mustRefuse = q > burst;
      boolean mayRefuse = q > burst;
      long tokens = 0; // U(i..j-1), walking i backwards
      long remLo = burst;
      long remHi = burst;
      for (int k = allowed.size() - 1; k >= 0; k--) {
        Call i = calls.get(allowed.get(k));
        tokens += q;
        double longest = c.received() - i.sent() + slack;
        double shortest = Math.max(0, c.sent() - i.received() - slack);
        if (tokens + q > burst + rate * longest) {
          mustRefuse = true;
        }
        if (tokens + q > burst + rate * shortest) {
          mayRefuse = true;
        }
        long after = ok ? tokens + q : tokens;
        remLo = Math.min(remLo, (long) Math.floor(burst - after + rate * shortest));
        remHi = Math.min(remHi, (long) Math.floor(burst - after + rate * longest));
      }
      if (ok) {
        remLo = Math.min(remLo, burst - q);
        remHi = Math.min(remHi, burst - q);
      }
      String where = what + " call " + j + " (" + (ok ? "allowed" : "refused") + ", remaining "
          + c.remaining() + ", model " + Math.max(0, remLo) + ".." + Math.max(0, remHi) + ")";
      assertFalse(ok && mustRefuse, where + ": GCRA refuses it");
      assertFalse(!ok && !mayRefuse, where + ": GCRA allows it");
      assertTrue(c.remaining() >= Math.max(0, remLo) && c.remaining() <= Math.max(0, remHi), where);
      if (ok) {
        allowed.add(j);
        assertEquals("ok", c.body());
      }
    }
    // The rate over the run: the burst, then the rate, and never more.
    double span = calls.get(calls.size() - 1).received() - calls.get(0).sent();
    assertTrue(allowed.size() >= burst / q, what + ": " + allowed.size() + " allowed, less than a burst");
    assertTrue(allowed.size() * q <= burst + rate * span + rate * slack, what + ": " + allowed.size() + " allowed in " + span + " s");
    assertTrue(allowed.size() < calls.size(), what + ": nothing refused in " + calls.size() + " calls over " + span + " s");
  }

  @Test
  void routeConfiguredByProperties() throws Exception {
    String user = run + ":p";
    List<Call> calls = drive("/props/x", user, 3);
    checkModel(calls, 2, 4, 1, "props");
    Call first = calls.get(0);
    assertEquals(200, first.status());
    assertEquals(3, first.remaining());
    // Another subject has a full burst of its own.
    assertEquals(3, get("/props/x", user + "-other").remaining());
    // No key: the filter refuses it, as with RedisRateLimiter (deny-empty-key).
    assertEquals(403, get("/props/x", null).status());
  }

  @Test
  void routeConfiguredByTheJavaDsl() throws Exception {
    String user = run + ":d";
    List<Call> calls = drive("/dsl/y", user, 3);
    checkModel(calls, 2, 4, 2, "dsl");
    assertEquals(2, calls.get(0).remaining());
    Call refused = calls.stream().filter(c -> c.status() == 429).findFirst().orElseThrow();
    assertEquals("", refused.body());
    assertEquals(List.of("4"), refused.headers().get("x-ratelimit-burst-capacity"));
  }
}
