// RateLimiterTally against RateLimiterRedis's documented behaviour, on every server over
// node-redis and ioredis, RESP2 and RESP3. Times are checked against the client clock
// read before and after each request.
import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { RateLimiterRes } from "rate-limiter-flexible";
import { RateLimiterTally } from "tally-redis/rate-limiter-flexible";
import { Tally } from "tally-redis";
import { CLIENTS, Server, close, connect, keys, serverKinds, sleepUntil } from "./harness.mjs";

/** `{ start, end, ok, res }` of a limiter call: resolved or rejected, with the clock on both sides. */
async function timed(fn) {
  const start = Date.now();
  try {
    const res = await fn();
    return { start, end: Date.now(), ok: true, res };
  } catch (res) {
    return { start, end: Date.now(), ok: false, res };
  }
}

const fields = (r) => [r.remainingPoints, r.consumedPoints, r.isFirstInDuration];

for (const [name, binary] of serverKinds()) {
  describe(name, () => {
    let server;
    before(async () => { server = await Server.start(name, binary); });
    after(() => server.stop());

    for (const kind of CLIENTS) {
      describe(kind.name, () => {
        let client, key, t;
        before(async () => { client = await connect(kind, server.port); t = new Tally(client); });
        after(() => close(client));
        beforeEach(() => { key = keys(); });

        test("consume: points over a sliding window, msBeforeNext when the window next frees a point", async () => {
          const W = 60_000, slot = 1200;
          const limiter = new RateLimiterTally({ storeClient: client, points: 3, duration: 60, keyPrefix: key("p") });
          const calls = [];
          for (let i = 0; i < 4; i++) calls.push(await timed(() => limiter.consume("u")));
          assert.deepEqual(calls.map((c) => c.ok), [true, true, true, false]);
          for (const c of calls) assert.ok(c.res instanceof RateLimiterRes);
          assert.deepEqual(calls.map((c) => fields(c.res)), [[2, 1, true], [1, 2, false], [0, 3, false], [0, 4, false]]);
          // The first point leaves the window at its slot's start + W: within (served - slot + W, served + W].
          for (const c of calls) {
            const when = c.start + c.res.msBeforeNext;
            assert.ok(when > calls[0].start + W - slot - (c.end - c.start), `msBeforeNext ${c.res.msBeforeNext} too short`);
            assert.ok(when <= calls[0].end + W, `msBeforeNext ${c.res.msBeforeNext} too long`);
          }
          const got = await limiter.get("u");
          assert.deepEqual(fields(got), [0, 3, false]); // the rejected consume was not counted
          assert.equal(await limiter.get("nobody"), null);
          assert.equal(limiter.getKey("u"), `${key("p")}:u`);
          assert.equal(limiter.parseKey(limiter.getKey("u")), "u");
          assert.equal(limiter.msDuration, W);
        });

        test("a rejected consume answers the exact wait", async () => {
          const W = 1000, slot = 20;
          const limiter = new RateLimiterTally({ storeClient: client, points: 1, duration: 1, keyPrefix: key("w") });
          // Both rejections must come well inside the window of the admitted consume; a
          // machine so stalled that they did not proves nothing: that attempt is dropped and
          // made again on a new key.
          let who, admitted, first, second;
          for (let attempt = 1; ; attempt++) {
            who = `u${attempt}`;
            admitted = await timed(() => limiter.consume(who));
            assert.ok(admitted.ok);
            first = await timed(() => limiter.consume(who));
            second = await timed(() => limiter.consume(who));
            if (second.end - admitted.start < W - slot) break;
            assert.ok(attempt < 5, "the machine stalled for a whole window five times in a row");
          }
          assert.deepEqual([first.ok, second.ok], [false, false]);
          // Both answers name the same instant (when the point leaves), each seen from a clock
          // read at most one round trip before the server's.
          const a = first.start + first.res.msBeforeNext, b = second.start + second.res.msBeforeNext;
          assert.ok(Math.abs(a - b) <= (first.end - first.start) + (second.end - second.start), `${a} vs ${b}`);
          assert.ok(first.res.msBeforeNext >= 1 && first.res.msBeforeNext <= 1000);
          await sleepUntil(first.end + first.res.msBeforeNext);
          const later = await timed(() => limiter.consume(who));
          assert.ok(later.ok, "the same consume passes once the wait is over");
          assert.deepEqual(fields(later.res), [0, 1, true]);
          // More points than the limit can ever hold: rejected, no wait helps.
          const never = await timed(() => limiter.consume("v", 2));
          assert.deepEqual([never.ok, never.res.msBeforeNext, never.res.consumedPoints], [false, -1, 2]);
        });

        test("blockDuration blocks the key once consumed is over points", async () => {
          const limiter = new RateLimiterTally({ storeClient: client, points: 1, duration: 60, blockDuration: 10, keyPrefix: key("b") });
          assert.ok((await timed(() => limiter.consume("u"))).ok);
          const blocked = await timed(() => limiter.consume("u"));
          assert.deepEqual([blocked.ok, blocked.res.msBeforeNext, blocked.res.remainingPoints], [false, 10_000, 0]);
          const again = await timed(() => limiter.consume("u"));
          assert.equal(again.ok, false);
          assert.ok(again.res.msBeforeNext > 10_000 - (again.end - blocked.start) - 1 && again.res.msBeforeNext <= 10_000);
          assert.ok(again.res.consumedPoints >= 2);
          const got = await limiter.get("u");
          assert.ok(got.msBeforeNext > 0 && got.msBeforeNext <= 10_000);
          assert.deepEqual([got.remainingPoints, got.consumedPoints], [0, 2]);
          // Consumes while blocked are not counted in the window.
          assert.deepEqual(await t.counter(limiter.counterKey("u")).sum(60_000), [1]);
          assert.equal(await limiter.delete("u"), true);
          assert.equal(await limiter.delete("u"), false);
          assert.deepEqual(fields(await limiter.consume("u")), [0, 1, true]);
        });

        test("penalty, reward, set, block, get, delete", async () => {
          const limiter = new RateLimiterTally({ storeClient: client, points: 5, duration: 60, keyPrefix: key("m") });
          assert.deepEqual(fields(await limiter.penalty("u", 2)), [3, 2, false]);
          assert.deepEqual(fields(await limiter.consume("u")), [2, 3, false]);
          assert.deepEqual(fields(await limiter.reward("u", 1)), [3, 2, false]);
          assert.deepEqual(fields(await limiter.get("u")), [3, 2, false]);
          assert.deepEqual(fields(await limiter.reward("u", 10)), [5, 0, false]); // never below 0
          assert.equal(await limiter.get("u"), null);
          assert.deepEqual(fields(await limiter.reward("nobody")), [5, 0, false]);
          assert.equal(await limiter.get("nobody"), null);
          assert.deepEqual(fields(await limiter.penalty("u", 7)), [0, 7, false]); // a penalty always counts
          await assert.rejects(limiter.consume("u"), (r) => r instanceof RateLimiterRes && r.consumedPoints === 8);
          assert.deepEqual(fields(await limiter.set("u", 4, 0)), [1, 4, false]);
          assert.deepEqual(fields(await limiter.consume("u")), [0, 5, false]);
          assert.deepEqual(fields(await limiter.set("u", 0, 0)), [5, 0, false]);
          assert.equal(await limiter.get("u"), null);
          const blockStart = Date.now();
          const block = await limiter.block("u", 10);
          assert.deepEqual([block.msBeforeNext, block.remainingPoints, block.consumedPoints], [10_000, 0, 6]);
          const refused = await timed(() => limiter.consume("u"));
          assert.equal(refused.ok, false);
          assert.ok(refused.res.msBeforeNext <= 10_000 && refused.res.msBeforeNext >= 10_000 - (refused.end - blockStart) - 1);
          assert.equal((await limiter.block("forever", 0)).msBeforeNext, -1);
          assert.equal((await timed(() => limiter.consume("forever"))).res.msBeforeNext, -1);
          assert.equal(await limiter.delete("u"), true);
          assert.equal(await limiter.delete("forever"), true);
          assert.deepEqual(fields(await limiter.consume("u")), [4, 1, true]);
        });

        test("racing clients are never admitted past points", async () => {
          const clients = await Promise.all(Array.from({ length: 5 }, () => connect(kind, server.port)));
          try {
            const limiters = clients.map((c) => new RateLimiterTally({ storeClient: c, points: 10, duration: 60, keyPrefix: key("race") }));
            const calls = await Promise.all(Array.from({ length: 50 }, (_, i) => timed(() => limiters[i % 5].consume("u"))));
            const admitted = calls.filter((c) => c.ok).map((c) => c.res.consumedPoints).sort((a, b) => a - b);
            assert.deepEqual(admitted, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
            assert.ok(calls.filter((c) => !c.ok).every((c) => c.res instanceof RateLimiterRes && c.res.consumedPoints === 11));
          } finally {
            await Promise.all(clients.map(close));
          }
        });

        test("errors reject with the server's text", async () => {
          const limiter = new RateLimiterTally({ storeClient: client, points: 5, duration: 60, keyPrefix: key("e") });
          await t.send(["SET", limiter.counterKey("u"), "x"], limiter.counterKey("u"));
          await assert.rejects(limiter.consume("u"), { message: "WRONGTYPE Operation against a key holding the wrong kind of value" });
          await assert.rejects(limiter.get("u"), { message: "WRONGTYPE Operation against a key holding the wrong kind of value" });
          assert.throws(() => new RateLimiterTally({ storeClient: client, points: 5, duration: 0 }), /duration must be positive/);
          assert.throws(() => new RateLimiterTally({ points: 5, duration: 1 }), /storeClient is not set/);
        });

        test("inMemoryBlockOnConsumed and execEvenly", async () => {
          const limiter = new RateLimiterTally({
            storeClient: client, points: 2, duration: 60, keyPrefix: key("mem"), inMemoryBlockOnConsumed: 2, inMemoryBlockDuration: 10,
          });
          await limiter.consume("u");
          await limiter.consume("u");
          await limiter.delete("u"); // forgets the in-memory block too
          await limiter.consume("u");
          await limiter.consume("u");
          await t.send(["DEL", limiter.counterKey("u")], limiter.counterKey("u"));
          // Blocked in this process's memory: rejected without asking Redis.
          const r = await timed(() => limiter.consume("u"));
          assert.equal(r.ok, false);
          assert.ok(r.res.msBeforeNext > 0 && r.res.msBeforeNext <= 10_000);
          assert.deepEqual(await t.counter(limiter.counterKey("u")).sum(60_000), [0]);

          const even = new RateLimiterTally({ storeClient: client, points: 1000, duration: 60, keyPrefix: key("even"), execEvenly: true, execEvenlyMinDelayMs: 1 });
          const first = await even.consume("u");
          assert.deepEqual(fields(first), [999, 1, true]);
          const second = await even.consume("u");
          assert.deepEqual(fields(second), [998, 2, false]);
          assert.ok(second.msBeforeNext >= 0 && second.msBeforeNext <= 60_000);
        });
      });
    }
  });
}
