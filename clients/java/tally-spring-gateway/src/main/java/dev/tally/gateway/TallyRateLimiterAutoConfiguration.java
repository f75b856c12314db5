package dev.tally.gateway;

import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.cloud.gateway.config.GatewayAutoConfiguration;
import org.springframework.cloud.gateway.filter.ratelimit.RateLimiter;
import org.springframework.cloud.gateway.support.ConfigurationService;
import org.springframework.context.annotation.Bean;
import redis.clients.jedis.UnifiedJedis;

/**
 * Makes a {@link TallyRateLimiter} bean (named {@code tallyRateLimiter}) when the application
 * has a Jedis {@code UnifiedJedis} bean ({@code JedisPooled}, {@code JedisCluster}) and no
 * {@code TallyRateLimiter} of its own. It runs before the gateway's own configuration, so
 * the {@code RequestRateLimiter} filter finds it as the application's {@code RateLimiter}.
 */
@AutoConfiguration(before = GatewayAutoConfiguration.class)
@ConditionalOnClass({RateLimiter.class, UnifiedJedis.class})
public class TallyRateLimiterAutoConfiguration {

  @Bean
  @ConditionalOnBean(UnifiedJedis.class)
  @ConditionalOnMissingBean(TallyRateLimiter.class)
  public TallyRateLimiter tallyRateLimiter(UnifiedJedis jedis, ConfigurationService configurationService) {
    return new TallyRateLimiter(jedis, configurationService);
  }
}
