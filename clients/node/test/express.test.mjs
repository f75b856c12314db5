// TallyStore: the express-rate-limit store, directly and in an express app, on every
// server over node-redis and ioredis, RESP2 and RESP3. Every time-dependent value is
// checked against the client clock read before and after the request.
import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { rateLimit } from "express-rate-limit";
import { TallyStore } from "tally-redis/express-rate-limit";
import { Tally } from "tally-redis";
import { CLIENTS, Server, close, connect, keys, serverKinds, sleepUntil } from "./harness.mjs";

/** `{ before, after, value }` of an awaited call: the client clock on both sides. */
async function timed(fn) {
  const start = Date.now();
  const value = await fn();
  return { start, end: Date.now(), value };
}

for (const [name, binary] of serverKinds()) {
  describe(name, () => {
    let server;
    before(async () => { server = await Server.start(name, binary); });
    after(() => server.stop());

    for (const kind of CLIENTS) {
      describe(kind.name, () => {
        let client, key;
        before(async () => { client = await connect(kind, server.port); });
        after(() => close(client));
        beforeEach(() => { key = keys(); });

        test("increment counts a sliding window and answers when it next falls", async () => {
          const W = 60_000, slot = 1200; // 50 slots of 1.2 s
          const store = new TallyStore({ client, prefix: key("rl:") });
          store.init({ windowMs: W, limit: 3 });
          const hits = [];
          for (let i = 0; i < 4; i++) hits.push(await timed(() => store.increment("ip")));
          assert.deepEqual(hits.map((h) => h.value.totalHits), [1, 2, 3, 4]);
          // The first hit was served in [hits[0].start, hits[0].end]; its slot leaves the
          // window at slot start + W, so between (served - slot + W) and (served + W). Each
          // resetTime is computed from the clock before its own request, so it may be early
          // by that request's round trip, never late.
          for (const h of hits) {
            const reset = h.value.resetTime.getTime();
            assert.ok(reset > hits[0].start + W - slot - (h.end - h.start), `reset ${reset} too early`);
            assert.ok(reset <= hits[0].end + W, `reset ${reset} too late`);
          }
          const got = await store.get("ip");
          assert.equal(got.totalHits, 3); // the refused hit was not counted
          assert.ok(got.resetTime.getTime() <= hits[0].end + W);
          await store.decrement("ip");
          assert.equal((await store.get("ip")).totalHits, 2);
          assert.equal((await store.increment("ip")).totalHits, 3);
          await store.resetKey("ip");
          assert.equal(await store.get("ip"), undefined);
          assert.equal((await store.increment("ip")).totalHits, 1);
          // The counter is a tally counter of 50 slots of W/50 under the prefix.
          const info = await new Tally(client).counter(`${key("rl:")}{ip}`).info();
          assert.deepEqual(info.resolutions, [[slot, 50]]);
          // decrement never takes a window below 0, nor creates a key.
          await store.decrement("nobody");
          assert.equal(await store.get("nobody"), undefined);
        });

        test("every hit counts when the limit is a function or failed requests are skipped", async () => {
          const store = new TallyStore({ client, prefix: key("fn:") });
          store.init({ windowMs: 60_000, limit: () => 2 });
          const totals = [];
          for (let i = 0; i < 4; i++) totals.push((await store.increment("ip")).totalHits);
          assert.deepEqual(totals, [1, 2, 3, 4]);
          assert.equal((await store.get("ip")).totalHits, 4);
        });

        test("racing clients are never admitted past the limit", async () => {
          const clients = await Promise.all(Array.from({ length: 5 }, () => connect(kind, server.port)));
          try {
            const stores = clients.map((c) => new TallyStore({ client: c, prefix: key("race:") }));
            for (const s of stores) s.init({ windowMs: 60_000, limit: 10 });
            const results = await Promise.all(Array.from({ length: 50 }, (_, i) => stores[i % 5].increment("ip")));
            const admitted = results.filter((r) => r.totalHits <= 10).map((r) => r.totalHits).sort((a, b) => a - b);
            assert.deepEqual(admitted, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
            assert.equal(results.filter((r) => r.totalHits === 11).length, 40);
            assert.equal((await stores[0].get("ip")).totalHits, 10);
          } finally {
            await Promise.all(clients.map(close));
          }
        });

        test("errors reject with the server's text", async () => {
          const store = new TallyStore({ client, prefix: key("err:") });
          store.init({ windowMs: 60_000, limit: 3 });
          await new Tally(client).send(["SET", `${key("err:")}{ip}`, "x"], `${key("err:")}{ip}`);
          await assert.rejects(store.increment("ip"), { message: "WRONGTYPE Operation against a key holding the wrong kind of value" });
          const bad = new TallyStore({ client, prefix: key("bad:") });
          assert.throws(() => bad.init({ windowMs: 0, limit: 3 }), RangeError);
          await assert.rejects(new TallyStore({ client }).increment("x"), /init was not called/);
        });

        test("an express app answers 200, 200, 200, 429, then 200 once the window has slid", async () => {
          const W = 1000, slot = 20; // 50 slots of 20 ms
          const app = express();
          let run = 0;
          app.use(rateLimit({
            windowMs: W, limit: 3, standardHeaders: "draft-7", legacyHeaders: false,
            keyGenerator: () => `client-${run}`,
            store: new TallyStore({ client, prefix: key("app:") }),
          }));
          app.get("/", (req, res) => res.send("hello"));
          const http = await new Promise((resolve) => { const s = app.listen(0, "127.0.0.1", () => resolve(s)); });
          const url = `http://127.0.0.1:${http.address().port}/`;
          const get = async () => {
            const r = await timed(() => fetch(url));
            return { ...r, status: r.value.status, body: await r.value.text(), headers: r.value.headers };
          };
          try {
            // Four requests well inside one window: the first hit cannot have left when the
            // fourth is served. A machine so stalled that they spanned W - slot proves
            // nothing either way: that attempt is dropped and made again with a new client key.
            let answers;
            for (;;) {
              run++;
              answers = [];
              for (let i = 0; i < 4; i++) answers.push(await get());
              if (answers[3].end - answers[0].start < W - slot) break;
              assert.ok(run < 5, "the machine stalled for a whole window five times in a row");
            }
            assert.deepEqual(answers.map((a) => a.status), [200, 200, 200, 429]);
            assert.equal(answers[0].body, "hello");
            for (const [i, a] of answers.entries()) {
              assert.equal(a.headers.get("ratelimit-policy"), "3;w=1");
              const m = /^limit=3, remaining=(\d+), reset=(\d+)$/.exec(a.headers.get("ratelimit"));
              assert.ok(m, a.headers.get("ratelimit"));
              assert.equal(Number(m[1]), [2, 1, 0, 0][i]);
              assert.ok(Number(m[2]) >= 0 && Number(m[2]) <= 1, `reset=${m[2]}`);
            }
            const retry = Number(answers[3].headers.get("retry-after"));
            assert.ok(retry >= 0 && retry <= 1, `retry-after ${retry}`);
            // Every admitted hit was served before answers[2].end; it has left the window
            // W after that at the latest. Wait that long with slack, then ask again.
            await sleepUntil(answers[2].end + W + 100);
            const again = await get();
            assert.equal(again.status, 200);
            assert.equal(again.headers.get("ratelimit").replace(/reset=\d+/, "reset=?"), "limit=3, remaining=2, reset=?");
          } finally {
            await new Promise((resolve) => http.close(resolve));
          }
        });
      });
    }
  });
}
