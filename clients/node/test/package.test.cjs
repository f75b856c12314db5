// The packed package as a CommonJS user requires it (and its ESM twin and type
// declarations are in the tarball): every entry point loads and works.
const { after, before, test } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");

const { Tally, Counter } = require("tally-redis");
const { TallyStore } = require("tally-redis/express-rate-limit");
const { RateLimiterTally } = require("tally-redis/rate-limiter-flexible");
const { RateLimiterRes } = require("rate-limiter-flexible");

let harness, server, client;
before(async () => {
  harness = await import("./harness.mjs");
  const [name, binary] = harness.serverKinds()[0];
  server = await harness.Server.start(name, binary);
  client = await harness.connect(harness.CLIENTS[0], server.port);
});
after(async () => {
  await harness.close(client);
  await server.stop();
});

test("require() gives the CommonJS build with its declarations", () => {
  const root = path.dirname(require.resolve("tally-redis/package.json"));
  assert.equal(require.resolve("tally-redis"), path.join(root, "dist/cjs/index.js"));
  for (const name of ["index", "express-rate-limit", "rate-limiter-flexible"]) {
    for (const build of ["cjs", "esm"]) assert.ok(fs.existsSync(path.join(root, `dist/${build}/${name}.d.ts`)), `${build}/${name}.d.ts`);
  }
  assert.equal(typeof Tally, "function");
  assert.ok(new Tally(client).counter("x") instanceof Counter);
});

test("import() of the same package gives the ESM build", async () => {
  const esm = await import("tally-redis");
  assert.notEqual(esm.Tally, Tally);
  assert.equal(typeof esm.Tally, "function");
  assert.equal(typeof (await import("tally-redis/express-rate-limit")).TallyStore, "function");
  assert.equal(typeof (await import("tally-redis/rate-limiter-flexible")).RateLimiterTally, "function");
});

test("the CommonJS build works end to end", async () => {
  const key = `cjs:${Date.now()}:${Math.random()}`;
  const t = new Tally(client);
  assert.equal(await t.counter(key).incrby(2), 2);
  const store = new TallyStore({ client, prefix: `${key}:store:` });
  store.init({ windowMs: 60_000, limit: 5 });
  assert.equal((await store.increment("a")).totalHits, 1);
  const limiter = new RateLimiterTally({ storeClient: client, points: 1, duration: 60, keyPrefix: key });
  assert.ok((await limiter.consume("a")) instanceof RateLimiterRes);
  await assert.rejects(limiter.consume("a"), (res) => res instanceof RateLimiterRes && res.remainingPoints === 0);
});
