/**
 * `RateLimiterTally`: a rate-limiter-flexible (v11) limiter with `RateLimiterRedis`'s
 * options and methods, resolving and rejecting with `RateLimiterRes`, over a sliding
 * window of `duration` seconds on one tally counter per key.
 *
 * ```js
 * import { RateLimiterTally } from "tally-redis/rate-limiter-flexible";
 * const limiter = new RateLimiterTally({ storeClient: client, points: 10, duration: 1 });
 * await limiter.consume(ip);   // rejects with a RateLimiterRes when over the limit
 * ```
 *
 * `consume` is one `TSCOUNTER.LIMIT key points duration max DETAILS` (the points count only
 * if they fit, so racing clients are never admitted past `points`) sent with a `PTTL` of
 * the key's block (`block`, `blockDuration`) in the same round trip. A rejected consume
 * answers in `msBeforeNext` the exact wait after which the same consume would succeed.
 */
import { RateLimiterRes } from "rate-limiter-flexible";
import { connect, num } from "./protocol.js";
import type { Connection } from "./protocol.js";
import { SlidingWindow } from "./sliding.js";

export interface RateLimiterTallyOptions {
  /** A node-redis (`createClient`, `createCluster`) or ioredis (`Redis`, `Cluster`) client. */
  storeClient: unknown;
  /** Points per `duration` (default 4, as rate-limiter-flexible). */
  points?: number;
  /** The sliding window, in seconds (default 1); at least 1 ms. */
  duration?: number;
  /** When a consume is rejected, block the key for this many seconds (0: off). */
  blockDuration?: number;
  /** Spread allowed actions over the window (rate-limiter-flexible's formula). */
  execEvenly?: boolean;
  execEvenlyMinDelayMs?: number;
  /** Default `"rlflx"`; keys are `<keyPrefix>:{<key>}` (and `...:block`). */
  keyPrefix?: string;
  /** Block a key in this process's memory once it has consumed this many points. */
  inMemoryBlockOnConsumed?: number;
  /** Seconds of that in-memory block (default: until the window frees a point). */
  inMemoryBlockDuration?: number;
}

export class RateLimiterTally {
  readonly points: number;
  readonly duration: number;
  readonly blockDuration: number;
  readonly execEvenly: boolean;
  readonly execEvenlyMinDelayMs: number;
  readonly keyPrefix: string;
  readonly inMemoryBlockOnConsumed: number;
  readonly inMemoryBlockDuration: number;
  private readonly connection: Connection;
  private readonly window: SlidingWindow;
  private readonly memoryBlocks = new Map<string, number>();

  constructor(options: RateLimiterTallyOptions) {
    if (options.storeClient === undefined) throw new Error("storeClient is not set");
    this.connection = connect(options.storeClient);
    this.points = options.points ?? 4;
    this.duration = options.duration ?? 1;
    if (!Number.isFinite(this.points)) throw new Error("points must be a finite number");
    if (!(this.duration > 0)) {
      throw new Error("duration must be positive: a sliding window has a length (duration 0, never expiring, is not supported)");
    }
    this.blockDuration = options.blockDuration ?? 0;
    this.execEvenly = options.execEvenly ?? false;
    this.execEvenlyMinDelayMs = options.execEvenlyMinDelayMs ?? (this.duration * 1000) / Math.max(1, this.points);
    this.keyPrefix = options.keyPrefix ?? "rlflx";
    this.inMemoryBlockOnConsumed = options.inMemoryBlockOnConsumed ?? 0;
    this.inMemoryBlockDuration = options.inMemoryBlockDuration ?? 0;
    this.window = new SlidingWindow(this.connection, Math.round(this.duration * 1000));
  }

  get msDuration(): number {
    return this.window.windowMs;
  }

  get msBlockDuration(): number {
    return this.blockDuration * 1000;
  }

  /** The key as rate-limiter-flexible names it: `<keyPrefix>:<key>`. */
  getKey(key: string | number): string {
    return this.keyPrefix.length > 0 ? `${this.keyPrefix}:${key}` : String(key);
  }

  parseKey(rlKey: string): string {
    return this.keyPrefix.length > 0 ? rlKey.substring(this.keyPrefix.length + 1) : rlKey;
  }

  /** The counter's Redis key: `<keyPrefix>:{<key>}` (a hash tag: one slot with its block key). */
  counterKey(key: string | number): string {
    return this.keyPrefix.length > 0 ? `${this.keyPrefix}:{${key}}` : `{${key}}`;
  }

  private blockKey(key: string | number): string {
    return `${this.counterKey(key)}:block`;
  }

  /** The key's block: ms left, -1 for a block without end, 0 for none. */
  private async blockedMs(key: string | number): Promise<number> {
    const blockKey = this.blockKey(key);
    const ttl = num(await this.connection.send(["PTTL", blockKey], blockKey, false)); // the primary: a block was just written there
    return ttl === -2 ? 0 : ttl;
  }

  private memoryBlockedMs(rlKey: string): number {
    const until = this.memoryBlocks.get(rlKey);
    if (until === undefined) return 0;
    const left = Math.ceil(until - Date.now());
    if (left <= 0) this.memoryBlocks.delete(rlKey);
    return Math.max(0, left);
  }

  async consume(key: string | number, pointsToConsume = 1): Promise<RateLimiterRes> {
    const rlKey = this.getKey(key);
    const inMemory = this.memoryBlockedMs(rlKey);
    if (inMemory > 0) throw new RateLimiterRes(0, inMemory, this.inMemoryBlockOnConsumed);
    const counter = this.counterKey(key);
    const [blocked, w] = await Promise.all([this.blockedMs(key), this.window.hit(counter, pointsToConsume, this.points)]);
    if (blocked !== 0) {
      // Blocked: the action is not done, so a consume the window admitted is taken back.
      if (w.allowed && pointsToConsume > 0) await this.connection.send(["TSCOUNTER.INCRBY", counter, -pointsToConsume], counter, false);
      const consumed = w.allowed ? w.sum - pointsToConsume : w.sum;
      throw new RateLimiterRes(0, blocked, Math.max(consumed + pointsToConsume, this.points + 1), false);
    }
    if (!w.allowed) {
      let wait = w.retryAfterMs;
      if (this.blockDuration > 0) {
        const blockKey = this.blockKey(key);
        await this.connection.send(["SET", blockKey, "1", "PX", this.msBlockDuration], blockKey, false);
        wait = this.msBlockDuration;
      }
      const res = new RateLimiterRes(0, wait, w.sum + pointsToConsume, false);
      this.memoryBlock(rlKey, res);
      throw res;
    }
    const remaining = Math.max(0, this.points - w.sum);
    const first = w.sum === pointsToConsume;
    const res = new RateLimiterRes(remaining, w.resetMs, w.sum, first);
    this.memoryBlock(rlKey, res);
    if (this.execEvenly && this.points > 0 && w.resetMs > 0 && !first) {
      let delay = Math.ceil(w.resetMs / (remaining + 2));
      if (delay < this.execEvenlyMinDelayMs) delay = w.sum * this.execEvenlyMinDelayMs;
      await new Promise((resolve) => setTimeout(resolve, delay));
      return new RateLimiterRes(remaining, Math.max(w.resetMs - delay, 0), w.sum, first);
    }
    return res;
  }

  private memoryBlock(rlKey: string, res: RateLimiterRes): void {
    if (this.inMemoryBlockOnConsumed > 0 && res.consumedPoints >= this.inMemoryBlockOnConsumed) {
      const ms = this.inMemoryBlockDuration > 0 ? this.inMemoryBlockDuration * 1000 : res.msBeforeNext;
      if (ms > 0) this.memoryBlocks.set(rlKey, Date.now() + ms);
    }
  }

  /** Adds points to the window whatever it holds. */
  async penalty(key: string | number, points = 1): Promise<RateLimiterRes> {
    const w = await this.window.add(this.counterKey(key), points);
    return new RateLimiterRes(Math.max(0, this.points - w.sum), w.resetMs, w.sum, false);
  }

  /** Takes points back from the window (at most what it holds). */
  async reward(key: string | number, points = 1): Promise<RateLimiterRes> {
    const w = await this.window.add(this.counterKey(key), -points);
    return new RateLimiterRes(Math.max(0, this.points - w.sum), w.resetMs, w.sum, false);
  }

  /** The key's state, or `null` when its window is empty and it is not blocked. */
  async get(key: string | number): Promise<RateLimiterRes | null> {
    const [blocked, w] = await Promise.all([this.blockedMs(key), this.window.peek(this.counterKey(key))]);
    if (blocked !== 0) return new RateLimiterRes(0, blocked, Math.max(w.sum, this.points + 1), false);
    if (w.sum === 0) return null;
    return new RateLimiterRes(Math.max(0, this.points - w.sum), w.resetMs, w.sum, false);
  }

  /** Replaces the key's window with `points` consumed now (they leave after `duration`;
   * `secDuration` is not used: see the README). */
  async set(key: string | number, points: number, _secDuration = 0): Promise<RateLimiterRes> {
    await this.window.del(this.counterKey(key), this.blockKey(key));
    const w = points > 0 ? await this.window.add(this.counterKey(key), points) : await this.window.peek(this.counterKey(key));
    return new RateLimiterRes(Math.max(0, this.points - w.sum), w.resetMs, w.sum, false);
  }

  /** Blocks the key for `secDuration` seconds (0: until `delete`). */
  async block(key: string | number, secDuration: number): Promise<RateLimiterRes> {
    const ms = Math.round(secDuration * 1000);
    const blockKey = this.blockKey(key);
    await this.connection.send(ms > 0 ? ["SET", blockKey, "1", "PX", ms] : ["SET", blockKey, "1"], blockKey, false);
    return new RateLimiterRes(0, ms > 0 ? ms : -1, this.points + 1, false);
  }

  /** Deletes the key's window and block; true if there was either. */
  async delete(key: string | number): Promise<boolean> {
    this.memoryBlocks.delete(this.getKey(key));
    return (await this.window.del(this.counterKey(key), this.blockKey(key))) > 0;
  }
}

export default RateLimiterTally;
