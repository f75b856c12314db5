// `Tally#throttle(key).allow(...)` (TSTHROTTLE.ALLOW) on every server, over node-redis and
// ioredis, in RESP2 and RESP3. Times are explicit (`at`) except where the clock is the point.
import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Tally, Throttle } from "tally-redis";
import { CLIENTS, SHAPES, Server, close, connect, keys, serverKinds } from "./harness.mjs";

// A past second: replies with `at` are exact.
const T = (Math.floor(Date.now() / 1000) - 60) * 1000;
const d = (allowed, limit, remaining, retryAfterMs, resetAfterMs) =>
  ({ allowed, limit, remaining, retryAfterMs, resetAfterMs });

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

        test("throttle allow", async () => {
          const th = t.throttle(key("th"));
          assert.ok(th instanceof Throttle);
          // 30 a minute, bursts of 15: T = 2 s, tau = 32 s.
          assert.deepEqual(await th.allow(15, 30, "1m", { at: T }), d(true, 16, 15, 0, 2000));
          assert.deepEqual(await th.allow(15, 30, 60_000, { quantity: 15, at: new Date(T) }), d(true, 16, 0, 0, 32000));
          assert.deepEqual(await th.allow(15, 30, "1m", { at: T + 500 }), d(false, 16, 0, 1500, 31500));
          assert.deepEqual(await th.allow(15, 30, "1m", { quantity: 17, at: T + 500 }), d(false, 16, 0, -1, 31500));
          assert.deepEqual(await th.allow(15, 30, "1m", { quantity: 0, at: T + 4000 }), d(true, 16, 2, 0, 28000));
          // Without `at`: the server's clock; the first request of a fresh key is exact.
          assert.deepEqual(await t.throttle(key("now")).allow(4, 10, "1s"), d(true, 5, 4, 0, 100));
          await assert.rejects(th.allow(0, 2_000_000, "1ms"), { message: "ERR rate is too high" });
          await assert.rejects(th.allow(1, 0, "1s"), { message: "ERR value is not an integer or out of range" });
        });
      });
    }
  });
}
