package dev.tally.gateway;

import dev.tally.jedis.Tally;
import dev.tally.jedis.ThrottleDecision;
import jakarta.validation.constraints.Min;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.springframework.beans.BeansException;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.cloud.gateway.filter.ratelimit.AbstractRateLimiter;
import org.springframework.cloud.gateway.route.RouteDefinitionRouteLocator;
import org.springframework.cloud.gateway.support.ConfigurationService;
import org.springframework.context.ApplicationContext;
import org.springframework.context.ApplicationContextAware;
import org.springframework.core.style.ToStringCreator;
import org.springframework.util.Assert;
import org.springframework.validation.annotation.Validated;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import redis.clients.jedis.UnifiedJedis;

/**
 * A Spring Cloud Gateway {@code RateLimiter} configured as {@code RedisRateLimiter} is
 * ({@code replenishRate}, {@code burstCapacity}, {@code requestedTokens}; per route under
 * {@code tally-rate-limiter.*}, by default through {@code default-filters}, or from the Java
 * DSL) and answering with the same {@code X-RateLimit-*} headers, backed by one
 * {@code TSTHROTTLE.ALLOW} of the tally module per request instead of a Lua script.
 *
 * <p>The mapping: a token bucket of {@code burstCapacity} tokens refilled at
 * {@code replenishRate} a second, each request taking {@code requestedTokens}, is a GCRA
 * throttle of {@code replenishRate} per second ({@code count = replenishRate},
 * {@code period = 1s}: one token every {@code 1s / replenishRate}) with
 * {@code max_burst = burstCapacity - 1} (so {@code burstCapacity} tokens at once) and
 * {@code QUANTITY requestedTokens}: the same long-run rate of
 * {@code replenishRate / requestedTokens} requests a second, the same burst of
 * {@code burstCapacity / requestedTokens} requests from a full bucket, and
 * {@code X-RateLimit-Remaining} the whole tokens left. Where they differ (GCRA refills one
 * token at a time rather than a second's worth at each whole second, and a refused request
 * writes nothing) is in the package's README.
 *
 * <p>As {@code RedisRateLimiter} does, an error reaching the server (or any other) lets the
 * request through with {@code X-RateLimit-Remaining: -1} and logs it: a gateway should not
 * stop serving because its limiter's store is away.
 */
@ConfigurationProperties("spring.cloud.gateway.server.webflux.tally-rate-limiter")
public class TallyRateLimiter extends AbstractRateLimiter<TallyRateLimiter.Config>
    implements ApplicationContextAware {

  /** The prefix of a route's arguments: {@code tally-rate-limiter.replenishRate}. */
  public static final String CONFIGURATION_PROPERTY_NAME = "tally-rate-limiter";

  public static final String REMAINING_HEADER = "X-RateLimit-Remaining";
  public static final String REPLENISH_RATE_HEADER = "X-RateLimit-Replenish-Rate";
  public static final String BURST_CAPACITY_HEADER = "X-RateLimit-Burst-Capacity";
  public static final String REQUESTED_TOKENS_HEADER = "X-RateLimit-Requested-Tokens";

  private static final Duration SECOND = Duration.ofSeconds(1);

  private final Log log = LogFactory.getLog(getClass());
  /** Whether a ConfigurationService binds routes' arguments (else it is the context's). */
  private boolean configurable;
  private Tally tally;
  private Config defaultConfig;
  private Scheduler scheduler = Schedulers.boundedElastic();

  private boolean includeHeaders = true;
  private String remainingHeader = REMAINING_HEADER;
  private String replenishRateHeader = REPLENISH_RATE_HEADER;
  private String burstCapacityHeader = BURST_CAPACITY_HEADER;
  private String requestedTokensHeader = REQUESTED_TOKENS_HEADER;
  private String keyPrefix = "tally_rate_limiter";

  /** The bean the auto-configuration makes: per-route configuration from properties. */
  public TallyRateLimiter(UnifiedJedis jedis, ConfigurationService configurationService) {
    super(Config.class, CONFIGURATION_PROPERTY_NAME, configurationService);
    this.tally = new Tally(Objects.requireNonNull(jedis, "jedis"));
    this.configurable = configurationService != null;
  }

  /**
   * For the Java DSL, as {@code new RedisRateLimiter(replenishRate, burstCapacity)}: a default
   * configuration for the routes that use this instance; the client is the context's
   * {@code UnifiedJedis} bean.
   */
  public TallyRateLimiter(int defaultReplenishRate, int defaultBurstCapacity) {
    this(defaultReplenishRate, defaultBurstCapacity, 1);
  }

  public TallyRateLimiter(int defaultReplenishRate, int defaultBurstCapacity, int defaultRequestedTokens) {
    super(Config.class, CONFIGURATION_PROPERTY_NAME, (ConfigurationService) null);
    this.defaultConfig = new Config().setReplenishRate(defaultReplenishRate)
        .setBurstCapacity(defaultBurstCapacity).setRequestedTokens(defaultRequestedTokens);
  }

  /** For the Java DSL with a client of its own (no {@code UnifiedJedis} bean needed). */
  public TallyRateLimiter(UnifiedJedis jedis, int defaultReplenishRate, int defaultBurstCapacity,
      int defaultRequestedTokens) {
    this(defaultReplenishRate, defaultBurstCapacity, defaultRequestedTokens);
    this.tally = new Tally(Objects.requireNonNull(jedis, "jedis"));
  }

  @Override
  public void setApplicationContext(ApplicationContext context) throws BeansException {
    if (tally == null) {
      tally = new Tally(context.getBean(UnifiedJedis.class));
    }
    if (!configurable && context.getBeanNamesForType(ConfigurationService.class).length > 0) {
      setConfigurationService(context.getBean(ConfigurationService.class));
      configurable = true;
    }
  }

  Config getDefaultConfig() {
    return defaultConfig;
  }

  /** The configuration of a route: its own, else this instance's default, else the
   * {@code default-filters}' one; as {@code RedisRateLimiter} looks it up. */
  Config loadConfiguration(String routeId) {
    Config routeConfig = getConfig().getOrDefault(routeId, defaultConfig);
    if (routeConfig == null) {
      routeConfig = getConfig().get(RouteDefinitionRouteLocator.DEFAULT_FILTERS);
    }
    if (routeConfig == null) {
      throw new IllegalArgumentException("No Configuration found for route " + routeId + " or defaultFilters");
    }
    return routeConfig;
  }

  /** The key of a subject on a route: one native string holding its GCRA state. */
  public String key(String routeId, String id) {
    // A hash tag around the route and id, as RedisRateLimiter's keys have.
    return keyPrefix + ".{" + routeId + "." + id + "}";
  }

  /**
   * The {@code TSTHROTTLE.ALLOW} of one request at {@code at} (null: the server's clock), or
   * null when the configuration refuses every request (a burst capacity of 0).
   */
  ThrottleDecision decide(Config config, String key, Instant at) {
    if (config.getBurstCapacity() == 0) {
      return null;
    }
    return tally.throttle(key).allow(config.getBurstCapacity() - 1L, config.getReplenishRate(), SECOND,
        config.getRequestedTokens(), at);
  }

  @Override
  public Mono<Response> isAllowed(String routeId, String id) {
    if (tally == null) {
      throw new IllegalStateException("TallyRateLimiter is not initialized: it needs a UnifiedJedis");
    }
    Config config = loadConfiguration(routeId);
    String key = key(routeId, id);
    return Mono.fromCallable(() -> {
      ThrottleDecision d = decide(config, key, null);
      // A capacity of 0 refuses everything, as the token bucket does, without a round trip.
      return d == null ? new Response(false, getHeaders(config, 0L))
          : new Response(d.allowed(), getHeaders(config, d.remaining()));
    }).subscribeOn(scheduler).onErrorResume(e -> {
      // Fail open, as RedisRateLimiter does: alert on this log line.
      log.error("Error calling TSTHROTTLE.ALLOW for the rate limiter", e);
      return Mono.just(new Response(true, getHeaders(config, -1L)));
    });
  }

  /** The headers of a reply: RedisRateLimiter's, with the tokens left. */
  public Map<String, String> getHeaders(Config config, Long tokensLeft) {
    Map<String, String> headers = new HashMap<>();
    if (isIncludeHeaders()) {
      headers.put(remainingHeader, tokensLeft.toString());
      headers.put(replenishRateHeader, String.valueOf(config.getReplenishRate()));
      headers.put(burstCapacityHeader, String.valueOf(config.getBurstCapacity()));
      headers.put(requestedTokensHeader, String.valueOf(config.getRequestedTokens()));
    }
    return headers;
  }

  /** The scheduler the blocking Jedis call runs on (default: {@code boundedElastic}). */
  public void setScheduler(Scheduler scheduler) {
    this.scheduler = Objects.requireNonNull(scheduler, "scheduler");
  }

  public boolean isIncludeHeaders() {
    return includeHeaders;
  }

  public void setIncludeHeaders(boolean includeHeaders) {
    this.includeHeaders = includeHeaders;
  }

  public String getRemainingHeader() {
    return remainingHeader;
  }

  public void setRemainingHeader(String remainingHeader) {
    this.remainingHeader = remainingHeader;
  }

  public String getReplenishRateHeader() {
    return replenishRateHeader;
  }

  public void setReplenishRateHeader(String replenishRateHeader) {
    this.replenishRateHeader = replenishRateHeader;
  }

  public String getBurstCapacityHeader() {
    return burstCapacityHeader;
  }

  public void setBurstCapacityHeader(String burstCapacityHeader) {
    this.burstCapacityHeader = burstCapacityHeader;
  }

  public String getRequestedTokensHeader() {
    return requestedTokensHeader;
  }

  public void setRequestedTokensHeader(String requestedTokensHeader) {
    this.requestedTokensHeader = requestedTokensHeader;
  }

  /** The start of every key's name (default {@code tally_rate_limiter}). */
  public String getKeyPrefix() {
    return keyPrefix;
  }

  public void setKeyPrefix(String keyPrefix) {
    this.keyPrefix = Objects.requireNonNull(keyPrefix, "keyPrefix");
  }

  /** A route's limit, as {@code RedisRateLimiter.Config}. */
  @Validated
  public static class Config {
    /** Tokens added per second: the long-run rate is {@code replenishRate / requestedTokens}
     * requests a second. */
    @Min(1)
    private int replenishRate;

    /** Tokens a subject may hold: a burst of {@code burstCapacity / requestedTokens} requests
     * at once; 0 refuses every request. */
    @Min(0)
    private int burstCapacity = 1;

    /** Tokens each request takes. */
    @Min(1)
    private int requestedTokens = 1;

    public int getReplenishRate() {
      return replenishRate;
    }

    public Config setReplenishRate(int replenishRate) {
      this.replenishRate = replenishRate;
      return this;
    }

    public int getBurstCapacity() {
      return burstCapacity;
    }

    public Config setBurstCapacity(int burstCapacity) {
      Assert.isTrue(burstCapacity >= this.replenishRate, "BurstCapacity(" + burstCapacity
          + ") must be greater than or equal than replenishRate(" + this.replenishRate + ")");
      this.burstCapacity = burstCapacity;
      return this;
    }

    public int getRequestedTokens() {
      return requestedTokens;
    }

    public Config setRequestedTokens(int requestedTokens) {
      this.requestedTokens = requestedTokens;
      return this;
    }

    @Override
    public String toString() {
      return new ToStringCreator(this).append("replenishRate", replenishRate)
          .append("burstCapacity", burstCapacity).append("requestedTokens", requestedTokens).toString();
    }
  }
}
