package dev.tally.jedis;

import java.time.Duration;
import java.time.Instant;
import redis.clients.jedis.CommandObject;
import redis.clients.jedis.Response;

/**
 * The pipelined form of {@link Throttle}: the same methods, answering Jedis {@code Response}s
 * filled when the pipeline syncs (or the transaction executes).
 *
 * <p>One limited subject ({@code TSTHROTTLE.*}): its key holds when its earlier requests are paid
 * off, and expires once it is back to a full burst.
 */
public final class PipelinedThrottle {
  private final TallyPipeline tally;
  private final String key;

  PipelinedThrottle(TallyPipeline tally, String key) {
    this.tally = tally;
    this.key = key;
  }

  public String key() {
    return key;
  }

  private <T> Response<T> run(CommandObject<T> command) {
    return tally.execute(command);
  }

  /** {@code TSTHROTTLE.ALLOW}: admits one request at {@code count} per {@code period} with
   * bursts of {@code maxBurst} ({@code maxBurst + 1} at once); a refusal writes nothing. */
  public Response<ThrottleDecision> allow(long maxBurst, long count, Duration period) {
    return run(tally.commands().throttleAllow(key, maxBurst, count, period, 1, null));
  }

  /** Admits {@code quantity} (0 only checks) at {@code at} (null: now). */
  public Response<ThrottleDecision> allow(long maxBurst, long count, Duration period, long quantity, Instant at) {
    return run(tally.commands().throttleAllow(key, maxBurst, count, period, quantity, at));
  }
}
