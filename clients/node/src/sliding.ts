/**
 * A sliding window of `windowMs` on one tally counter per limited key, shared by the
 * express-rate-limit store and the rate-limiter-flexible limiter.
 *
 * The counter has one resolution: the window cut into about 50 slots (`slotMs`), kept
 * for one window. A hit is one `TSCOUNTER.LIMIT key n windowMs max DETAILS`: it counts
 * only if the slots of the window ending now hold at most `max - n`, and the reply
 * carries the window's sum and when that sum next falls. So a hit stops counting
 * between `windowMs - slotMs` and `windowMs` after it happened.
 *
 * The counter is created with its resolution (`TSCOUNTER.CREATE`, sent in the same
 * round trip just before the hit) the first time this process writes the key, and
 * again whenever it may have disappeared since (a counter whose slots have all left
 * disappears); otherwise a hit is the one `TSCOUNTER.LIMIT`.
 */
import type { Connection, Arg } from "./protocol.js";
import { num } from "./protocol.js";

/** How many keys a process remembers as created before it starts afresh. */
const KNOWN_KEYS_MAX = 100_000;
/** A `max` no count reaches: the hit is always counted. */
export const NO_MAX = Number.MAX_SAFE_INTEGER;

/** The slot of a window: `windowMs / n` for the first `n` in 50..100 dividing it, else
 * `ceil(windowMs / 50)` (the window then counts whole slots: up to one slot longer). */
export function slotOf(windowMs: number): number {
  for (let n = 50; n <= 100; n++) if (windowMs % n === 0) return windowMs / n;
  return Math.max(1, Math.ceil(windowMs / 50));
}

export interface Hit {
  allowed: boolean;
  /** 0 when allowed; the wait until the same hit would pass; -1 when it never can. */
  retryAfterMs: number;
  /** The window's sum after the call (with the hit when allowed). */
  sum: number;
  /** Milliseconds until the sum next falls (0 when it is 0). */
  resetMs: number;
  /** `Date.now()` taken before the request: `start + resetMs` is never late. */
  start: number;
}

export class SlidingWindow {
  readonly slotMs: number;
  readonly samples: number;
  private known = new Map<string, number>();

  constructor(readonly connection: Connection, readonly windowMs: number) {
    if (!Number.isInteger(windowMs) || windowMs < 1) throw new RangeError(`window must be a whole number of ms >= 1, not ${windowMs}`);
    this.slotMs = slotOf(windowMs);
    this.samples = Math.ceil(windowMs / this.slotMs);
  }

  private create(key: string): Promise<unknown> {
    return this.connection
      .send(["TSCOUNTER.CREATE", key, "RESOLUTIONS", `${this.slotMs}:${this.samples}`], key, false)
      .catch((error: Error) => {
        if (!/already exists/.test(String(error?.message))) throw error;
      });
  }

  /** `TSCOUNTER.LIMIT key n windowMs max DETAILS`, with a `CREATE` first when needed. */
  async hit(key: string, n: number, max: number): Promise<Hit> {
    const start = Date.now();
    const sent = performance.now();
    const args: Arg[] = ["TSCOUNTER.LIMIT", key, n, this.windowMs, max, "DETAILS"];
    let pending: Promise<unknown>;
    if (n > 0 && !((this.known.get(key) ?? 0) > performance.now())) {
      const created = this.create(key);
      if (this.connection.ordered) {
        // Sent back to back on one connection: one round trip, CREATE first.
        const limited = this.connection.send(args, key, false);
        pending = created.then(() => limited, (error) => { limited.catch(() => {}); throw error; });
      } else {
        pending = created.then(() => this.connection.send(args, key, false));
      }
    } else {
      pending = this.connection.send(args, key, false);
    }
    const [allowed, retry, rows] = (await pending) as unknown[];
    const [sum, , reset] = (rows as unknown[][])[0];
    const hit = { allowed: num(allowed) === 1, retryAfterMs: num(retry), sum: num(sum), resetMs: num(reset), start };
    if (hit.allowed && n > 0) this.written(key, sent);
    return hit;
  }

  /** Records that `key` holds a hit written after `sent` (this process's monotonic clock
   * before the request): its slot keeps the key until at least `windowMs - slotMs` later. */
  private written(key: string, sent: number): void {
    if (this.known.size >= KNOWN_KEYS_MAX) this.known.clear();
    this.known.set(key, sent + this.windowMs - this.slotMs);
  }

  /** Adds `n` to now's slot whatever the window holds; a negative `n` removes up to
   * what the window holds (a missing key stays missing). The window after it. */
  async add(key: string, n: number): Promise<Hit> {
    if (n >= 0) return this.hit(key, n, NO_MAX);
    const before = await this.peek(key);
    const take = Math.min(-n, before.sum);
    if (take <= 0) return before;
    await this.connection.send(["TSCOUNTER.INCRBY", key, -take], key, false);
    return this.peek(key);
  }

  /** The window's sum and reset time, writing nothing. */
  peek(key: string): Promise<Hit> {
    return this.hit(key, 0, NO_MAX);
  }

  /** Deletes the keys (one slot in a cluster); how many existed. */
  async del(...keys: string[]): Promise<number> {
    for (const key of keys) this.known.delete(key);
    return num(await this.connection.send(["DEL", ...keys], keys[0], false));
  }
}
