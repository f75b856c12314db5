package dev.tally.jedis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.tally.testing.Server;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.stream.Stream;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.params.provider.Arguments;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.RedisProtocol;
import redis.clients.jedis.exceptions.JedisDataException;

/** What the client tests share: the server x protocol matrix, fresh keys, exact errors. */
final class Fixtures {
  private Fixtures() {}

  static final long HOUR = 3_600_000;
  static final long DAY = 24 * HOUR;
  /** A day boundary a week ago: old enough to be writable with AT, far from the kept ranges' edges. */
  static final long T = (System.currentTimeMillis() / DAY - 7) * DAY;

  /** Every server kind of TALLY_SERVERS, in RESP2 and RESP3. */
  static Stream<Arguments> matrix() {
    return Server.names().flatMap(n -> Stream.of(Arguments.of(n, 2), Arguments.of(n, 3)));
  }

  static JedisPooled client(String server, int protocol) {
    Server s = Server.of(server);
    return new JedisPooled(new HostAndPort("127.0.0.1", s.port), DefaultJedisClientConfig.builder()
        .protocol(protocol == 3 ? RedisProtocol.RESP3 : RedisProtocol.RESP2).build());
  }

  /** Fresh key names: {@code keys.k("c")} -> {@code test:<random>:c}. */
  static final class Keys {
    private final String run = UUID.randomUUID().toString().substring(0, 12);

    String k(String name) {
      return "test:" + run + ":" + name;
    }
  }

  static Instant at(long ms) {
    return Instant.ofEpochMilli(ms);
  }

  static Duration ms(long ms) {
    return Duration.ofMillis(ms);
  }

  /** Runs {@code code} and checks it throws the server's error line exactly. */
  static void serverError(String line, Executable code) {
    JedisDataException e = assertThrows(JedisDataException.class, code);
    assertEquals(line, e.getMessage());
  }
}
