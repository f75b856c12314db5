// Server cost and memory of the rate-limit stores: TallyStore against rate-limit-redis's
// RedisStore (express-rate-limit), RateLimiterTally against RateLimiterRedis
// (rate-limiter-flexible), on one Redis server with the module loaded.
//
//   npm ci && npm run build && node bench/stores.mjs
//
// Env: TALLY_MODULE (default ../../target/release/libtally.so), BENCH_SERVER (default
// redis-server on PATH: Debian's 7.0), BENCH_KEYS (1000), BENCH_HITS (5 per key).
// For each store: CONFIG RESETSTAT, BENCH_KEYS x BENCH_HITS allowed hits (keys interleaved,
// 50 in flight), then INFO commandstats: the server's usec over every command the store
// sent (a Lua script's time includes the commands it calls), per allowed hit, and the
// commands sent per hit; then MEMORY USAGE of every key the
// store created, per limited key. Tally's counter is also measured with its hits spread
// over all 50 slots of its window (the most it ever stores).
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import net from "node:net";
import { fileURLToPath } from "node:url";
import { createClient } from "redis";
import { Redis } from "ioredis";
import { RedisStore } from "rate-limit-redis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { TallyStore } from "../dist/esm/express-rate-limit.js";
import { RateLimiterTally } from "../dist/esm/rate-limiter-flexible.js";
import { Tally } from "../dist/esm/index.js";

const MODULE = process.env.TALLY_MODULE ?? fileURLToPath(new URL("../../../target/release/libtally.so", import.meta.url));
const SERVER = process.env.BENCH_SERVER ?? "redis-server";
const KEYS = Number(process.env.BENCH_KEYS ?? 1000);
const HITS = Number(process.env.BENCH_HITS ?? 5);
const WINDOW_S = 60;
const LIMIT = 100;

async function freePort() {
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

const port = await freePort();
const dir = mkdtempSync(path.join(os.tmpdir(), "tally-bench-"));
if (!existsSync(MODULE)) throw new Error(`no module at ${MODULE} (make build)`);
const proc = spawn(SERVER, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--loadmodule", MODULE], { stdio: "ignore" });
const nodeRedis = createClient({ url: `redis://127.0.0.1:${port}` });
for (let i = 0; ; i++) {
  try { await nodeRedis.connect(); break; } catch (e) { if (i > 100) throw e; await new Promise((r) => setTimeout(r, 50)); }
}
const ioredis = new Redis({ port, host: "127.0.0.1" });

async function commandstats() {
  const info = String(await nodeRedis.sendCommand(["INFO", "commandstats"]));
  const out = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) out[m[1]] = { calls: Number(m[2]), usec: Number(m[3]) };
  return out;
}

async function keysMemory(pattern) {
  let cursor = "0", total = 0, count = 0;
  do {
    const [next, keys] = await nodeRedis.sendCommand(["SCAN", cursor, "MATCH", pattern, "COUNT", "1000"]);
    cursor = String(next);
    for (const k of keys) { total += Number(await nodeRedis.sendCommand(["MEMORY", "USAGE", k, "SAMPLES", "0"])); count++; }
  } while (cursor !== "0");
  return { total, count };
}

/** Runs KEYS x HITS allowed hits through `hit(key)`, 50 in flight; the server's cost. */
async function measure(label, pattern, hit) {
  await nodeRedis.sendCommand(["CONFIG", "RESETSTAT"]);
  const jobs = [];
  for (let h = 0; h < HITS; h++) for (let k = 0; k < KEYS; k++) jobs.push(`k${k}`);
  let next = 0;
  const worker = async () => { while (next < jobs.length) await hit(jobs[next++]); };
  await Promise.all(Array.from({ length: 50 }, worker));
  const stats = await commandstats();
  delete stats["config|resetstat"]; delete stats.config; delete stats.info;
  // A script's usec includes the commands it calls, which commandstats also lists on their
  // own: with a script in the run, only the scripts' lines count (they are all the store sends).
  const scripted = Object.keys(stats).some((n) => /^(eval|evalsha|fcall)$/.test(n));
  let usec = 0, calls = 0;
  for (const [n, s] of Object.entries(stats)) {
    if (n === "hello" || (scripted && !/^(eval|evalsha|fcall|script)/.test(n))) continue;
    usec += s.usec; calls += s.calls;
  }
  const hits = KEYS * HITS;
  const mem = await keysMemory(pattern);
  const row = {
    store: label,
    commands: Object.entries(stats).map(([n, s]) => `${n} ${(s.usec / s.calls).toFixed(2)}us x${s.calls}`).join(", "),
    usecPerHit: (usec / hits).toFixed(2),
    commandsPerHit: (calls / hits).toFixed(2),
    bytesPerKey: Math.round(mem.total / mem.count),
    keysPerLimitedKey: (mem.count / KEYS).toFixed(0),
  };
  console.log(JSON.stringify(row));
  return row;
}

const rows = [];
const tally = new TallyStore({ client: nodeRedis, prefix: "tally-erl:" });
tally.init({ windowMs: WINDOW_S * 1000, limit: LIMIT });
rows.push(await measure("TallyStore (tally-redis)", "tally-erl:*", async (k) => {
  if ((await tally.increment(k)).totalHits > LIMIT) throw new Error("refused");
}));
const redisStore = new RedisStore({ sendCommand: (...args) => nodeRedis.sendCommand(args), prefix: "rlr:" });
redisStore.init({ windowMs: WINDOW_S * 1000, limit: LIMIT });
await new Promise((r) => setTimeout(r, 200)); // its SCRIPT LOAD
rows.push(await measure("RedisStore (rate-limit-redis 6)", "rlr:*", async (k) => {
  if ((await redisStore.increment(k)).totalHits > LIMIT) throw new Error("refused");
}));
const rlt = new RateLimiterTally({ storeClient: ioredis, points: LIMIT, duration: WINDOW_S, keyPrefix: "tally-rlf" });
rows.push(await measure("RateLimiterTally (tally-redis)", "tally-rlf:*", (k) => rlt.consume(k)));
const rlr = new RateLimiterRedis({ storeClient: ioredis, points: LIMIT, duration: WINDOW_S, keyPrefix: "rlflx" });
rows.push(await measure("RateLimiterRedis (rate-limiter-flexible 11)", "rlflx:*", (k) => rlr.consume(k)));

// Steady traffic: the tally counters already hold a hit in 48 earlier slots of their
// window (the shape a key has under steady traffic: about all its window's 50 slots counted).
const slot = (WINDOW_S * 1000) / 50;
async function prefill(counterOf) {
  for (let k = 0; k < KEYS; k++) {
    const key = counterOf(`k${k}`);
    const now = Date.now(); // the server runs on this machine's clock
    await nodeRedis.sendCommand(["TSCOUNTER.CREATE", key, "RESOLUTIONS", `${slot}:50`]);
    // Slots 1 to 48 before now's (the 49th may have left by the time the write arrives).
    await Promise.all(Array.from({ length: 48 }, (_, s) =>
      nodeRedis.sendCommand(["TSCOUNTER.INCRBY", key, "1", "AT", String(now - (s + 1) * slot)])));
  }
}
const tally2 = new TallyStore({ client: nodeRedis, prefix: "tally-erl2:" });
tally2.init({ windowMs: WINDOW_S * 1000, limit: LIMIT });
await prefill((k) => tally2.prefixKey(k));
rows.push(await measure("TallyStore, 50 slots held", "tally-erl2:*", async (k) => {
  if ((await tally2.increment(k)).totalHits > LIMIT) throw new Error("refused");
}));
const rlt2 = new RateLimiterTally({ storeClient: ioredis, points: LIMIT, duration: WINDOW_S, keyPrefix: "tally-rlf2" });
await prefill((k) => rlt2.counterKey(k));
rows.push(await measure("RateLimiterTally, 50 slots held", "tally-rlf2:*", (k) => rlt2.consume(k)));

// A tally counter at its largest: a hit in each of the 50 slots of its window.
let full = 0, fullSlots = 0;
for (let k = 0; k < 100; k++) {
  const key = `tally-full:{${k}}`;
  await nodeRedis.sendCommand(["TSCOUNTER.CREATE", key, "RESOLUTIONS", `${slot}:50`]);
  for (let s = 0; s < 50; s++) {
    await nodeRedis.sendCommand(["TSCOUNTER.INCRBY", key, "1", "AT", String(Date.now() - s * slot)]).catch(() => {});
  }
  full += Number(await nodeRedis.sendCommand(["MEMORY", "USAGE", key, "SAMPLES", "0"]));
  fullSlots += Number(await new Tally(nodeRedis).counter(key).info().then((i) => i.slots));
}
console.log(JSON.stringify({ tallyCounterFullBytes: Math.round(full / 100), slotsHeld: fullSlots / 100 }));
const version = String(await nodeRedis.sendCommand(["INFO", "server"])).match(/redis_version:(\S+)/)[1];
console.log(JSON.stringify({ date: new Date().toISOString(), server: `redis ${version}`, keys: KEYS, hitsPerKey: HITS, cpus: os.cpus().length, load: os.loadavg() }));

await nodeRedis.close();
ioredis.disconnect();
proc.kill("SIGTERM");
await new Promise((r) => proc.once("exit", r));
rmSync(dir, { recursive: true, force: true });
