// Real servers with the module for the tests. TALLY_MODULE is the module to load,
// TALLY_SERVERS the servers as `name=path,name=path` (both set by `make node-test`).
// Each test file starts each server kind once, on a free port, in its own directory;
// every test uses keys of its own.
import { spawn, execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, readFileSync, openSync, closeSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { createClient, createCluster, RESP_TYPES } from "redis";
import { Redis, Cluster } from "ioredis";

export const MODULE = process.env.TALLY_MODULE ?? fileURLToPath(new URL("../../../target/release/libtally.so", import.meta.url));

export function serverKinds() {
  const spec = process.env.TALLY_SERVERS || "redis=/usr/bin/redis-server";
  return spec.split(",").map((s) => s.trim()).filter(Boolean).map((item) => {
    const at = item.indexOf("=");
    return [item.slice(0, at), item.slice(at + 1)];
  });
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Sleeps until Date.now() >= when. */
export async function sleepUntil(when) {
  while (Date.now() < when) await sleep(Math.max(1, when - Date.now()));
}

function portFree(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

export async function freePort() {
  const srv = net.createServer();
  await new Promise((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const { port } = srv.address();
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

/** A free port whose cluster bus port (+10000) is free too. */
export async function clusterPort() {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 20000);
    if ((await portFree(port)) && (await portFree(port + 10000))) return port;
  }
}

function ping(port) {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    let data = "";
    const done = (ok) => { socket.destroy(); resolve(ok); };
    socket.setTimeout(1000, () => done(false));
    socket.on("error", () => done(false));
    socket.on("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => { data += chunk; if (data.includes("\r\n")) done(data.startsWith("+PONG")); });
  });
}

/** One `redis-server --loadmodule` on a free port. */
export class Server {
  static async start(name, binary, args = [], port) {
    if (!existsSync(binary)) throw new Error(`no server binary ${binary} for ${name}`);
    if (!existsSync(MODULE)) throw new Error(`no module at ${MODULE} (make build)`);
    const srv = new Server();
    srv.name = name;
    srv.port = port ?? (await freePort());
    srv.dir = mkdtempSync(path.join(os.tmpdir(), `tally-node-${name}-`));
    const log = openSync(path.join(srv.dir, "server.log"), "w");
    srv.proc = spawn(binary, ["--port", String(srv.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
      "--dir", srv.dir, "--loadmodule", MODULE, ...args], { stdio: ["ignore", log, log] });
    closeSync(log);
    srv.exited = false;
    srv.proc.once("exit", () => { srv.exited = true; });
    const deadline = Date.now() + 15000;
    while (Date.now() < deadline && !srv.exited) {
      if (await ping(srv.port)) return srv;
      await sleep(50);
    }
    const log2 = srv.log();
    await srv.stop();
    throw new Error(`${name} did not start:\n${log2}`);
  }

  log() {
    try { return readFileSync(path.join(this.dir, "server.log"), "utf8"); } catch { return ""; }
  }

  /** Stops the server; throws if it had died during the tests. */
  async stop() {
    const died = this.exited;
    const log = died ? this.log() : "";
    if (!this.exited) {
      const gone = new Promise((resolve) => this.proc.once("exit", resolve));
      this.proc.kill("SIGTERM");
      const timer = setTimeout(() => this.proc.kill("SIGKILL"), 10000);
      await gone;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
    if (died) throw new Error(`${this.name} died during the tests:\n${log}`);
  }
}

/** The client kinds every test runs with: node-redis and ioredis, RESP2 and RESP3. */
export const CLIENTS = [
  { name: "node-redis resp2", kind: "node-redis", resp: 2 },
  { name: "node-redis resp3", kind: "node-redis", resp: 3 },
  { name: "ioredis resp2", kind: "ioredis", resp: 2 },
  { name: "ioredis resp3", kind: "ioredis", resp: 3 },
];

/** One more reply shape for the helpers' parsers: RESP3 maps as `Map`s (node-redis's
 * typeMapping). (ioredis's replyMapping "resp3" is left out: its double decoder answers
 * 0.7500000000000001 for the server's 0.75; see the README.) */
export const SHAPES = [
  { name: "node-redis resp3 maps as Map", kind: "node-redis", resp: 3, typeMapping: { [RESP_TYPES.MAP]: Map } },
];

/** A connected client of `kind` on `port`; `close(client)` ends it. */
export async function connect(kind, port) {
  if (kind.kind === "node-redis") {
    let client = createClient({ url: `redis://127.0.0.1:${port}`, RESP: kind.resp });
    if (kind.typeMapping) client = client.withTypeMapping(kind.typeMapping);
    client.on("error", () => {});
    await client.connect();
    return client;
  }
  const client = new Redis({ port, host: "127.0.0.1", protocol: kind.resp, lazyConnect: true, maxRetriesPerRequest: 1,
    ...(kind.replyMapping ? { replyMapping: kind.replyMapping } : {}) });
  await client.connect();
  return client;
}

export async function close(client) {
  if (client instanceof Redis || client instanceof Cluster) client.disconnect();
  else await client.close();
}

/** Cluster clients of the three kinds the package supports. */
export async function connectCluster(kind, port) {
  if (kind.kind === "node-redis") {
    const client = createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${port}` }], RESP: kind.resp });
    client.on("error", () => {});
    await client.connect();
    return client;
  }
  const client = new Cluster([{ host: "127.0.0.1", port }], { lazyConnect: true, redisOptions: { protocol: kind.resp } });
  await client.connect();
  return client;
}

/** Fresh key names: `key("c")` -> `test:<random>:c`. */
export function keys() {
  const run = randomBytes(6).toString("hex");
  return (name = "k") => `test:${run}:${name}`;
}

export const execFileP = promisify(execFile);
