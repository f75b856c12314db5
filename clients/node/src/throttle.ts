/**
 * Smooth rate limits: `new Tally(client).throttle(key).allow(maxBurst, count, period)`
 * (`TSTHROTTLE.ALLOW`, the generic cell rate algorithm on one native string per subject).
 * Imports `Tally` for its type only, so `client.ts` can import this file.
 */
import * as p from "./protocol.js";
import type { Duration, Timestamp } from "./protocol.js";
import type { Tally } from "./client.js";

/** The answer of `TSTHROTTLE.ALLOW`. Times are rounded up: waiting that long is enough. */
export interface ThrottleDecision {
  /** The request was admitted (and stored). */
  allowed: boolean;
  /** `maxBurst + 1`. */
  limit: number;
  /** How many more requests of 1 fit now. */
  remaining: number;
  /** 0 when allowed; else the wait before the same request fits, or -1 when its
   * quantity is more than a whole burst. */
  retryAfterMs: number;
  /** The wait until the subject is back to a full burst. */
  resetAfterMs: number;
}

export interface AllowOptions {
  /** Default 1; 0 only checks. */
  quantity?: number;
  at?: Timestamp;
}

/** One limited subject (`TSTHROTTLE.*`). */
export class Throttle {
  constructor(readonly tally: Tally, readonly key: string) {}

  /**
   * `TSTHROTTLE.ALLOW`: admits `quantity` at `count` per `period` with bursts of
   * `maxBurst` (`maxBurst + 1` at once); a refused request writes nothing.
   */
  async allow(maxBurst: number, count: number, period: Duration, options: AllowOptions = {}): Promise<ThrottleDecision> {
    const reply = (await this.tally.send([
      "TSTHROTTLE.ALLOW", this.key, p.integer(maxBurst), p.integer(count), p.duration(period),
      "QUANTITY", p.integer(options.quantity ?? 1), ...p.at(options.at),
    ], this.key)) as unknown[];
    const [allowed, limit, remaining, retry, reset] = reply;
    return {
      allowed: p.num(allowed) === 1, limit: p.num(limit), remaining: p.num(remaining),
      retryAfterMs: p.num(retry), resetAfterMs: p.num(reset),
    };
  }
}
