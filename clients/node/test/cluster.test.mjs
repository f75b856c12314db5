// A three-primary Redis Cluster: the helpers, TallyStore and RateLimiterTally reach every
// key through node-redis's createCluster and ioredis's Cluster (RESP2 and RESP3); hash
// tags keep a limiter's keys in one slot; MLIMIT keys of two slots are refused with the
// server's CROSSSLOT and write nothing.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { Tally } from "tally-redis";
import { TallyStore } from "tally-redis/express-rate-limit";
import { RateLimiterTally } from "tally-redis/rate-limiter-flexible";
import { CLIENTS, Server, close, clusterPort, connect, connectCluster, execFileP, serverKinds, sleep } from "./harness.mjs";

const [name, binary] = serverKinds().find(([n]) => n === "redis") ?? serverKinds()[0];

// CRC16 (XMODEM) key slot, as Redis Cluster computes it, to check that keys spread.
function slotOf(key) {
  const open = key.indexOf("{");
  if (open >= 0) {
    const close = key.indexOf("}", open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  let crc = 0;
  for (const byte of Buffer.from(key)) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}

describe(`cluster (${name})`, () => {
  const nodes = [];
  before(async () => {
    for (let i = 0; i < 3; i++) {
      nodes.push(await Server.start(`${name}-cluster`, binary, ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"], await clusterPort()));
    }
    await execFileP("redis-cli", ["--cluster", "create", ...nodes.map((n) => `127.0.0.1:${n.port}`), "--cluster-replicas", "0", "--cluster-yes"], { timeout: 60_000 });
    const deadline = Date.now() + 30_000;
    for (const node of nodes) {
      const c = await connect(CLIENTS[0], node.port);
      try {
        while (!String(await c.sendCommand(["CLUSTER", "INFO"])).includes("cluster_state:ok")) {
          assert.ok(Date.now() < deadline, "cluster not ok");
          await sleep(100);
        }
      } finally {
        await close(c);
      }
    }
  });
  after(async () => {
    for (const node of nodes) await node.stop();
  });

  /** How many MOVED redirections the primaries have answered so far. */
  async function moved() {
    let total = 0;
    for (const node of nodes) {
      const c = await connect(CLIENTS[0], node.port);
      try {
        const m = /errorstat_MOVED:count=(\d+)/.exec(String(await c.sendCommand(["INFO", "errorstats"])));
        total += m ? Number(m[1]) : 0;
      } finally {
        await close(c);
      }
    }
    return total;
  }

  for (const kind of CLIENTS) {
    test(kind.name, async () => {
      const client = await connectCluster(kind, nodes[0].port);
      const movedBefore = await moved();
      try {
        const t = new Tally(client);
        const run = randomBytes(6).toString("hex");
        const counters = Array.from({ length: 30 }, (_, i) => `c:${run}:${i}`);
        assert.equal(new Set(counters.map((k) => Math.floor((slotOf(k) * 3) / 16384))).size, 3);
        for (const [i, k] of counters.entries()) {
          assert.equal(await t.counter(k).incrby(i + 1), i + 1);
          assert.equal((await t.counter(k).limit(1, { "1m": i + 1 })).allowed, false);
        }
        const sums = [];
        for (const k of counters) sums.push((await t.counter(k).sum("1m"))[0]);
        assert.deepEqual(sums, counters.map((_, i) => i + 1));

        const board = t.leaderboard(`{likes:${run}}`);
        assert.deepEqual(await board.incrby({ a: 2, b: 1 }), [2, 1]);
        assert.deepEqual(await board.top(10), [{ member: "a", score: 2 }, { member: "b", score: 1 }]);
        await assert.rejects(t.leaderboard(`likes:${run}`).incr("a"), /hash tag/);

        const tagged = { [`{u:${run}}:user`]: { "1m": 1 }, [`{u:${run}}:ip`]: { "1m": 5 } };
        assert.deepEqual(await t.mlimit(tagged), { allowed: true, retryAfterMs: 0, sums: Object.fromEntries(Object.keys(tagged).map((k) => [k, [1]])) });
        assert.ok((await t.mlimit(tagged)).retryAfterMs > 0);
        const a = `a:${run}`, b = `b:${run}`;
        assert.notEqual(slotOf(a), slotOf(b));
        await assert.rejects(t.mlimit({ [a]: { "1m": 1 }, [b]: { "1m": 1 } }),
          { message: "CROSSSLOT Keys in request don't hash to the same slot" });
        assert.equal(Number(await t.send(["EXISTS", a], a)) + Number(await t.send(["EXISTS", b], b)), 0);

        const stats = t.stats(`lat{${run}}`);
        assert.equal(await stats.add([5, 7], { report: { key: `slow{${run}}`, member: "/" } }), 2);
        assert.equal((await stats.get()).mean, 6);
        // Reads across keys route by their declared keys too.
        assert.deepEqual(await t.msum([`{u:${run}}:user`, `{u:${run}}:ip`, `{u:${run}}:none`], ["1m", "1h"]), [2, 2]);
        assert.equal(await t.stats(`lat2{${run}}`).add(9, { report: { key: `slow{${run}}`, member: "/2", by: "max" } }), 1);
        assert.equal((await t.mget([`lat{${run}}`, `lat2{${run}}`])).max, 9);
        assert.deepEqual(await t.mquantile([`lat{${run}}`, `lat2{${run}}`], [0, 1]), [5, 9]);
        await assert.rejects(t.msum([a, b], "1m"), { message: "CROSSSLOT Keys in request don't hash to the same slot" });

        // The stores: each limited key in its own slot, its counter (and block) under a hash tag.
        const store = new TallyStore({ client, prefix: `rl:${run}:` });
        store.init({ windowMs: 60_000, limit: 2 });
        const limiter = new RateLimiterTally({ storeClient: client, points: 2, duration: 60, blockDuration: 30, keyPrefix: `rlf:${run}` });
        for (let i = 0; i < 12; i++) {
          const who = `user${i}`;
          const hits = [];
          for (let j = 0; j < 3; j++) hits.push((await store.increment(who)).totalHits);
          assert.deepEqual(hits, [1, 2, 3]);
          assert.equal((await limiter.consume(who)).remainingPoints, 1);
          assert.equal((await limiter.consume(who)).remainingPoints, 0);
          await assert.rejects(limiter.consume(who), (r) => r.msBeforeNext === 30_000);
          assert.ok((await limiter.get(who)).msBeforeNext <= 30_000);
          assert.equal(await limiter.delete(who), true);
        }
        // Every command went straight to its key's primary.
        assert.equal(await moved(), movedBefore);
        if (kind.kind === "ioredis") {
          // Plain ioredis sends a module command to any primary, which answers MOVED.
          for (const k of counters) await client.call("TSCOUNTER.INCR", k);
          assert.ok((await moved()) > movedBefore);
        }
      } finally {
        await close(client);
      }
    });
  }
});
