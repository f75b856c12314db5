package dev.tally.jedis;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import redis.clients.jedis.Builder;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * Parsers of tally's replies as Jedis hands them over, in RESP2 (maps as flat arrays,
 * doubles as bulk strings) and in RESP3 (maps as lists of key-value entries, doubles as
 * {@code Double}). Server errors never reach here: Jedis throws them as
 * {@link JedisDataException}s carrying the server's text.
 */
final class Replies {
  private Replies() {}

  static <T> Builder<T> builder(java.util.function.Function<Object, T> parse) {
    return new Builder<>() {
      @Override
      public T build(Object data) {
        if (data instanceof JedisDataException e) {
          throw e; // an error inside a transaction's reply
        }
        return parse.apply(data);
      }

      @Override
      public String toString() {
        return "tally reply";
      }
    };
  }

  static String str(Object value) {
    if (value instanceof byte[] bytes) {
      return new String(bytes, StandardCharsets.UTF_8);
    }
    return String.valueOf(value);
  }

  static long num(Object value) {
    if (value instanceof Long l) {
      return l;
    }
    if (value instanceof Number n) {
      return n.longValue();
    }
    return Long.parseLong(str(value));
  }

  static Long optionalNum(Object value) {
    return value == null ? null : num(value);
  }

  static double dbl(Object value) {
    if (value instanceof Number n) {
      return n.doubleValue();
    }
    String s = str(value);
    return switch (s) {
      case "inf", "+inf" -> Double.POSITIVE_INFINITY;
      case "-inf" -> Double.NEGATIVE_INFINITY;
      default -> Double.parseDouble(s);
    };
  }

  static Duration millis(Object value) {
    return Duration.ofMillis(num(value));
  }

  static Instant instant(Object value) {
    return value == null ? null : Instant.ofEpochMilli(num(value));
  }

  @SuppressWarnings("unchecked")
  static List<Object> list(Object value) {
    return (List<Object>) value;
  }

  static List<Long> nums(Object value) {
    if (!(value instanceof List)) {
      return List.of(num(value));
    }
    List<Long> out = new ArrayList<>();
    for (Object item : list(value)) {
      out.add(num(item));
    }
    return out;
  }

  static List<Long> optionalNums(Object value) {
    List<Long> out = new ArrayList<>();
    for (Object item : list(value)) {
      out.add(optionalNum(item));
    }
    return out;
  }

  static List<Double> doublesOrNull(Object value) {
    if (value == null) {
      return null;
    }
    List<Double> out = new ArrayList<>();
    for (Object item : list(value)) {
      out.add(dbl(item));
    }
    return out;
  }

  /** {@code [a, b]} pairs, nested (RESP3) or flat (RESP2). */
  static List<Object[]> pairs(Object value) {
    List<Object> items = list(value);
    List<Object[]> out = new ArrayList<>();
    if (!items.isEmpty() && items.get(0) instanceof List) {
      for (Object item : items) {
        List<Object> pair = list(item);
        out.add(new Object[] {pair.get(0), pair.get(1)});
      }
      return out;
    }
    for (int i = 0; i + 1 < items.size(); i += 2) {
      out.add(new Object[] {items.get(i), items.get(i + 1)});
    }
    return out;
  }

  /** A map reply (RESP3 entries or a RESP2 flat array) by field name; null for nil. */
  static Map<String, Object> map(Object value) {
    if (value == null) {
      return null;
    }
    Map<String, Object> out = new LinkedHashMap<>();
    if (value instanceof Map<?, ?> m) {
      m.forEach((k, v) -> out.put(str(k), v));
      return out;
    }
    List<Object> items = list(value);
    if (!items.isEmpty() && items.get(0) instanceof Map.Entry) {
      for (Object item : items) {
        Map.Entry<?, ?> e = (Map.Entry<?, ?>) item;
        out.put(str(e.getKey()), e.getValue());
      }
      return out;
    }
    for (Object[] pair : pairs(items)) {
      out.put(str(pair[0]), pair[1]);
    }
    return out;
  }

  static List<Slot> slots(Object value) {
    List<Slot> out = new ArrayList<>();
    for (Object item : list(value)) {
      List<Object> pair = list(item);
      out.add(new Slot(instant(pair.get(0)), num(pair.get(1))));
    }
    return out;
  }

  static List<Entry> entries(Object value) {
    List<Entry> out = new ArrayList<>();
    for (Object[] pair : pairs(value)) {
      out.add(new Entry(str(pair[0]), num(pair[1])));
    }
    return out;
  }

  static Summary summary(Object value) {
    Map<String, Object> f = map(value);
    return f == null ? null : summaryOf(f);
  }

  static Summary summaryOf(Map<String, Object> f) {
    return new Summary(
        num(f.get("count")),
        dbl(f.get("sum")),
        dbl(f.get("min")),
        dbl(f.get("max")),
        dbl(f.get("mean")),
        dbl(f.get("stddev")),
        dbl(f.get("p50")),
        dbl(f.get("p90")),
        dbl(f.get("p99")));
  }

  static List<Period> periods(Object value) {
    List<Period> out = new ArrayList<>();
    for (Object item : list(value)) {
      List<Object> pair = list(item);
      out.add(new Period(instant(pair.get(0)), summaryOf(map(pair.get(1)))));
    }
    return out;
  }

  static CounterInfo counterInfo(Object value) {
    Map<String, Object> f = map(value);
    if (f == null) {
      return null;
    }
    List<Resolution> resolutions = new ArrayList<>();
    for (Object item : list(f.get("resolutions"))) {
      List<Object> pair = list(item);
      resolutions.add(new Resolution(millis(pair.get(0)), num(pair.get(1))));
    }
    return new CounterInfo(
        resolutions, num(f.get("slots")), instant(f.get("first")), instant(f.get("last")), num(f.get("memory")));
  }

  static LeaderboardInfo boardInfo(Object value) {
    Map<String, Object> f = map(value);
    if (f == null) {
      return null;
    }
    return new LeaderboardInfo(
        millis(f.get("window")),
        millis(f.get("slot")),
        num(f.get("members")),
        num(f.get("slots")),
        instant(f.get("oldest")),
        f.get("capacity") == null ? 0 : num(f.get("capacity")),
        f.get("error") == null ? 0 : num(f.get("error")));
  }

  static StatsInfo statsInfo(Object value) {
    Map<String, Object> f = map(value);
    if (f == null) {
      return null;
    }
    return new StatsInfo(millis(f.get("period")), num(f.get("keep")), num(f.get("periods")), num(f.get("memory")));
  }

  /** A limit's per-window element: the sums, and with details the states. */
  static List<Long> sums(Object rows, boolean details, List<WindowState> states) {
    List<Long> sums = new ArrayList<>();
    for (Object row : list(rows)) {
      if (details) {
        List<Object> r = list(row);
        WindowState s = new WindowState(num(r.get(0)), num(r.get(1)), millis(r.get(2)));
        states.add(s);
        sums.add(s.sum());
      } else {
        sums.add(num(row));
      }
    }
    return sums;
  }

  static Decision decision(Object value, boolean details) {
    List<Object> r = list(value);
    List<WindowState> states = new ArrayList<>();
    List<Long> sums = sums(r.get(2), details, states);
    return new Decision(num(r.get(0)) == 1, millis(r.get(1)), sums, states);
  }

  static MultiDecision multiDecision(Object value, List<String> keys, boolean details) {
    List<Object> r = list(value);
    List<Object> perKey = list(r.get(2));
    Map<String, List<Long>> sums = new LinkedHashMap<>();
    Map<String, List<WindowState>> windows = new LinkedHashMap<>();
    for (int i = 0; i < keys.size(); i++) {
      List<WindowState> states = new ArrayList<>();
      sums.put(keys.get(i), List.copyOf(sums(perKey.get(i), details, states)));
      if (details) {
        windows.put(keys.get(i), List.copyOf(states));
      }
    }
    return new MultiDecision(num(r.get(0)) == 1, millis(r.get(1)), sums, windows);
  }

  static ThrottleDecision throttle(Object value) {
    List<Object> r = list(value);
    return new ThrottleDecision(
        num(r.get(0)) == 1, num(r.get(1)), num(r.get(2)), millis(r.get(3)), millis(r.get(4)));
  }

  static Void ok(Object value) {
    String s = str(value);
    if (!"OK".equals(s)) {
      throw new JedisDataException("unexpected reply " + s);
    }
    return null;
  }
}
