package dev.tally.testing;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import redis.clients.jedis.Jedis;

/**
 * A three-primary Redis Cluster of one server kind, every node with the module loaded,
 * made with {@code redis-cli --cluster create}.
 */
public final class Cluster implements AutoCloseable {
  public final List<Server> nodes = new ArrayList<>();

  public Cluster(String name, String binary) {
    Random random = new Random();
    try {
      for (int i = 0; i < 3; i++) {
        int port;
        do {
          port = 20000 + random.nextInt(20000);
        } while (!Server.portFree(port) || !Server.portFree(port + 10000));
        nodes.add(Server.start(name + "-cluster", binary,
            List.of("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"), port));
      }
      List<String> cmd = new ArrayList<>(List.of("redis-cli", "--cluster", "create"));
      nodes.forEach(n -> cmd.add(n.hostPort()));
      cmd.addAll(List.of("--cluster-replicas", "0", "--cluster-yes"));
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes());
      if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
        throw new IllegalStateException("redis-cli --cluster create failed:\n" + out);
      }
      long deadline = System.currentTimeMillis() + 30_000;
      for (Server n : nodes) {
        try (Jedis j = new Jedis("127.0.0.1", n.port)) {
          while (!j.clusterInfo().contains("cluster_state:ok")) {
            if (System.currentTimeMillis() > deadline) {
              throw new IllegalStateException("cluster not ok");
            }
            Server.sleep(100);
          }
        }
      }
    } catch (IOException e) {
      close();
      throw new java.io.UncheckedIOException(e);
    } catch (InterruptedException e) {
      close();
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  @Override
  public void close() {
    nodes.forEach(Server::stop);
  }
}
