package dev.tally.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Assertions;

/**
 * One {@code redis-server --loadmodule $TALLY_MODULE} on a free port, in its own temporary
 * directory. {@code TALLY_SERVERS} lists the kinds ({@code name=path,name=path}, default
 * Debian's Redis); {@link #of(String)} starts each kind once per JVM, and every test uses
 * keys of its own. A missing binary or module fails the run in CI and skips elsewhere.
 */
public final class Server {
  public final String name;
  public final int port;
  public final Path dir;
  private final Process process;

  private static final Map<String, Server> SHARED = new ConcurrentHashMap<>();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> SHARED.values().forEach(Server::stop)));
  }

  /** The module to load: TALLY_MODULE, or the repository's release build. */
  public static String module() {
    String m = System.getenv("TALLY_MODULE");
    if (m != null && !m.isBlank()) {
      return m;
    }
    String root = System.getenv("TALLY_JAVA_ROOT");
    Path base = root != null ? Paths.get(root) : Paths.get("").toAbsolutePath();
    return base.resolve("../../target/release/libtally.so").normalize().toString();
  }

  /** The kinds of TALLY_SERVERS, in order: {@code [name, path]}. */
  public static List<String[]> kinds() {
    String spec = System.getenv().getOrDefault("TALLY_SERVERS", "");
    if (spec.isBlank()) {
      spec = "redis=/usr/bin/redis-server";
    }
    List<String[]> out = new ArrayList<>();
    for (String item : spec.split(",")) {
      item = item.trim();
      if (!item.isEmpty()) {
        int at = item.indexOf('=');
        out.add(new String[] {item.substring(0, at), item.substring(at + 1)});
      }
    }
    return out;
  }

  /** The server kind names, for {@code @MethodSource}. */
  public static Stream<String> names() {
    return kinds().stream().map(k -> k[0]);
  }

  /** The shared server of a kind, started on first use. */
  public static Server of(String name) {
    return SHARED.computeIfAbsent(name, n -> {
      for (String[] k : kinds()) {
        if (k[0].equals(n)) {
          return start(n, k[1], List.of(), freePort());
        }
      }
      throw new IllegalArgumentException("no server kind " + n + " in TALLY_SERVERS");
    });
  }

  /** The binary of the kind named {@code preferred}, else of the first kind. */
  public static String[] kind(String preferred) {
    return kinds().stream().filter(k -> k[0].equals(preferred)).findFirst().orElse(kinds().get(0));
  }

  static void missing(String what) {
    if (System.getenv("CI") != null && !System.getenv("CI").isEmpty()) {
      Assertions.fail(what);
    }
    Assumptions.abort(what);
  }

  public static int freePort() {
    try (ServerSocket s = new ServerSocket()) {
      s.setReuseAddress(false);
      s.bind(new InetSocketAddress("127.0.0.1", 0));
      return s.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static boolean portFree(int port) {
    try (ServerSocket s = new ServerSocket()) {
      s.bind(new InetSocketAddress("127.0.0.1", port));
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  /** Starts a server with extra arguments on {@code port}. */
  public static Server start(String name, String binary, List<String> extra, int port) {
    if (!Files.isExecutable(Paths.get(binary))) {
      missing("no server binary " + binary + " for " + name);
    }
    String module = module();
    if (!Files.isRegularFile(Paths.get(module))) {
      missing("no module at " + module + " (make build)");
    }
    try {
      Path dir = Files.createTempDirectory("tally-java-" + name + "-");
      List<String> cmd = new ArrayList<>(List.of(binary, "--port", String.valueOf(port), "--bind", "127.0.0.1",
          "--save", "", "--appendonly", "no", "--dir", dir.toString(), "--loadmodule", module));
      cmd.addAll(extra);
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true)
          .redirectOutput(dir.resolve("server.log").toFile()).start();
      Server s = new Server(name, port, dir, p);
      s.waitReady();
      return s;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private Server(String name, int port, Path dir, Process process) {
    this.name = name;
    this.port = port;
    this.dir = dir;
    this.process = process;
  }

  private void waitReady() {
    long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
    while (System.nanoTime() < deadline && process.isAlive()) {
      if (ping()) {
        return;
      }
      sleep(50);
    }
    String log = log();
    stop();
    throw new IllegalStateException(name + " did not start:\n" + log);
  }

  /** PING over a plain socket. */
  public boolean ping() {
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress("127.0.0.1", port), 1000);
      s.setSoTimeout(1000);
      s.getOutputStream().write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
      byte[] buf = new byte[7];
      int n = s.getInputStream().read(buf);
      return n > 0 && new String(buf, 0, n, StandardCharsets.US_ASCII).startsWith("+PONG");
    } catch (IOException e) {
      return false;
    }
  }

  public boolean alive() {
    return process.isAlive();
  }

  public String log() {
    try {
      return Files.readString(dir.resolve("server.log"));
    } catch (IOException e) {
      return "";
    }
  }

  public String hostPort() {
    return "127.0.0.1:" + port;
  }

  public void stop() {
    if (process.isAlive()) {
      process.destroy();
      try {
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
          process.destroyForcibly().waitFor();
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    try (Stream<Path> files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
    } catch (IOException e) {
      // left behind in the temp dir
    }
  }

  public static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
