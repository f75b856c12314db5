package dev.tally.jedis;

import java.time.Instant;
import java.util.List;

/**
 * {@code TSCOUNTER.INFO}.
 *
 * @param resolutions the counter's resolutions, finest first
 * @param slots the stored non-zero slots over all resolutions
 * @param first the oldest stored slot's start, null when there is none
 * @param last the newest stored slot's start, null when there is none
 * @param memory the key's {@code MEMORY USAGE} in bytes
 */
public record CounterInfo(List<Resolution> resolutions, long slots, Instant first, Instant last, long memory) {
  public CounterInfo {
    resolutions = List.copyOf(resolutions);
  }
}
