/**
 * `TallyStore`: an express-rate-limit (v8) store over a sliding window of `windowMs`.
 *
 * ```js
 * import { rateLimit } from "express-rate-limit";
 * import { TallyStore } from "tally-redis/express-rate-limit";
 * app.use(rateLimit({ windowMs: 60_000, limit: 100, store: new TallyStore({ client }) }));
 * ```
 *
 * `increment` is one `TSCOUNTER.LIMIT ... DETAILS`: `totalHits` counts the hits of the
 * last `windowMs`, `resetTime` is when that count next falls. With a numeric `limit`
 * (and without `skipFailedRequests`) a hit over the limit is refused by the server and
 * not counted (`totalHits` is then `limit + 1`), so a client that keeps trying gets
 * `limit` hits per window, never more; otherwise every hit counts, as in the other stores.
 */
import { connect } from "./protocol.js";
import { NO_MAX, SlidingWindow } from "./sliding.js";

/** What express-rate-limit's `Store` interface expects (no import of the package). */
export interface ClientRateLimitInfo {
  totalHits: number;
  resetTime: Date | undefined;
}

export interface TallyStoreOptions {
  /** A node-redis (`createClient`, `createCluster`) or ioredis (`Redis`, `Cluster`) client. */
  client: unknown;
  /** Key prefix (default `"rl:"`); the counter of a key is `<prefix>{<key>}`. */
  prefix?: string;
}

interface StoreInitOptions {
  windowMs: number;
  limit?: unknown;
  skipFailedRequests?: boolean;
}

export class TallyStore {
  readonly prefix: string;
  /** The counters live in Redis: every process shares them. */
  readonly localKeys = false;
  private readonly connection;
  private window: SlidingWindow | undefined;
  private max = NO_MAX;

  constructor(options: TallyStoreOptions) {
    this.connection = connect(options.client);
    this.prefix = options.prefix ?? "rl:";
  }

  /** Called by express-rate-limit with its options. */
  init(options: StoreInitOptions): void {
    this.window = new SlidingWindow(this.connection, options.windowMs);
    this.max = typeof options.limit === "number" && !options.skipFailedRequests ? options.limit : NO_MAX;
  }

  /** The counter key of a client key. */
  prefixKey(key: string): string {
    return `${this.prefix}{${key}}`;
  }

  private sliding(): SlidingWindow {
    if (!this.window) throw new Error("TallyStore: init was not called (pass the store to rateLimit({ store }))");
    return this.window;
  }

  async get(key: string): Promise<ClientRateLimitInfo | undefined> {
    const w = await this.sliding().peek(this.prefixKey(key));
    if (w.sum === 0) return undefined;
    return { totalHits: w.sum, resetTime: new Date(w.start + w.resetMs) };
  }

  async increment(key: string): Promise<ClientRateLimitInfo> {
    const w = await this.sliding().hit(this.prefixKey(key), 1, this.max);
    if (w.allowed) return { totalHits: w.sum, resetTime: new Date(w.start + w.resetMs) };
    // Refused: the count next falls (and the hit would pass) after retryAfterMs.
    const wait = w.retryAfterMs > 0 ? w.retryAfterMs : w.resetMs;
    return { totalHits: w.sum + 1, resetTime: new Date(w.start + wait) };
  }

  async decrement(key: string): Promise<void> {
    await this.sliding().add(this.prefixKey(key), -1);
  }

  async resetKey(key: string): Promise<void> {
    await this.sliding().del(this.prefixKey(key));
  }
}

export default TallyStore;
