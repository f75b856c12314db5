/**
 * The one layer that talks to a Redis client. `connect(client)` tells a node-redis
 * client (`createClient`, `createCluster`) from an ioredis one (`Redis`, `Cluster`) by
 * their methods and answers a `Connection` that sends one command with its key first.
 *
 * The parsers below accept every shape the two clients give for tally's replies:
 * RESP2 (maps as flat arrays, doubles as strings) and RESP3 (maps as objects or `Map`s,
 * doubles as numbers).
 */

/** A command argument as both clients take it. */
export type Arg = string | number | Buffer;

export interface Connection {
  /** Sends `[name, ...args]`; `key` is the first key (cluster routing). */
  send(args: Arg[], key: string | Buffer | undefined, readonly: boolean): Promise<unknown>;
  /** Commands on one key sent without waiting arrive in the order sent. */
  ordered: boolean;
}

/** A duration: milliseconds, or a tally duration text like `"5s"`, `"24h"`. */
export type Duration = number | string;
/** A timestamp: Unix milliseconds, or a `Date`. */
export type Timestamp = number | Date;

function text(arg: Arg): string | Buffer {
  return typeof arg === "number" ? String(arg) : arg;
}

/** The `Connection` of a node-redis or ioredis client, told apart by their methods. */
export function connect(client: unknown): Connection {
  const c = client as Record<string, unknown> | null;
  if (c && typeof c.call === "function") {
    // ioredis (Redis and Cluster): call(name, ...args). ioredis has a sendCommand too, so
    // call is tested first.
    const call = c.call as (...a: unknown[]) => Promise<unknown>;
    if (c.isCluster === true) return ioredisCluster(c, call);
    return { send: (args) => call.call(c, ...args.map(text)), ordered: true };
  }
  if (c && typeof c.sendCommand === "function") {
    // node-redis: a cluster's sendCommand takes (firstKey, isReadonly, args).
    const cluster = typeof c.getSlotRandomNode === "function" || "masters" in c;
    const send = c.sendCommand as (...a: unknown[]) => Promise<unknown>;
    if (cluster) {
      return { send: (args, key, readonly) => send.call(c, key, readonly, args.map(text)), ordered: true };
    }
    return { send: (args) => send.call(c, args.map(text)), ordered: true };
  }
  throw new TypeError("tally-redis: expected a node-redis client (sendCommand) or an ioredis client (call)");
}

/**
 * An ioredis `Cluster` does not know a module command's keys, so on its own it sends the
 * command to any primary and follows the `MOVED` answer: two hops for most commands. Here
 * `call` runs on a view of the cluster whose `sendCommand` names the key's slot, which
 * ioredis's `Cluster.sendCommand(command, stream, node)` then routes to. With ioredis's
 * auto-pipelining on (which batches through the client object itself), commands go the
 * plain way.
 */
function ioredisCluster(c: Record<string, unknown>, call: (...a: unknown[]) => Promise<unknown>): Connection {
  const sendCommand = c.sendCommand as (command: unknown, stream?: unknown, node?: unknown) => unknown;
  const options = c.options as { enableAutoPipelining?: boolean } | undefined;
  return {
    send(args, key) {
      if (key === undefined || options?.enableAutoPipelining) return call.call(c, ...args.map(text));
      const slot = keySlot(key);
      const view = Object.create(c, {
        sendCommand: { value: (command: unknown, stream?: unknown) => sendCommand.call(c, command, stream, { slot }) },
      });
      return call.call(view, ...args.map(text));
    },
    ordered: !options?.enableAutoPipelining,
  };
}

/** The Redis Cluster hash slot of a key: CRC16 (XMODEM) of its hash tag or whole name, mod 16384. */
export function keySlot(key: string | Buffer): number {
  let bytes = Buffer.isBuffer(key) ? key : Buffer.from(key);
  const open = bytes.indexOf(0x7b); // {
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1); // }
    if (close > open + 1) bytes = bytes.subarray(open + 1, close);
  }
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}

// ---------------------------------------------------------------- arguments ----

/**
 * TSTHROTTLE.ALLOW's period: a duration with its unit (milliseconds are sent as `<n>ms`),
 * since the server refuses a bare number there.
 */
export function period(value: Duration): Arg {
  const d = duration(value);
  return typeof d === "number" ? `${d}ms` : d;
}

export function duration(value: Duration): Arg {
  if (typeof value === "number") {
    if (!Number.isInteger(value)) throw new TypeError(`a duration is an integer of ms or a text like "5s", not ${value}`);
    return value;
  }
  if (typeof value === "string") return value;
  throw new TypeError(`a duration is an integer of ms or a text like "5s", not ${String(value)}`);
}

export function timestamp(value: Timestamp): number {
  if (value instanceof Date) return value.getTime();
  if (typeof value === "number" && Number.isInteger(value)) return value;
  throw new TypeError(`a timestamp is an integer of Unix ms or a Date, not ${String(value)}`);
}

export function integer(value: number): number {
  if (typeof value !== "number" || !Number.isInteger(value)) throw new TypeError(`expected an integer, not ${String(value)}`);
  return value;
}

export function at(value: Timestamp | undefined): Arg[] {
  return value === undefined ? [] : ["AT", timestamp(value)];
}

export function window(value: Duration | undefined): Arg[] {
  return value === undefined ? [] : ["WINDOW", duration(value)];
}

// ------------------------------------------------------------------ replies ----

export function str(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString() : String(value);
}

export function num(value: unknown): number {
  return typeof value === "number" ? value : Number(str(value));
}

export function optionalNum(value: unknown): number | null {
  return value === null || value === undefined ? null : num(value);
}

export function nums(value: unknown): number[] {
  return Array.isArray(value) ? value.map(num) : [num(value)];
}

export function numPairs(value: unknown): [number, number][] {
  return (value as unknown[][]).map(([a, b]) => [num(a), num(b)]);
}

/** `[a, b]` pairs, nested (RESP3) or flat (RESP2). */
export function pairs(value: unknown): [unknown, unknown][] {
  const items = value as unknown[];
  if (items.length > 0 && Array.isArray(items[0])) return items.map((p) => [(p as unknown[])[0], (p as unknown[])[1]]);
  const out: [unknown, unknown][] = [];
  for (let i = 0; i + 1 < items.length; i += 2) out.push([items[i], items[i + 1]]);
  return out;
}

/** A map reply (object or `Map` in RESP3, flat array in RESP2) with string field names. */
export function mapping(value: unknown): Record<string, unknown> | null {
  if (value === null || value === undefined) return null;
  let entries: [unknown, unknown][];
  if (value instanceof Map) entries = [...value.entries()];
  else if (Array.isArray(value)) entries = pairs(value);
  else entries = Object.entries(value as object);
  const out: Record<string, unknown> = {};
  for (const [k, v] of entries) out[str(k)] = v;
  return out;
}
