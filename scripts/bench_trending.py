#!/usr/bin/env python3
"""Trending accuracy and cost: TSRANK boards with CAPACITY against an exact board and
RedisBloom's TOPK of the same memory, on one server (run by scripts/bench_trending.sh).

A Zipf stream (exponent s) of N increments of 1 over D distinct members is written in
order into the 60 one-minute slots of a one-hour window (slot j gets the j-th 60th of the
stream, `AT` its slot), as INCRBY commands of 100 pairs. Each structure gets the same
stream; the truth is counted here. Figures per structure:

* recall and precision of the true top 100 (TOP 100 / TOPK.LIST);
* the largest |estimate - true| over the true top 100, relative to N and to the member's
  true total (estimates from TSRANK.MSCORE / TOPK.COUNT);
* bytes: MEMORY USAGE summed over the structure's keys;
* server time per increment: usec of the write command in INFO commandstats over the
  increments written.

stdlib only: a small RESP2 client over a socket, pipelined.
"""

import argparse
import bisect
import itertools
import random
import socket
import sys
import time

PAIRS_PER_COMMAND = 100
SLOTS = 60
MINUTE = 60_000
TOP = 100


class Resp:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError(f"unexpected reply {line!r}")

    def call(self, *args):
        self.sock.sendall(self.encode(args))
        return self.read()

    def _read_tolerant(self):
        # A slot that left the window while its writes were in flight: its increments are
        # refused, and it is left out of the truth too (only live slots are compared).
        try:
            self.read()
        except RuntimeError as e:
            if "outside the kept range" not in str(e):
                raise

    def pipeline(self, commands, window=200):
        """Sends `commands`, at most `window` in flight (errors raise, but for a slot that
        left the window meanwhile)."""
        pending = 0
        batch = []
        for cmd in commands:
            batch.append(self.encode(cmd))
            if len(batch) >= window:
                self.sock.sendall(b"".join(batch))
                pending += len(batch)
                batch = []
                while pending > window:
                    self._read_tolerant()
                    pending -= 1
        if batch:
            self.sock.sendall(b"".join(batch))
            pending += len(batch)
        for _ in range(pending):
            self._read_tolerant()


def zipf_stream(n, distinct, s, seed):
    rng = random.Random(seed)
    weights = itertools.accumulate(1.0 / (i ** s) for i in range(1, distinct + 1))
    cum = list(weights)
    total = cum[-1]
    stream = [bisect.bisect_left(cum, rng.random() * total) for _ in range(n)]
    return stream


def commandstat(r, name):
    info = r.call("INFO", "commandstats").decode()
    for line in info.splitlines():
        if line.startswith(f"cmdstat_{name}:"):
            fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
            return float(fields["usec"]), int(fields["calls"])
    return 0.0, 0


def bytes_of(r, pattern):
    total, cursor = 0, b"0"
    while True:
        cursor, keys = r.call("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
        for k in keys:
            total += r.call("MEMORY", "USAGE", k, "SAMPLES", 0) or 0
        if cursor == b"0":
            return total


def write_slots(r, stream, command, slot_of_at, windowed):
    """Writes the stream slot by slot (in order) with `command(pairs, at)`; with
    `windowed`, a slot that has already left the window is skipped."""
    per = len(stream) // SLOTS
    for j in range(SLOTS):
        part = stream[j * per:(j + 1) * per] if j < SLOTS - 1 else stream[j * per:]
        at = slot_of_at(j)
        if windowed:
            now = int(r.call("TIME")[0]) * 1000
            if at < (now // MINUTE - (SLOTS - 1)) * MINUTE:
                continue
        cmds = []
        for c in range(0, len(part), PAIRS_PER_COMMAND):
            cmds.append(command(part[c:c + PAIRS_PER_COMMAND], at))
        r.pipeline(cmds)


def true_top(truth):
    """The true top 100, ties at the 100th by member number (the benchmark's own order)."""
    return [m for m, _ in sorted(truth.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]]


def evaluate(truth, n, listed, estimates):
    """Recall and precision of the true top 100 (a listed member counts when its true
    total reaches the 100th true total, so ties at the boundary count either way), and the
    largest error over the true top 100, relative to N and to the member's true total."""
    top = true_top(truth)
    threshold = truth[top[-1]] if top else 0
    listed = listed[:TOP]
    hits = sum(1 for m in listed if truth.get(m, 0) >= threshold)
    recall = min(1.0, hits / len(top)) if top else 1.0
    precision = hits / len(listed) if listed else 0.0
    worst_abs, worst_rel = 0, 0.0
    for m, est in zip(top, estimates):
        err = abs((est or 0) - truth[m])
        worst_abs = max(worst_abs, err)
        worst_rel = max(worst_rel, err / truth[m])
    return recall, precision, worst_abs / n, worst_rel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--increments", type=int, default=1_000_000)
    ap.add_argument("--members", default="100000,1000000")
    ap.add_argument("--exponents", default="1.0,1.3")
    ap.add_argument("--capacities", default="1000,10000")
    ap.add_argument("--exact-max", type=int, default=2_000_000,
                    help="run the exact board only up to this many increments")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    r = Resp(a.port)
    rows = []
    for distinct in [int(x) for x in a.members.split(",")]:
        for s in [float(x) for x in a.exponents.split(",")]:
            t = time.time()
            stream = zipf_stream(a.increments, distinct, s, a.seed)
            names = [b"m%d" % i for i in range(distinct)]
            print(f"# stream s={s} D={distinct} N={a.increments} ({time.time() - t:.0f} s)",
                  file=sys.stderr)
            boards = [("tally exact", 0)] if a.increments <= a.exact_max else []
            boards += [(f"tally k={k}", k) for k in [int(x) for x in a.capacities.split(",")]]
            tally_bytes = {}
            for label, k in boards:
                r.call("FLUSHALL")
                r.call("CONFIG", "RESETSTAT")
                now = int(r.call("TIME")[0]) * 1000
                first = (now // MINUTE - (SLOTS - 1)) * MINUTE
                create = ["TSRANK.CREATE", "tr", "WINDOW", "1h", "SLOT", "1m"]
                if k:
                    create += ["CAPACITY", k]
                r.call(*create)
                started = time.time()
                write_slots(
                    r, stream,
                    lambda part, at: ["TSRANK.INCRBY", "tr"]
                    + [x for i in part for x in (1, names[i])] + ["AT", at],
                    lambda j: first + j * MINUTE, True)
                wall = time.time() - started
                usec, _ = commandstat(r, "tsrank.incrby")
                # The window of the moment: slots that left it during the run are not
                # counted by the board, nor here.
                now = int(r.call("TIME")[0]) * 1000
                live_from = (now // MINUTE - (SLOTS - 1)) * MINUTE
                per = len(stream) // SLOTS
                truth = {}
                n = 0
                for j in range(SLOTS):
                    if first + j * MINUTE < live_from:
                        continue
                    part = stream[j * per:(j + 1) * per] if j < SLOTS - 1 else stream[j * per:]
                    for i in part:
                        truth[i] = truth.get(i, 0) + 1
                    n += len(part)
                listed = [int(m[1:]) for m in r.call("TSRANK.TOP", "tr", TOP)]
                scores = r.call("TSRANK.MSCORE", "tr", *[names[m] for m in true_top(truth)])
                est = [int(x) if x is not None else 0 for x in scores]
                info = r.call("TSRANK.INFO", "tr")
                fields = dict(zip(info[0::2], info[1::2]))
                error = fields.get(b"error", 0)
                size = bytes_of(r, "tr*")
                tally_bytes[k] = size
                recall, precision, rel_n, rel_true = evaluate(truth, n, listed, est)
                rows.append((s, distinct, label, recall, precision, rel_n, rel_true, size,
                             usec / a.increments, error / n if n else 0.0, wall))
                print(rows[-1], file=sys.stderr)
            for k in [int(x) for x in a.capacities.split(",")]:
                target = tally_bytes.get(k)
                if not target:
                    continue
                r.call("FLUSHALL")
                # TOPK of the same memory: width chosen from a probe's MEMORY USAGE.
                depth = 7
                r.call("TOPK.RESERVE", "probe", TOP, 1000, depth, "0.9")
                probe = r.call("MEMORY", "USAGE", "probe", "SAMPLES", 0)
                per_cell = max(1.0, (probe - 0) / (1000 * depth))
                width = max(8, int(target / (per_cell * depth)))
                r.call("DEL", "probe")
                r.call("TOPK.RESERVE", "tk", TOP, width, depth, "0.9")
                r.call("CONFIG", "RESETSTAT")
                started = time.time()
                write_slots(
                    r, stream,
                    lambda part, at: ["TOPK.INCRBY", "tk"] + [x for i in part for x in (names[i], 1)],
                    lambda j: 0, False)
                wall = time.time() - started
                usec, _ = commandstat(r, "topk.incrby")
                truth = {}
                for i in stream:
                    truth[i] = truth.get(i, 0) + 1
                reply = r.call("TOPK.LIST", "tk")
                listed = [int(m[1:]) for m in reply if m is not None]
                counts = r.call("TOPK.COUNT", "tk", *[names[m] for m in true_top(truth)])
                size = r.call("MEMORY", "USAGE", "tk", "SAMPLES", 0)
                recall, precision, rel_n, rel_true = evaluate(truth, len(stream), listed, counts)
                rows.append((s, distinct, f"TOPK w={width} d={depth} (as k={k})", recall,
                             precision, rel_n, rel_true, size, usec / a.increments, None, wall))
                print(rows[-1], file=sys.stderr)
    r.call("FLUSHALL")
    print(f"| Zipf s | distinct | structure | recall@{TOP} | precision@{TOP} "
          f"| max err / N | max err / true | bytes | server us / incr | error / N |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s, d, label, rec, prec, rel_n, rel_true, size, us, err, _ in rows:
        err_text = "-" if err is None else f"{err:.2e}"
        print(f"| {s} | {d:,} | {label} | {rec:.2f} | {prec:.2f} | {rel_n:.2e} | "
              f"{rel_true:.3f} | {size:,} | {us:.2f} | {err_text} |")


if __name__ == "__main__":
    main()
