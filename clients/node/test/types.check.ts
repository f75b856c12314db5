// Type-checked (tsc --noEmit) against the packed package's declarations by scripts/test.sh:
// an ESM TypeScript user's view. Nothing here runs.
import { Tally, type Decision, type MultiDecision, type Summary, type ThrottleDecision } from "tally-redis";
import { TallyStore } from "tally-redis/express-rate-limit";
import { RateLimiterTally } from "tally-redis/rate-limiter-flexible";
import { rateLimit, type Store } from "express-rate-limit";
import { RateLimiterRes } from "rate-limiter-flexible";
import { createClient } from "redis";
import { Redis } from "ioredis";

const client = createClient();
const t = new Tally(client);
const d: Promise<Decision> = t.counter("x").limit(1, { "1m": 5 }, { details: true, at: new Date() });
const m: Promise<MultiDecision> = t.mlimit({ "{u}:a": [["1m", 5]] }, { increment: 2 });
const s: Promise<Summary | null> = t.stats("s").get({ window: "1h" });
const top: Promise<{ member: string; score: number }[]> = t.leaderboard("b").top(10);
const th: Promise<ThrottleDecision> = t.throttle("u").allow(15, 30, "1m", { quantity: 2, at: Date.now() });
const near: Promise<{ member: string; score: number }[]> = t.leaderboard("b").around("m", 5);
const tied: Promise<number | null> = t.leaderboard("b").rank("m", { ties: true });
const totals: Promise<(number | null)[]> = t.leaderboard("b").scores("m", "n");
const across: Promise<Summary | null> = t.mget(["{s}:a", "{s}:b"], { window: "1h" });
const msum: Promise<number[]> = t.msum(["{c}:a", "{c}:b"], ["5m", 60_000], { at: 1 });
const mq: Promise<number[] | null> = t.mquantile(["{s}:a"], [0.5, 0.99]);
const ranked: Promise<number> = t.stats("s").add(3, { report: { key: "r", member: "m", by: "p99" } });
// @ts-expect-error BY takes one of the statistics
t.stats("s").add(3, { report: { key: "r", member: "m", by: "p95" } });
const store: Store = new TallyStore({ client: new Redis({ lazyConnect: true }), prefix: "rl:" });
rateLimit({ windowMs: 1000, limit: 3, store });
const limiter = new RateLimiterTally({ storeClient: client, points: 1, duration: 1, blockDuration: 5 });
const r: Promise<RateLimiterRes> = limiter.consume("k", 2);
const g: Promise<RateLimiterRes | null> = limiter.get("k");
// @ts-expect-error a window is a number of ms or a duration text
t.counter("x").sum([true]);
void [d, m, s, top, th, near, tied, totals, r, g, across, msum, mq, ranked];
