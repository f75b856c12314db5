// Every helper's reply shapes, on every server, over node-redis and ioredis, in RESP2
// and RESP3 (and RESP3 maps as Map objects). Times are explicit (`at`), so nothing here depends on the clock.
import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Tally, Throttle } from "tally-redis";
import { CLIENTS, SHAPES, Server, close, connect, keys, serverKinds } from "./harness.mjs";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
// A day boundary a week ago: old enough for the objects below to keep it writable with
// `at`, far from the edges of their kept ranges.
const T = (Math.floor(Date.now() / DAY) - 7) * DAY;
const ws = (sum, remaining, resetMs) => ({ sum, remaining, resetMs });

for (const [name, binary] of serverKinds()) {
  describe(name, () => {
    let server;
    before(async () => { server = await Server.start(name, binary); });
    after(() => server.stop());

    for (const kind of [...CLIENTS, ...SHAPES]) {
      describe(kind.name, () => {
        let client, t, key;
        before(async () => { client = await connect(kind, server.port); t = new Tally(client); });
        beforeEach(() => { key = keys(); });
        after(() => close(client));

        test("counter", async () => {
          const c = t.counter(key("c"));
          assert.equal(await c.create({ resolutions: ["1h:5000", ["1d", 5000]] }), undefined);
          await assert.rejects(c.create(), { message: "ERR key already exists" });
          assert.equal(await c.incrby(3, { at: T }), 3);
          assert.equal(await c.incrby(2, { at: T + HOUR }), 2);
          assert.equal(await c.incr({ at: T + 2 * DAY }), 1);
          assert.equal(await c.incrby(6, { at: new Date(T + 2 * DAY) }), 7);
          assert.deepEqual(await c.sum(["1h", "2h", "1d", 7 * DAY], { at: T + HOUR }), [2, 5, 5, 5]);
          assert.deepEqual(await c.sum("1h", { at: T + HOUR }), [2]);
          assert.deepEqual(await c.range("1d", { from: T, to: T + 3 * DAY }), [[T, 5], [T + 2 * DAY, 7]]);
          assert.deepEqual(await c.range(DAY, { empty: true, from: T, to: T + 3 * DAY }),
            [[T, 5], [T + DAY, 0], [T + 2 * DAY, 7], [T + 3 * DAY, 0]]);
          assert.deepEqual(await c.range("1h", { from: T, to: T + HOUR }), [[T, 3], [T + HOUR, 2]]);
          const info = await c.info();
          assert.deepEqual(Object.keys(info).sort(), ["first", "last", "memory", "resolutions", "slots"]);
          assert.deepEqual(info.resolutions, [[HOUR, 5000], [DAY, 5000]]);
          assert.deepEqual([info.slots, info.first, info.last], [5, T, T + 2 * DAY]);
          assert.ok(Number.isInteger(info.memory) && info.memory > 0);
          assert.equal(await t.counter(key("missing")).info(), null);
          assert.deepEqual(await t.counter(key("missing")).sum(["1h", "1d"]), [0, 0]);
          assert.deepEqual(await t.counter(key("missing")).range("1h"), []);
        });

        test("counter limit", async () => {
          const c = t.counter(key("l"));
          await c.create({ resolutions: ["1h:5000", "1d:5000"] });
          await c.incrby(3, { at: T });
          await c.incrby(2, { at: T + HOUR });
          assert.deepEqual(await c.limit(1, { "1h": 5 }, { at: T + HOUR }), { allowed: true, retryAfterMs: 0, sums: [3] });
          assert.deepEqual(await c.limit(1, [["1h", 5], ["2h", 6]], { at: T + HOUR }), { allowed: false, retryAfterMs: HOUR, sums: [3, 6] });
          assert.deepEqual(await c.limit(10, { "1h": 5 }, { at: T + HOUR }), { allowed: false, retryAfterMs: -1, sums: [3] });
          assert.deepEqual(await c.limit(0, { "1h": 5, "1d": 100 }, { at: T + HOUR }), { allowed: true, retryAfterMs: 0, sums: [3, 6] });
          await assert.rejects(c.limit(-1, { "1h": 5 }), { message: "ERR value is not an integer or out of range: increment is an integer >= 0" });
          const fresh = t.counter(key("fresh"));
          const got = [];
          for (let i = 0; i < 3; i++) got.push((await fresh.limit(1, { "1m": 2 })).allowed);
          assert.deepEqual(got, [true, true, false]);
        });

        test("counter limit details", async () => {
          const c = t.counter(key("d"));
          await c.create({ resolutions: ["1h:1000"] });
          await c.incrby(3, { at: T });
          await c.incrby(2, { at: T + 2 * HOUR });
          const now = T + 2 * HOUR;
          assert.deepEqual(await c.limit(0, { "1h": 5, "4h": 5 }, { at: now, details: true }),
            { allowed: true, retryAfterMs: 0, sums: [2, 5], windows: [ws(2, 3, HOUR), ws(5, 0, 2 * HOUR)] });
          assert.deepEqual(await c.limit(1, [["1h", 5], ["4h", 5]], { at: now, details: true }),
            { allowed: false, retryAfterMs: 2 * HOUR, sums: [2, 5], windows: [ws(2, 3, HOUR), ws(5, 0, 2 * HOUR)] });
          assert.deepEqual(await c.limit(10, { "1h": 5 }, { at: now, details: true }),
            { allowed: false, retryAfterMs: -1, sums: [2], windows: [ws(2, 3, HOUR)] });
          assert.deepEqual(await c.limit(1, { "1h": 5 }, { at: now, details: true }),
            { allowed: true, retryAfterMs: 0, sums: [3], windows: [ws(3, 2, HOUR)] });
          assert.deepEqual(await c.sum("1h", { at: now }), [3]);
          assert.equal((await c.limit(0, { "1h": 5 }, { at: now })).windows, undefined);
          assert.deepEqual((await t.counter(key("missing")).limit(0, { "1m": 4 }, { details: true })).windows, [ws(0, 4, 0)]);
          const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`${i + 1}h`, 1]));
          await assert.rejects(c.limit(1, many, { details: true }), { message: "ERR syntax error" });
        });

        test("counter errors and keys", async () => {
          await t.send(["SET", key("s"), "x"], key("s"));
          await assert.rejects(t.counter(key("s")).incr(), { message: "WRONGTYPE Operation against a key holding the wrong kind of value" });
          await assert.rejects(t.counter(key("c2")).sum("365d"), { message: "ERR window '365d' is longer than any resolution keeps (at most 120d)" });
          await assert.rejects(t.counter(key("c2")).incr({ at: 99999999999999 }), { message: "ERR timestamp is too far in the future" });
          await assert.rejects(t.counter(key("c2")).sum(1.5), TypeError);
          assert.throws(() => new Tally({}), TypeError);
        });

        test("leaderboard", async () => {
          const b = t.leaderboard(key("daily"));
          assert.equal(await b.create({ window: "3650d", slot: DAY }), undefined);
          await assert.rejects(b.create(), { message: "ERR key already exists" });
          assert.deepEqual(await b.incrby({ alice: 4, bob: 2 }, { at: T }), [4, 2]);
          assert.equal(await b.incr("alice", 1, { at: T + 2 * DAY }), 5);
          assert.deepEqual(await b.incrby([["carol", 1]], { at: T }), [1]);
          assert.deepEqual(await b.top(10), [{ member: "alice", score: 5 }, { member: "bob", score: 2 }, { member: "carol", score: 1 }]);
          assert.deepEqual(await b.top(1, { offset: 1 }), [{ member: "bob", score: 2 }]);
          assert.deepEqual(await b.top(10, { window: "1d" }), []);
          assert.deepEqual([await b.score("alice"), await b.score("bob"), await b.score("nobody")], [5, 2, null]);
          assert.deepEqual([await b.rank("alice"), await b.rank("carol"), await b.rank("nobody")], [0, 2, null]);
          assert.deepEqual([await b.rank("alice", { ties: true }), await b.rank("nobody", { ties: true })], [0, null]);
          assert.deepEqual(await b.scores("alice", "nobody", "carol"), [5, null, 1]);
          assert.deepEqual(await b.around("bob", 1), [{ member: "alice", score: 5 }, { member: "bob", score: 2 }, { member: "carol", score: 1 }]);
          assert.deepEqual(await b.around("alice", 0), [{ member: "alice", score: 5 }]);
          assert.deepEqual(await b.around("nobody", 3), []);
          await assert.rejects(b.around("alice", 1001), { message: "ERR count must be between 0 and 1000" });
          await assert.rejects(b.scores(), TypeError);
          assert.deepEqual(await b.history("alice"), [[T, 4], [T + 2 * DAY, 1]]);
          assert.deepEqual(await b.history("alice", { window: "1d" }), []);
          assert.deepEqual(await b.history("nobody"), []);
          assert.deepEqual(await b.info(), { window: 3650 * DAY, slot: DAY, members: 3, slots: 2, oldest: T, capacity: 0, error: 0 });
          // A board with CAPACITY: the slot keeps 2 members, b (the smallest) leaves for c.
          const trending = t.leaderboard(key("trending"));
          assert.equal(await trending.create({ window: "3650d", slot: DAY, capacity: 2 }), undefined);
          assert.deepEqual(await trending.incrby({ a: 5, b: 2 }, { at: T }), [5, 2]);
          assert.equal(await trending.incr("c", 1, { at: T }), 3);
          assert.deepEqual(await trending.top(10), [{ member: "a", score: 5 }, { member: "c", score: 3 }]);
          const ti = await trending.info();
          assert.deepEqual([ti.capacity, ti.error, ti.members], [2, 2, 2]);
          await assert.rejects(trending.incr("a", -1, { at: T }), { message: "ERR a board with CAPACITY takes only positive increments" });
          await assert.rejects(t.leaderboard(key("other")).create({ capacity: 0 }), { message: "ERR CAPACITY must be an integer from 1 to 100000" });
          const missing = t.leaderboard(key("missing"));
          assert.deepEqual([await missing.info(), await missing.top(10), await missing.score("x")], [null, [], null]);
          await assert.rejects(b.incr("alice", 0), { message: "ERR increment must be a non-zero integer" });
          assert.deepEqual(await b.incrby({ alice: -1, bob: -2 }, { at: T }), [4, 0]);
          await assert.rejects(b.incrby([["alice", -1], ["carol", -2]], { at: T }), { message: "ERR count would go below zero" });
          assert.deepEqual(await b.top(10), [{ member: "alice", score: 4 }, { member: "carol", score: 1 }]);
          assert.equal(await b.rem("alice", "nobody", "alice"), 1);
          assert.equal(await b.rem("alice"), 0);
          assert.deepEqual([await b.score("alice"), await b.history("alice"), await b.top(10)], [null, [], [{ member: "carol", score: 1 }]]);
          assert.equal(await b.incr("alice", 1, { at: T }), 1);
          assert.equal(await missing.rem("x"), 0);
          await assert.rejects(b.rem(), TypeError);
          // Standings: equal totals share a tie rank; AROUND follows TOP's order.
          const games = t.leaderboard(key("games"));
          await games.incrby({ ann: 9, bob: 7, cat: 7, dan: 5 });
          const ties = [];
          for (const name of ["ann", "bob", "cat", "dan"]) ties.push(await games.rank(name, { ties: true }));
          assert.deepEqual(ties, [0, 1, 1, 3]);
          assert.deepEqual([await games.rank("cat"), await games.rank("bob")], [1, 2]);
          assert.deepEqual(await games.around("dan", 2), [{ member: "cat", score: 7 }, { member: "bob", score: 7 }, { member: "dan", score: 5 }]);
          const hourly = t.leaderboard(key("hourly"));
          assert.deepEqual(await hourly.incrby({ "post:1": 1, "post:2": 3 }), [1, 3]);
          assert.deepEqual(await hourly.top(10), [{ member: "post:2", score: 3 }, { member: "post:1", score: 1 }]);
          const info = await hourly.info();
          assert.deepEqual([info.window, info.members], [DAY, 2]);
          assert.deepEqual(await t.leaderboard(key("utf")).incrby({ "é": 2 }), [2]);
          assert.deepEqual(await t.leaderboard(key("utf")).top(1), [{ member: "é", score: 2 }]);
        });

        test("stats", async () => {
          const s = t.stats(key("daily"));
          assert.equal(await s.create({ period: "1d", keep: 2000 }), undefined);
          assert.equal(await s.add([1.5, 2.5], { at: T }), 2);
          assert.equal(await s.add(10, { at: T + 2 * DAY }), 1);
          const [first, second] = await s.range();
          const sd = Math.sqrt(((1.5 - 2) ** 2 + (2.5 - 2) ** 2) / 1);
          assert.deepEqual(first, [T, { count: 2, sum: 4, min: 1.5, max: 2.5, mean: 2, stddev: sd, p50: 1.5, p90: 2.5, p99: 2.5 }]);
          assert.deepEqual(second, [T + 2 * DAY, { count: 1, sum: 10, min: 10, max: 10, mean: 10, stddev: 0, p50: 10, p90: 10, p99: 10 }]);
          assert.deepEqual(await s.range({ from: T + DAY }), [second]);
          assert.equal(await s.get(), null);
          const whole = await s.get({ window: "2000d" });
          assert.deepEqual([whole.count, whole.sum, whole.min, whole.max], [3, 14, 1.5, 10]);
          assert.ok(Math.abs(whole.mean - 14 / 3) < 1e-9);
          const m = 14 / 3;
          const sd3 = Math.sqrt(((1.5 - m) ** 2 + (2.5 - m) ** 2 + (10 - m) ** 2) / 2);
          assert.ok(Math.abs(whole.stddev - sd3) < 1e-9);
          assert.deepEqual(await s.quantile([0, 1], { window: "2000d" }), [1.5, 10]);
          assert.equal(await s.quantile(0.5), null);
          const info = await s.info();
          assert.deepEqual([info.period, info.keep, info.periods], [DAY, 2000, 2]);
          assert.ok(info.memory > 0);
          assert.equal(await t.stats(key("missing")).info(), null);
          assert.equal(await t.stats(key("missing")).get(), null);

          const latency = t.stats(key("latency{page}"));
          assert.equal(await latency.add([12, 8, 232]), 3);
          assert.equal(await latency.add(40, { report: { key: key("slowest{page}"), member: "/checkout" } }), 4);
          assert.equal(await latency.add(1, { report: { key: key("slowest{page}"), member: "/home", keep: 1 } }), 5);
          assert.equal(Number(await t.send(["ZCARD", key("slowest{page}")], key("slowest{page}"))), 1);
          assert.equal(Number(await t.send(["ZSCORE", key("slowest{page}"), "/checkout"], key("slowest{page}"))), 73);
          const now = await latency.get();
          assert.deepEqual([now.count, now.min, now.max, now.p90], [5, 1, 232, 232]);
          const [p50, p99] = await latency.quantile([0.5, 0.99]);
          assert.ok(Math.abs(p50 - 12) <= 0.12 && p99 === 232);
          await assert.rejects(latency.add(Infinity), { message: "ERR value is not a valid float" });
          await assert.rejects(latency.quantile(2), { message: "ERR quantile must be between 0 and 1" });
        });

        test("reads across keys and REPORT BY", async () => {
          const [login, search] = [key("{svc}:/login"), key("{svc}:/search")];
          for (const [k, by] of [[login, 3], [search, 5]]) {
            await t.counter(k).create({ resolutions: ["1h:1000", "1d:1000"] });
            await t.counter(k).incrby(by, { at: T });
          }
          await t.counter(search).incrby(10, { at: T - 3 * HOUR });
          // Each window summed over the keys; a missing key counts 0.
          assert.deepEqual(await t.msum([login, search, key("{svc}:/none")], ["1h", "1d"], { at: T }), [8, 18]);
          assert.deepEqual(await t.msum([login], "1h", { at: T }), [3]);
          await assert.rejects(t.msum([login, search], "5000d"), {
            message: "ERR window '5000d' is longer than any resolution keeps (at most 1000d)",
          });

          const [cart, pay] = [t.stats(key("{shop}:/cart")), t.stats(key("{shop}:/pay"))];
          assert.equal(await cart.add([10, 20, 30]), 3);
          assert.equal(await pay.add([100, 300]), 2);
          const keys = [cart.key, pay.key, key("{shop}:/none")];
          const union = await t.mget(keys);
          assert.deepEqual([union.count, union.sum, union.min, union.max, union.mean], [5, 460, 10, 300, 92]);
          const sd = Math.sqrt([10, 20, 30, 100, 300].reduce((a, x) => a + (x - 92) ** 2, 0) / 4);
          assert.ok(Math.abs(union.stddev - sd) < 1e-9);
          assert.ok(Math.abs(union.p50 - 30) <= 0.3);
          assert.deepEqual(await t.mget(keys, { window: "2h" }), union);
          const [lowest, highest] = await t.mquantile(keys, [0, 1]);
          assert.deepEqual([lowest, highest], [10, 300]);
          assert.equal(await t.mget([key("{shop}:/none")]), null);
          assert.equal(await t.mquantile([key("{shop}:/none")], 0.5), null);
          await assert.rejects(t.mget(keys, { window: "90m" }), /WINDOW must be a multiple of the period/);

          // REPORT ranks by any statistic of the period.
          const tail = t.stats(key("{shop}:/tail"));
          const slow = key("{shop}:slow");
          assert.equal(await tail.add([1, 1, 1, 900], { report: { key: slow, member: "/tail", by: "p99" } }), 4);
          assert.equal(Number(await t.send(["ZSCORE", slow, "/tail"], slow)), 900);
          assert.equal(await tail.add(1, { report: { key: slow, member: "/tail", keep: 5, by: "count" } }), 5);
          assert.equal(Number(await t.send(["ZSCORE", slow, "/tail"], slow)), 5);
          await assert.rejects(tail.add(1, { report: { key: slow, member: "/tail", by: "p95" } }), {
            message: "ERR syntax error",
          });
        });

        test("stats cdf", async () => {
          const s = t.stats(key("cdf"));
          assert.equal(await s.cdf(1), null);
          assert.equal(await s.add([10, 20, 30, 40]), 4);
          assert.deepEqual(await s.cdf([5, 40, 100, 9.99]), [0, 1, 1, 0]);
          assert.deepEqual(await s.cdf([25, 35, 15]), [0.5, 0.75, 0.25]);
          const [at20] = await s.cdf(20);
          assert.ok(at20 >= 0.25 && at20 <= 0.5);
          assert.deepEqual(await s.cdf(40, { window: "1d" }), [1]);
          await assert.rejects(s.cdf(NaN), { message: "ERR value is not a valid float" });
          await assert.rejects(s.cdf(Array.from({ length: 1001 }, (_, i) => i)), { message: "ERR too many values, at most 1000" });
        });

        test("mlimit", async () => {
          const user = key("{m}:user"), ip = key("{m}:ip");
          for (const k of [user, ip]) await t.counter(k).create({ resolutions: ["1h:1000"] });
          await t.counter(user).incrby(3, { at: T });
          await t.counter(ip).incrby(1, { at: T });
          const limits = { [user]: { "1h": 5, "2h": 10 }, [ip]: [["1h", 2]] };
          assert.deepEqual(await t.mlimit(limits, { at: T }), { allowed: true, retryAfterMs: 0, sums: { [user]: [4, 4], [ip]: [2] } });
          assert.deepEqual(await t.mlimit(limits, { at: T, details: true }), {
            allowed: false, retryAfterMs: HOUR, sums: { [user]: [4, 4], [ip]: [2] },
            windows: { [user]: [ws(4, 1, HOUR), ws(4, 6, 2 * HOUR)], [ip]: [ws(2, 0, HOUR)] },
          });
          assert.deepEqual(await t.counter(user).sum("1h", { at: T }), [4]);
          assert.deepEqual(await t.mlimit(limits, { increment: 10, at: T }), { allowed: false, retryAfterMs: -1, sums: { [user]: [4, 4], [ip]: [2] } });
          assert.deepEqual((await t.mlimit({ [user]: { "1h": 5 } }, { increment: 0, at: T, details: true })).windows, { [user]: [ws(4, 1, HOUR)] });
          assert.deepEqual(await t.mlimit(limits, { at: T + HOUR }), { allowed: true, retryAfterMs: 0, sums: { [user]: [1, 5], [ip]: [1] } });
          assert.deepEqual(await t.counter(ip).sum("2h", { at: T + HOUR }), [3]);
          const fresh = key("{m}:fresh");
          const got = [];
          for (let i = 0; i < 3; i++) got.push((await t.mlimit({ [fresh]: { "1m": 2 }, [user]: { "1m": 100 } })).allowed);
          assert.deepEqual(got, [true, true, false]);
          assert.deepEqual(await t.counter(fresh).sum("1m"), [2]);
          await assert.rejects(t.mlimit({}), { message: "ERR wrong number of arguments for 'tscounter.mlimit' command" });
          await assert.rejects(t.mlimit([[user, { "1m": 1 }], [user, { "1m": 1 }]]), { message: "ERR syntax error" });
          await t.send(["SET", key("{m}:s"), "x"], key("{m}:s"));
          await assert.rejects(t.mlimit({ [key("{m}:new")]: { "1m": 5 }, [key("{m}:s")]: { "1m": 5 } }),
            { message: "WRONGTYPE Operation against a key holding the wrong kind of value" });
          assert.equal(Number(await t.send(["EXISTS", key("{m}:new")], key("{m}:new"))), 0);
          await assert.rejects(t.mlimit({ [user]: { "1m": 5 } }, { increment: -1 }), { message: "ERR value is not an integer or out of range: increment is an integer >= 0" });
        });

        test("throttle", async () => {
          // A past second: replies with `at` are exact. 30 a minute, bursts of 15: T = 2 s.
          const at = (Math.floor(Date.now() / 1000) - 60) * 1000;
          const d = (allowed, limit, remaining, retryAfterMs, resetAfterMs) =>
            ({ allowed, limit, remaining, retryAfterMs, resetAfterMs });
          const th = t.throttle(key("th"));
          assert.ok(th instanceof Throttle);
          assert.deepEqual(await th.allow(15, 30, "1m", { at }), d(true, 16, 15, 0, 2000));
          assert.deepEqual(await th.allow(15, 30, 60_000, { quantity: 15, at: new Date(at) }), d(true, 16, 0, 0, 32000));
          assert.deepEqual(await th.allow(15, 30, "1m", { at: at + 500 }), d(false, 16, 0, 1500, 31500));
          assert.deepEqual(await th.allow(15, 30, "1m", { quantity: 17, at: at + 500 }), d(false, 16, 0, -1, 31500));
          assert.deepEqual(await th.allow(15, 30, "1m", { quantity: 0, at: at + 4000 }), d(true, 16, 2, 0, 28000));
          // Without `at`: the server's clock; the first request of a fresh key is exact.
          assert.deepEqual(await t.throttle(key("now")).allow(4, 10, "1s"), d(true, 5, 4, 0, 100));
          await assert.rejects(th.allow(0, 2_000_000, "1ms"), { message: "ERR rate is too high" });
          await assert.rejects(th.allow(1, 0, "1s"), { message: "ERR value is not an integer or out of range: count is an integer >= 1" });
        });
      });
    }
  });
}
