/**
 * Typed helpers for tally's commands over a node-redis or ioredis client: the same
 * objects and methods as the Python package (`clients/python`). Every command carries
 * its key first, so a cluster client routes it like a native command.
 */
import * as p from "./protocol.js";
import type { Arg, Duration, Timestamp } from "./protocol.js";

export type { Duration, Timestamp } from "./protocol.js";

/** Windows of a limit: `{ "5s": 5, "1m": 100 }` or `[["5s", 5], [60000, 100]]`. */
export type Windows = Record<string, number> | [Duration, number][];

/** One window of a `details` limit. */
export interface WindowState {
  /** The window's sum after the call. */
  sum: number;
  /** `max(0, max - sum)`. */
  remaining: number;
  /** Milliseconds from the call's time until the window's sum next falls (0 when it is 0). */
  resetMs: number;
}

/** The answer of `TSCOUNTER.LIMIT`. */
export interface Decision {
  /** The increment was applied. */
  allowed: boolean;
  /** 0 when allowed; else the wait after which the same call would pass if nothing
   * else were written, or -1 when the increment exceeds some window's max. */
  retryAfterMs: number;
  /** Each window's sum after the call, in the order given. */
  sums: number[];
  /** With `details: true`, each window's state in the same order. */
  windows?: WindowState[];
}

/** The answer of `TSCOUNTER.MLIMIT`: one decision for every key at once. */
export interface MultiDecision {
  allowed: boolean;
  retryAfterMs: number;
  sums: Record<string, number[]>;
  windows?: Record<string, WindowState[]>;
}

export interface CounterInfo {
  resolutions: [number, number][];
  slots: number;
  first: number | null;
  last: number | null;
  memory: number;
}

export interface LeaderboardInfo {
  window: number;
  slot: number;
  members: number;
  slots: number;
  oldest: number | null;
  /** `CAPACITY` (members kept per slot), 0 for an exact board. */
  capacity: number;
  /** The largest error of any total in the window (0 for an exact board). */
  error: number;
}

export interface StatsInfo {
  period: number;
  keep: number;
  periods: number;
  memory: number;
}

/** The statistics of a window (`STATS.GET`) or of one period (`STATS.RANGE`). */
export interface Summary {
  count: number;
  sum: number;
  min: number;
  max: number;
  mean: number;
  stddev: number;
  p50: number;
  p90: number;
  p99: number;
}

/** The statistic `STATS.ADD ... REPORT ... BY` ranks a period by (default `"mean"`). */
export type ReportStat = "mean" | "max" | "count" | "sum" | "p50" | "p90" | "p99";

export interface LimitOptions {
  at?: Timestamp;
  details?: boolean;
}

export interface MultiLimitOptions extends LimitOptions {
  increment?: number;
}

function windowArgs(windows: Windows): Arg[] {
  const items: [Duration, number][] = Array.isArray(windows) ? windows : Object.entries(windows);
  const args: Arg[] = [];
  for (const [w, most] of items) args.push(p.duration(w), p.integer(most));
  return args;
}

function windowStates(rows: unknown, details: boolean): [number[], WindowState[] | undefined] {
  const list = rows as unknown[];
  if (!details) return [list.map(p.num), undefined];
  const states = list.map((row) => {
    const [sum, remaining, reset] = row as unknown[];
    return { sum: p.num(sum), remaining: p.num(remaining), resetMs: p.num(reset) };
  });
  return [states.map((s) => s.sum), states];
}

function decision(reply: unknown, details: boolean): Decision {
  const [allowed, retry, rows] = reply as unknown[];
  const [sums, windows] = windowStates(rows, details);
  const out: Decision = { allowed: p.num(allowed) === 1, retryAfterMs: p.num(retry), sums };
  if (details) out.windows = windows;
  return out;
}

function summary(fields: Record<string, unknown>): Summary {
  const n = (name: string) => p.num(fields[name]);
  return {
    count: n("count"), sum: n("sum"), min: n("min"), max: n("max"), mean: n("mean"),
    stddev: n("stddev"), p50: n("p50"), p90: n("p90"), p99: n("p99"),
  };
}

function numbersOrNull(reply: unknown): number[] | null {
  return reply === null || reply === undefined ? null : (reply as unknown[]).map(p.num);
}

/** Entry point: `new Tally(client)` then `.counter(key)`, `.leaderboard(key)`, `.stats(key)`,
 * `.throttle(key)`. */
export class Tally {
  readonly client: unknown;
  /** @internal */
  readonly connection: p.Connection;

  constructor(client: unknown) {
    this.client = client;
    this.connection = p.connect(client);
  }

  counter(key: string): Counter {
    return new Counter(this, key);
  }

  leaderboard(key: string): Leaderboard {
    return new Leaderboard(this, key);
  }

  stats(key: string): Stats {
    return new Stats(this, key);
  }

  throttle(key: string): Throttle {
    return new Throttle(this, key);
  }

  /** Sends any command (`["TSCOUNTER.SUM", key, "1m"]`) with `key` as its routing key. */
  send(args: Arg[], key?: string, readonly = false): Promise<unknown> {
    return this.connection.send(args, key, readonly);
  }

  /**
   * `TSCOUNTER.MLIMIT`: applies `increment` (default 1) to every counter only if every
   * window of every counter allows it, else writes nothing anywhere. In a cluster the
   * keys must share a hash slot (`{user:42}:ip`); the server answers `CROSSSLOT` otherwise.
   */
  async mlimit(
    limits: Record<string, Windows> | [string, Windows][],
    options: MultiLimitOptions = {},
  ): Promise<MultiDecision> {
    const items: [string, Windows][] = Array.isArray(limits) ? limits : Object.entries(limits);
    const keys = items.map(([k]) => k);
    const details = options.details === true;
    const args: Arg[] = ["TSCOUNTER.MLIMIT", keys.length, ...keys, p.integer(options.increment ?? 1)];
    for (const [, windows] of items) {
      const pairs = windowArgs(windows);
      args.push(pairs.length / 2, ...pairs);
    }
    args.push(...p.at(options.at), ...(details ? ["DETAILS"] : []));
    const reply = (await this.send(args, keys[0])) as unknown[];
    const [allowed, retry, perKey] = reply;
    const out: MultiDecision = { allowed: p.num(allowed) === 1, retryAfterMs: p.num(retry), sums: {} };
    const windows: Record<string, WindowState[]> = {};
    (perKey as unknown[]).forEach((rows, i) => {
      const [sums, states] = windowStates(rows, details);
      out.sums[keys[i]] = sums;
      if (states) windows[keys[i]] = states;
    });
    if (details) out.windows = windows;
    return out;
  }

  /**
   * `TSCOUNTER.MSUM`: each window ending at `at` (default now) summed over the counters
   * `keys` (1 to 1000; a missing key counts 0), in window order. In a cluster the keys
   * must share a hash slot (`{svc}:/login`).
   */
  async msum(keys: string[], windows: Duration[] | Duration, options: { at?: Timestamp } = {}): Promise<number[]> {
    const list = Array.isArray(windows) ? windows : [windows];
    const args: Arg[] = ["TSCOUNTER.MSUM", keys.length, ...keys, ...list.map(p.duration), ...p.at(options.at)];
    return p.nums(await this.send(args, keys[0], true));
  }

  /**
   * `STATS.MGET`: the summary of the values of every object's current period (or latest
   * `window`), as if they were one object; `null` when all are empty.
   */
  async mget(keys: string[], options: { window?: Duration } = {}): Promise<Summary | null> {
    const args: Arg[] = ["STATS.MGET", keys.length, ...keys, ...p.window(options.window)];
    const f = p.mapping(await this.send(args, keys[0], true));
    return f === null ? null : summary(f);
  }

  /** `STATS.MQUANTILE`: quantiles of the values of every object's window. */
  async mquantile(keys: string[], qs: number[] | number, options: { window?: Duration } = {}): Promise<number[] | null> {
    const list = Array.isArray(qs) ? qs : [qs];
    const args: Arg[] = ["STATS.MQUANTILE", keys.length, ...keys, ...list.map(String), ...p.window(options.window)];
    return numbersOrNull(await this.send(args, keys[0], true));
  }
}

abstract class Handle {
  constructor(readonly tally: Tally, readonly key: string) {}

  /** Sends `name key ...args`. */
  protected call(name: string, args: Arg[], readonly = false): Promise<unknown> {
    return this.tally.send([name, this.key, ...args], this.key, readonly);
  }
}

/** A multi-resolution counter (`TSCOUNTER.*`). */
export class Counter extends Handle {
  /** `TSCOUNTER.CREATE`; `resolutions` like `["1s:60", "1m:60"]`. Rejects if the key exists. */
  async create(options: { resolutions?: (string | [Duration, number])[] } = {}): Promise<void> {
    const res = options.resolutions?.map((r) => (typeof r === "string" ? r : `${p.duration(r[0])}:${p.integer(r[1])}`));
    await this.call("TSCOUNTER.CREATE", res ? ["RESOLUTIONS", ...res] : []);
  }

  /** Adds 1; the new count of the finest slot that keeps `at` (default now). */
  async incr(options: { at?: Timestamp } = {}): Promise<number> {
    return p.num(await this.call("TSCOUNTER.INCR", p.at(options.at)));
  }

  async incrby(increment: number, options: { at?: Timestamp } = {}): Promise<number> {
    return p.num(await this.call("TSCOUNTER.INCRBY", [p.integer(increment), ...p.at(options.at)]));
  }

  /** The events in each window ending at `at` (default now), in order. */
  async sum(windows: Duration[] | Duration, options: { at?: Timestamp } = {}): Promise<number[]> {
    const list = Array.isArray(windows) ? windows : [windows];
    return p.nums(await this.call("TSCOUNTER.SUM", [...list.map(p.duration), ...p.at(options.at)], true));
  }

  /** `[slotStart, count]` of one resolution, oldest first; `empty` lists zeros too. */
  async range(
    resolution: Duration,
    options: { from?: Timestamp; to?: Timestamp; empty?: boolean } = {},
  ): Promise<[number, number][]> {
    const args: Arg[] = [p.duration(resolution)];
    if (options.from !== undefined) args.push("FROM", p.timestamp(options.from));
    if (options.to !== undefined) args.push("TO", p.timestamp(options.to));
    if (options.empty) args.push("EMPTY");
    return p.numPairs(await this.call("TSCOUNTER.RANGE", args, true));
  }

  /** `{ resolutions: [resMs, samples][], slots, first, last, memory }`, or `null`. */
  async info(): Promise<CounterInfo | null> {
    const f = p.mapping(await this.call("TSCOUNTER.INFO", [], true));
    if (f === null) return null;
    return {
      resolutions: p.numPairs(f.resolutions),
      slots: p.num(f.slots),
      first: p.optionalNum(f.first),
      last: p.optionalNum(f.last),
      memory: p.num(f.memory),
    };
  }

  /**
   * `TSCOUNTER.LIMIT`: applies `increment` only if every window's sum plus it stays
   * within its max. `details: true` also answers each window's room and reset time.
   */
  async limit(increment: number, windows: Windows, options: LimitOptions = {}): Promise<Decision> {
    const details = options.details === true;
    const args = [p.integer(increment), ...windowArgs(windows), ...p.at(options.at), ...(details ? ["DETAILS"] : [])];
    return decision(await this.call("TSCOUNTER.LIMIT", args), details);
  }
}

/** A sliding-window leaderboard (`TSRANK.*`). Members are strings. */
export class Leaderboard extends Handle {
  /**
   * Creates the board. `capacity: k` keeps at most `k` members per slot (a Space-Saving
   * summary: bounded memory for millions of members, totals within `info().error` of the
   * truth; increments must then be positive).
   */
  async create(options: { window?: Duration; slot?: Duration; capacity?: number } = {}): Promise<void> {
    const args: Arg[] = [];
    if (options.window !== undefined) args.push("WINDOW", p.duration(options.window));
    if (options.slot !== undefined) args.push("SLOT", p.duration(options.slot));
    if (options.capacity !== undefined) args.push("CAPACITY", p.integer(options.capacity));
    await this.call("TSRANK.CREATE", args);
  }

  /** Adds to several members at once; their new window totals, in order. */
  async incrby(
    increments: Record<string, number> | [string, number][],
    options: { at?: Timestamp } = {},
  ): Promise<number[]> {
    const items: [string, number][] = Array.isArray(increments) ? increments : Object.entries(increments);
    const args: Arg[] = [];
    for (const [member, n] of items) args.push(p.integer(n), member);
    return p.nums(await this.call("TSRANK.INCRBY", [...args, ...p.at(options.at)]));
  }

  /** Adds to one member (a negative increment lowers its count); its new window total. */
  async incr(member: string, increment = 1, options: { at?: Timestamp } = {}): Promise<number> {
    return p.num(await this.call("TSRANK.INCRBY", [p.integer(increment), member, ...p.at(options.at)]));
  }

  /** `{ member, score }`, highest first (ties by member, descending). */
  async top(count: number, options: { offset?: number; window?: Duration } = {}): Promise<{ member: string; score: number }[]> {
    const args: Arg[] = [p.integer(count)];
    if (options.offset) args.push("OFFSET", p.integer(options.offset));
    args.push("WITHSCORES", ...p.window(options.window));
    return p.pairs(await this.call("TSRANK.TOP", args, true)).map(([m, s]) => ({ member: p.str(m), score: p.num(s) }));
  }

  async score(member: string): Promise<number | null> {
    return p.optionalNum(await this.call("TSRANK.SCORE", [member], true));
  }

  /** Each member's window total (`null` for one without), in order (`TSRANK.MSCORE`). */
  async scores(...members: string[]): Promise<(number | null)[]> {
    if (members.length === 0) throw new TypeError("scores needs at least one member");
    const reply = await this.call("TSRANK.MSCORE", members, true);
    return (reply as unknown[]).map((total) => p.optionalNum(total));
  }

  /**
   * 0 for the highest total; `null` for a member without one. With `{ ties: true }`, the
   * competition rank: how many members have a strictly higher total (totals 9, 7, 7, 5
   * rank 0, 1, 1, 3).
   */
  async rank(member: string, options: { ties?: boolean } = {}): Promise<number | null> {
    const args = options.ties === true ? [member, "TIES"] : [member];
    return p.optionalNum(await this.call("TSRANK.RANK", args, true));
  }

  /**
   * `{ member, score }` from `count` places above `member` to `count` below it, in
   * `top`'s order (fewer at the ends); empty for a member without a total. `count` is 0
   * to 1000.
   */
  async around(member: string, count: number): Promise<{ member: string; score: number }[]> {
    const reply = await this.call("TSRANK.AROUND", [member, p.integer(count), "WITHSCORES"], true);
    return p.pairs(reply).map(([m, s]) => ({ member: p.str(m), score: p.num(s) }));
  }

  /** `[slotStart, count]` of the member's non-zero slots, oldest first. */
  async history(member: string, options: { window?: Duration } = {}): Promise<[number, number][]> {
    return p.numPairs(await this.call("TSRANK.HISTORY", [member, ...p.window(options.window)], true));
  }

  /** Removes members entirely; how many of them had a non-zero window total. */
  async rem(...members: string[]): Promise<number> {
    if (members.length === 0) throw new TypeError("rem needs at least one member");
    return p.num(await this.call("TSRANK.REM", members));
  }

  async info(): Promise<LeaderboardInfo | null> {
    const f = p.mapping(await this.call("TSRANK.INFO", [], true));
    if (f === null) return null;
    return {
      window: p.num(f.window), slot: p.num(f.slot), members: p.num(f.members),
      slots: p.num(f.slots), oldest: p.optionalNum(f.oldest),
      capacity: p.num(f.capacity ?? 0), error: p.num(f.error ?? 0),
    };
  }
}

/** Windowed statistics (`STATS.*`). */
export class Stats extends Handle {
  async create(options: { period?: Duration; keep?: number } = {}): Promise<void> {
    const args: Arg[] = [];
    if (options.period !== undefined) args.push("PERIOD", p.duration(options.period));
    if (options.keep !== undefined) args.push("KEEP", p.integer(options.keep));
    await this.call("STATS.CREATE", args);
  }

  /** Adds values to the period of `at` (default now); the period's count. `report`
   * also ranks a statistic of the period in the sorted set `report.key`. */
  async add(
    values: number[] | number,
    options: { at?: Timestamp; report?: { key: string; member: string; keep?: number; by?: ReportStat } } = {},
  ): Promise<number> {
    const list = Array.isArray(values) ? values : [values];
    const args: Arg[] = list.map((v) => String(v));
    args.push(...p.at(options.at));
    const r = options.report;
    if (r) {
      args.push("REPORT", r.key, r.member);
      if (r.keep !== undefined) args.push("KEEP", p.integer(r.keep));
      if (r.by !== undefined) args.push("BY", r.by);
    }
    return p.num(await this.call("STATS.ADD", args));
  }

  /** The current period's summary, or the latest `window`'s; `null` when empty. */
  async get(options: { window?: Duration } = {}): Promise<Summary | null> {
    const f = p.mapping(await this.call("STATS.GET", p.window(options.window), true));
    return f === null ? null : summary(f);
  }

  async quantile(qs: number[] | number, options: { window?: Duration } = {}): Promise<number[] | null> {
    const list = Array.isArray(qs) ? qs : [qs];
    return numbersOrNull(await this.call("STATS.QUANTILE", [...list.map(String), ...p.window(options.window)], true));
  }

  /** The share of the window's values at or below each value (`STATS.CDF`). */
  async cdf(values: number[] | number, options: { window?: Duration } = {}): Promise<number[] | null> {
    const list = Array.isArray(values) ? values : [values];
    return numbersOrNull(await this.call("STATS.CDF", [...list.map(String), ...p.window(options.window)], true));
  }

  /** `[periodStart, Summary]` of every stored period, oldest first. */
  async range(options: { from?: Timestamp; to?: Timestamp } = {}): Promise<[number, Summary][]> {
    const args: Arg[] = [];
    if (options.from !== undefined) args.push("FROM", p.timestamp(options.from));
    if (options.to !== undefined) args.push("TO", p.timestamp(options.to));
    const rows = (await this.call("STATS.RANGE", args, true)) as unknown[][];
    return rows.map(([start, fields]) => [p.num(start), summary(p.mapping(fields) ?? {})]);
  }

  async info(): Promise<StatsInfo | null> {
    const f = p.mapping(await this.call("STATS.INFO", [], true));
    if (f === null) return null;
    return { period: p.num(f.period), keep: p.num(f.keep), periods: p.num(f.periods), memory: p.num(f.memory) };
  }
}

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
      "TSTHROTTLE.ALLOW", this.key, p.integer(maxBurst), p.integer(count), p.period(period),
      "QUANTITY", p.integer(options.quantity ?? 1), ...p.at(options.at),
    ], this.key)) as unknown[];
    const [allowed, limit, remaining, retry, reset] = reply;
    return {
      allowed: p.num(allowed) === 1, limit: p.num(limit), remaining: p.num(remaining),
      retryAfterMs: p.num(retry), resetAfterMs: p.num(reset),
    };
  }
}
