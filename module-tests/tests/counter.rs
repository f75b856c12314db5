//! Integration tests of the TSCOUNTER family against real servers (every `server_kinds()`).
//!
//! * a model-based random workload (pipelined INCRBY/INCR with `AT`, SUM and RANGE reads)
//!   compared with a small reference model written here, for several resolution sets;
//! * every error of the contract with its exact text, and "nothing written on error";
//! * behaviour: auto-create from the config, module arguments, missing keys, zero slots,
//!   trimming on write and by the timer, command info, hash layout, RESP2/RESP3 shapes,
//!   binary and empty key names.
//!
//! Determinism: the server's clock moves while a test runs. Tests read the server's `TIME`
//! once (`t0`) and use `AT` timestamps that are classified the same way (kept / not kept)
//! for every server time in `t0 .. t0 + MARGIN_MS`; each batch checks that the server is
//! still inside that margin, so a result can never depend on wall-clock luck.

use module_tests::*;
use std::collections::BTreeMap;
use std::time::Duration;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const OUTSIDE: &str = "ERR timestamp is outside the kept range";
const FUTURE: &str = "ERR timestamp is too far in the future";
const DEFAULT_RES: &str = "1s:120 5s:120 1m:120 5m:120 1h:120 5h:120 1d:120";

/// How long (server time) a model batch may take before its classification of timestamps
/// could change. Every batch asserts it stayed inside.
const MARGIN_MS: i64 = 20_000;

// ================================================================= helpers

fn args<S: AsRef<[u8]>>(items: &[S]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_ref().to_vec()).collect()
}

/// `DUMP key` (nil for a missing key): byte-exact state of one key.
fn dump(srv: &Server, key: &[u8]) -> Value {
    srv.cmd_value(&[&b"DUMP"[..], key])
}

fn v_ints(items: &[i64]) -> Value {
    v_arr(items.iter().map(|&i| v_int(i)).collect())
}

fn v_pairs(items: &[(i64, i64)]) -> Value {
    v_arr(
        items
            .iter()
            .map(|&(a, b)| v_arr(vec![v_int(a), v_int(b)]))
            .collect(),
    )
}

/// Runs `cmd` (which must fail with `err`) and checks the key at `key` is byte-for-byte
/// unchanged (or still missing).
#[track_caller]
fn assert_refused<S: AsRef<[u8]>>(srv: &Server, key: &[u8], cmd: &[S], err: &str) {
    let before = dump(srv, key);
    let got = srv.cmd_value(cmd);
    let shown: Vec<String> = cmd
        .iter()
        .map(|a| String::from_utf8_lossy(a.as_ref()).into_owned())
        .collect();
    assert_eq!(got, v_err(err), "{}: {shown:?}", srv.kind().name);
    assert_eq!(
        dump(srv, key),
        before,
        "{}: {shown:?} changed the key",
        srv.kind().name
    );
}

// ========================================================= reference model

#[derive(Clone, Copy, Debug)]
struct Res {
    ms: i64,
    samples: i64,
}

impl Res {
    fn span(&self) -> i64 {
        self.ms * self.samples
    }
}

const UNITS: [(&str, i64); 6] = [
    ("w", 604_800_000),
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// Test-side parser of `res:samples` lists, finest first.
fn res_list(text: &str) -> Vec<Res> {
    let mut out: Vec<Res> = text
        .split_whitespace()
        .map(|tok| {
            let (d, n) = tok.split_once(':').unwrap();
            let (digits, unit) = UNITS
                .iter()
                .rev()
                .find_map(|(u, ms)| {
                    d.strip_suffix(u)
                        .filter(|x| x.bytes().all(|b| b.is_ascii_digit()))
                        .map(|x| (x, *ms))
                })
                .unwrap_or((d, 1));
            Res {
                ms: digits.parse::<i64>().unwrap() * unit,
                samples: n.parse().unwrap(),
            }
        })
        .collect();
    out.sort_by_key(|r| r.ms);
    out
}

/// Canonical label of a duration (largest unit that divides it), as used in field names.
fn label(ms: i64) -> String {
    for (u, unit) in UNITS {
        if unit > 1 && ms % unit == 0 {
            return format!("{}{u}", ms / unit);
        }
    }
    format!("{ms}ms")
}

fn slot(t: i64, ms: i64) -> i64 {
    t.div_euclid(ms)
}

fn first_kept(now: i64, r: &Res) -> i64 {
    slot(now, r.ms) - r.samples + 1
}

/// The contract, as a model: per resolution an increment lands in slot floor(ts/res) iff
/// that slot is kept at write time; a read counts only slots kept at read time.
/// Timestamps are only generated where "kept" is the same for every server time in
/// `t0 .. t0 + MARGIN_MS`, so `kept` can be evaluated at `t0`.
struct Model {
    rs: Vec<Res>,
    t0: i64,
    counts: BTreeMap<(i64, i64), i64>,
}

impl Model {
    /// True if `ts` is classified the same (kept or not) at every resolution for every
    /// server time in the margin.
    fn stable(&self, ts: i64) -> bool {
        self.rs.iter().all(|r| {
            let i = slot(ts, r.ms);
            !(first_kept(self.t0, r) <= i && i < first_kept(self.t0 + MARGIN_MS, r))
        })
    }

    fn kept(&self, r: &Res, i: i64) -> bool {
        i >= first_kept(self.t0, r)
    }

    fn incr(&mut self, ts: i64, by: i64) -> Value {
        let mut reply = None;
        for r in self.rs.clone() {
            let i = slot(ts, r.ms);
            if self.kept(&r, i) {
                let c = self.counts.entry((r.ms, i)).or_default();
                *c += by;
                reply.get_or_insert(*c);
            }
        }
        reply.map_or_else(|| v_err(OUTSIDE), v_int)
    }

    fn count(&self, r: &Res, i: i64) -> i64 {
        if self.kept(r, i) {
            self.counts.get(&(r.ms, i)).copied().unwrap_or(0)
        } else {
            0
        }
    }

    fn sum(&self, t: i64, window: i64) -> i64 {
        let r = *self.rs.iter().find(|r| r.span() >= window).unwrap();
        let hi = slot(t, r.ms);
        let k = (window + r.ms - 1) / r.ms;
        (hi - k + 1..=hi).map(|i| self.count(&r, i)).sum()
    }

    /// Non-zero kept slots of `r` with index in `lo..=hi`, oldest first.
    fn nonzero(&self, r: &Res, lo: i64, hi: i64) -> Vec<(i64, i64)> {
        self.counts
            .range((r.ms, lo)..=(r.ms, hi))
            .filter(|(&(_, i), &c)| c != 0 && self.kept(r, i))
            .map(|(&(_, i), &c)| (i * r.ms, c))
            .collect()
    }
}

/// A read whose expected reply is only known after the batch ran (needs the server time
/// at the end): RANGE with EMPTY and no FROM/TO lists exactly the kept range of the moment.
enum Expect {
    Exact(Value),
    /// The resolution and its non-zero kept counts (index -> count) when the read was sent.
    KeptRangeEmpty(Res, BTreeMap<i64, i64>),
}

/// One resolution set: thousands of pipelined writes with reads interleaved, all compared
/// with the model; then the stored hash itself.
fn run_model(srv: &Server, seed: u64, text: &str, writes: usize) {
    let kind = &srv.kind().name;
    let key = format!("model:{seed}");
    let rs = res_list(text);
    let mut create = vec![
        "TSCOUNTER.CREATE".to_string(),
        key.clone(),
        "RESOLUTIONS".into(),
    ];
    create.extend(text.split_whitespace().map(String::from));
    assert_eq!(srv.cmd_value(&create), v_ok(), "{kind}");
    let mut conn = srv.conn();
    let t0 = server_ms(srv);
    let mut m = Model {
        rs: rs.clone(),
        t0,
        counts: BTreeMap::new(),
    };
    let mut rng = Rng(seed);
    let widest = rs.iter().map(Res::span).max().unwrap();
    let (mut batch, mut expect): (Vec<Vec<Vec<u8>>>, Vec<Expect>) = (Vec::new(), Vec::new());
    let (mut n_ok, mut n_outside, mut n_reads) = (0, 0, 0);
    for step in 0..writes {
        // A timestamp: mostly inside one resolution's span, sometimes exactly on the
        // oldest stable kept slot or just before the kept range, sometimes far too old.
        let mut ts = None;
        for _ in 0..100 {
            let r = rs[rng.below(rs.len() as i64) as usize];
            let cand = match rng.below(20) {
                0 => t0 - rng.below(widest * 2),
                1 => first_kept(t0 + MARGIN_MS, &r) * r.ms,
                2 => first_kept(t0, &r) * r.ms - 1,
                _ => t0 - rng.below(r.span() + r.span() / 5),
            };
            if cand <= t0 && m.stable(cand) {
                ts = Some(cand);
                break;
            }
        }
        let Some(ts) = ts else { continue };
        let (cmd, by) = match rng.below(10) {
            0 => (args(&["TSCOUNTER.INCR", &key, "AT", &ts.to_string()]), 1),
            1 => {
                let by = (rng.below(2_000_000_001) - 1_000_000_000) * 1000;
                let c = args(&[
                    "TSCOUNTER.INCRBY",
                    &key,
                    &by.to_string(),
                    "at",
                    &ts.to_string(),
                ]);
                (c, by)
            }
            _ => {
                let by = rng.below(21) - 10;
                let c = args(&[
                    "TSCOUNTER.INCRBY",
                    &key,
                    &by.to_string(),
                    "AT",
                    &ts.to_string(),
                ]);
                (c, by)
            }
        };
        let want = m.incr(ts, by);
        if want == v_err(OUTSIDE) {
            n_outside += 1;
        } else {
            n_ok += 1;
        }
        batch.push(cmd);
        expect.push(Expect::Exact(want));

        if step % 12 == 0 {
            n_reads += 2;
            // SUM: 1 to 4 windows ending with the slot of t (t <= t0).
            let t = t0
                - match rng.below(3) {
                    0 => rng.below(2_000),
                    1 => rng.below(widest / 3),
                    _ => rng.below(widest),
                };
            let nwin = 1 + rng.below(4);
            let mut cmd = vec!["TSCOUNTER.SUM".to_string(), key.clone()];
            let mut sums = Vec::new();
            for _ in 0..nwin {
                let r = rs[rng.below(rs.len() as i64) as usize];
                let (w, text) = match rng.below(3) {
                    0 => {
                        let w = r.ms * (1 + rng.below(r.samples));
                        (w, label(w))
                    }
                    1 => {
                        let w = 1 + rng.below(r.span());
                        (w, w.to_string())
                    }
                    _ => {
                        let w = 1000 * (1 + rng.below(r.span() / 1000));
                        (w, format!("{}s", w / 1000))
                    }
                };
                cmd.push(text);
                sums.push(m.sum(t, w));
            }
            cmd.extend(["AT".to_string(), t.to_string()]);
            batch.push(args(&cmd));
            expect.push(Expect::Exact(if sums.len() == 1 {
                v_int(sums[0])
            } else {
                v_ints(&sums)
            }));

            // RANGE, in one of four shapes.
            let r = rs[rng.below(rs.len() as i64) as usize];
            let res_arg = if rng.below(2) == 0 {
                label(r.ms)
            } else {
                r.ms.to_string()
            };
            let mut cmd = vec!["TSCOUNTER.RANGE".to_string(), key.clone(), res_arg];
            let lo_stable = first_kept(t0 + MARGIN_MS, &r);
            let hi0 = slot(t0, r.ms);
            match rng.below(4) {
                0 => {
                    let lo = first_kept(t0, &r);
                    expect.push(Expect::Exact(v_pairs(&m.nonzero(&r, lo, hi0))));
                }
                1 if lo_stable <= hi0 => {
                    // EMPTY between FROM and TO, both inside the range kept all along.
                    let a = lo_stable + rng.below(hi0 - lo_stable + 1);
                    let b = a + rng.below(hi0 - a + 1);
                    let from = a * r.ms + rng.below(r.ms);
                    let to = (b * r.ms + rng.below(r.ms)).min(t0);
                    let b = slot(to, r.ms);
                    cmd.extend(["FROM".into(), from.to_string(), "TO".into(), to.to_string()]);
                    cmd.push(if rng.below(2) == 0 { "EMPTY" } else { "empty" }.into());
                    let rows: Vec<(i64, i64)> =
                        (a..=b).map(|i| (i * r.ms, m.count(&r, i))).collect();
                    expect.push(Expect::Exact(v_pairs(&rows)));
                }
                2 | 1 => {
                    // Without EMPTY: any FROM / TO, either may be left out, in any order.
                    let from = (rng.below(2) == 0).then(|| t0 - rng.below(r.span() * 2));
                    let to = (rng.below(2) == 0).then(|| t0 - rng.below(r.span() * 2));
                    let mut opts = Vec::new();
                    if let Some(f) = from {
                        opts.push(vec!["FROM".to_string(), f.to_string()]);
                    }
                    if let Some(t) = to {
                        opts.push(vec!["TO".to_string(), t.to_string()]);
                    }
                    if rng.below(2) == 0 {
                        opts.reverse();
                    }
                    cmd.extend(opts.into_iter().flatten());
                    let lo = from
                        .map_or(i64::MIN, |f| slot(f, r.ms))
                        .max(first_kept(t0, &r));
                    let hi = to.map_or(hi0, |t| slot(t, r.ms)).min(hi0);
                    let rows = if lo <= hi {
                        m.nonzero(&r, lo, hi)
                    } else {
                        Vec::new()
                    };
                    expect.push(Expect::Exact(v_pairs(&rows)));
                }
                _ => {
                    cmd.push("EMPTY".into());
                    let snapshot = m
                        .nonzero(&r, i64::MIN, i64::MAX)
                        .into_iter()
                        .map(|(start, c)| (start / r.ms, c))
                        .collect();
                    expect.push(Expect::KeptRangeEmpty(r, snapshot));
                }
            }
            batch.push(args(&cmd));
        }

        if batch.len() >= 400 || step + 1 == writes {
            let got = pipeline(&mut conn, &batch);
            let t_end = server_ms(srv);
            assert!(
                t_end - t0 < MARGIN_MS,
                "{kind}: the batch ended {} ms after t0, past the {MARGIN_MS} ms margin that \
                 keeps this test deterministic (machine overloaded?)",
                t_end - t0
            );
            for ((cmd, want), got) in batch.iter().zip(&expect).zip(got) {
                let shown: Vec<String> = cmd
                    .iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                match want {
                    Expect::Exact(v) => {
                        assert_eq!(&got, v, "{kind} seed {seed} ({text}): {shown:?}")
                    }
                    Expect::KeptRangeEmpty(r, snapshot) => {
                        check_kept_range(snapshot, r, t0, t_end, &got, &format!("{kind} {shown:?}"))
                    }
                }
            }
            batch.clear();
            expect.clear();
        }
    }
    assert!(
        n_ok > writes / 2 && n_outside > 0 && n_reads > 100,
        "{n_ok} {n_outside}"
    );

    // The stored hash is exactly the model: settings, bookkeeping, non-zero kept slots.
    let h = hgetall(srv, key.as_bytes());
    let canon: Vec<String> = rs
        .iter()
        .map(|r| format!("{}:{}", label(r.ms), r.samples))
        .collect();
    assert_eq!(
        h.get("_tally"),
        Some(&format!("counter {}", canon.join(" "))),
        "{kind}"
    );
    let mut want_fields = BTreeMap::new();
    for (&(ms, i), &c) in &m.counts {
        if c != 0 {
            want_fields.insert(format!("{}:{i}", label(ms)), c.to_string());
        }
    }
    assert_eq!(
        slot_fields(srv, key.as_bytes()),
        want_fields,
        "{kind} seed {seed}"
    );
    let state = parse_state(&h["_state"], &rs);
    assert_eq!(state.len(), rs.len(), "{kind}: {h:?}");
    for (r, (lo, n)) in rs.iter().zip(state) {
        let idx: Vec<i64> = m
            .counts
            .iter()
            .filter(|(&(ms, _), &c)| ms == r.ms && c != 0)
            .map(|(&(_, i), _)| i)
            .collect();
        assert_eq!(n, idx.len() as i64, "{kind}: _state of {r:?}");
        if let (Some(first), Some(last)) = (idx.first(), idx.last()) {
            assert!(
                lo <= *first && *last < lo + r.samples,
                "{kind}: _state lo {lo} for {idx:?}"
            );
        }
    }
}

/// `_state` as documented in src/counter.rs: `<ref> <d>:<n> ...`, one `d:n` per resolution
/// (finest first), `n` stored slots whose indexes lie in `lo .. lo + samples` where
/// `lo = floor(ref / res) - d`. Returns `(lo, n)` per resolution.
fn parse_state(text: &str, rs: &[Res]) -> Vec<(i64, i64)> {
    let mut items = text.split(' ');
    let reference: i64 = items.next().unwrap().parse().expect("_state reference");
    let out: Vec<(i64, i64)> = items
        .zip(rs)
        .map(|(p, r)| {
            let (d, n) = p
                .split_once(':')
                .unwrap_or_else(|| panic!("_state {text:?}"));
            let d: i64 = d.parse().unwrap();
            (slot(reference, r.ms) - d, n.parse().unwrap())
        })
        .collect();
    assert_eq!(text.split(' ').count(), rs.len() + 1, "_state {text:?}");
    out
}

/// RANGE key res EMPTY (no FROM/TO) answers the kept range of the moment it ran: exactly
/// `samples` rows ending with the slot of some server time in `t0 ..= t_end`, with the
/// model's counts.
fn check_kept_range(
    counts: &BTreeMap<i64, i64>,
    r: &Res,
    t0: i64,
    t_end: i64,
    got: &Value,
    what: &str,
) {
    let Value::Array(rows) = got else {
        panic!("{what}: {got:?}")
    };
    assert_eq!(rows.len() as i64, r.samples, "{what}: {got:?}");
    let start = |v: &Value| match v {
        Value::Array(p) if p.len() == 2 => match p[0] {
            Value::Int(s) => s,
            _ => panic!("{what}: {v:?}"),
        },
        _ => panic!("{what}: {v:?}"),
    };
    let hi = slot(start(rows.last().unwrap()), r.ms);
    assert!(
        slot(t0, r.ms) <= hi && hi <= slot(t_end, r.ms),
        "{what}: last slot {hi} outside the server's clock range"
    );
    let lo = hi - r.samples + 1;
    let want: Vec<(i64, i64)> = (lo..=hi)
        .map(|i| (i * r.ms, counts.get(&i).copied().unwrap_or(0)))
        .collect();
    assert_eq!(got, &v_pairs(&want), "{what}");
}

per_server!(model_based_workload_matches_reference);
fn model_based_workload_matches_reference(kind: &ServerKind) {
    let srv = Server::start(kind);
    for (seed, text, writes) in [
        (11u64, DEFAULT_RES, 3000),
        (12, "1s:60 1m:60 1h:24 1d:365", 3000),
        (13, "13s:11 1500ms:50 7s:20", 1500),
    ] {
        run_model(&srv, seed, text, writes);
    }
    srv.assert_alive();
}

// ================================================================== errors

/// Expected stored fields for increments `(ts, by)` that are all kept, per the model.
fn expected_fields(rs: &[Res], incs: &[(i64, i64)]) -> BTreeMap<String, String> {
    let mut counts: BTreeMap<String, i64> = BTreeMap::new();
    for &(ts, by) in incs {
        for r in rs {
            *counts
                .entry(format!("{}:{}", label(r.ms), slot(ts, r.ms)))
                .or_default() += by;
        }
    }
    counts
        .into_iter()
        .filter(|(_, c)| *c != 0)
        .map(|(f, c)| (f, c.to_string()))
        .collect()
}

per_server!(errors_have_exact_text_and_change_nothing);
fn errors_have_exact_text_and_change_nothing(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let c = b"c".as_slice();
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "c", "RESOLUTIONS", "1s:60", "1m:60"]),
        v_ok()
    );
    let t0 = server_ms(&srv);
    let (ta, tb) = (t0 - 30_000, t0 - 1_000);
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "c", "5", "AT", &ta.to_string()]),
        v_int(5)
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "c", "3", "AT", &tb.to_string()]),
        v_int(3)
    );
    let before = hgetall(&srv, c);
    let at = |t: i64| t.to_string();

    // Wrong number of arguments: the server's own check (from the declared arity),
    // whatever the case of the command name.
    let arity = |name: &str| format!("ERR wrong number of arguments for '{name}' command");
    for cmd in [
        &["TSCOUNTER.CREATE"][..],
        &["tscounter.incrby", "c"],
        &["TSCOUNTER.INCR"],
        &["TsCounter.Sum", "c"],
        &["TSCOUNTER.RANGE", "c"],
        &["TSCOUNTER.INFO"],
        &["TSCOUNTER.INFO", "c", "extra"],
    ] {
        let name = cmd[0].to_ascii_lowercase();
        assert_refused(&srv, c, cmd, &arity(&name));
    }

    // Not an integer (increment, AT, FROM, TO).
    let not_int = "ERR value is not an integer or out of range";
    for cmd in [
        &["TSCOUNTER.INCRBY", "c", "abc"][..],
        &["TSCOUNTER.INCRBY", "c", "1.5"],
        &["TSCOUNTER.INCRBY", "c", ""],
        &["TSCOUNTER.INCRBY", "c", "99999999999999999999"],
        &["TSCOUNTER.INCRBY", "c", " 1"],
        &["TSCOUNTER.INCR", "c", "AT", "x"],
        &["TSCOUNTER.INCRBY", "c", "1", "AT", "1.5"],
        &["TSCOUNTER.SUM", "c", "1m", "AT", "x"],
        &["TSCOUNTER.RANGE", "c", "1s", "FROM", "x"],
        &["TSCOUNTER.RANGE", "c", "1s", "TO", "1e3"],
    ] {
        assert_refused(&srv, c, cmd, not_int);
    }

    // Bad durations.
    for (cmd, text) in [
        (&["TSCOUNTER.SUM", "c", "5x"][..], "5x"),
        (&["TSCOUNTER.SUM", "c", "1m", "5x"], "5x"),
        (&["TSCOUNTER.SUM", "c", "0"], "0"),
        (&["TSCOUNTER.SUM", "c", "-5s"], "-5s"),
        (&["TSCOUNTER.SUM", "c", "1m", "FOO"], "FOO"),
        (&["TSCOUNTER.RANGE", "c", "5x"], "5x"),
        (&["TSCOUNTER.RANGE", "c", "0"], "0"),
        (&["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "5x:10"], "5x"),
        (&["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1s"], "1s"),
        (
            &["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1s:5", "FOO"],
            "FOO",
        ),
        // A bad resolution is reported like a bad duration, naming the token.
        (&["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1s:x"], "1s:x"),
        (
            &["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1s:5", "1000:3"],
            "1000:3",
        ),
        (
            &[
                "TSCOUNTER.CREATE",
                "n",
                "RESOLUTIONS",
                "1m:5",
                "1s:5",
                "60s:5",
            ],
            "60s:5",
        ),
        (&["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1s:0"], "1s:0"),
        (
            &["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1s:100001"],
            "1s:100001",
        ),
        (
            &["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1m:5", "1s:-1"],
            "1s:-1",
        ),
    ] {
        assert_refused(&srv, c, cmd, &format!("ERR invalid duration '{text}'"));
        assert!(!exists(&srv, b"n"), "{k}");
    }

    // Bad resolution lists (CREATE n ...): nothing is created.
    let seventeen: Vec<String> = (1..=17).map(|i| format!("{i}s:1")).collect();
    let sixteen: Vec<String> = (1..=16).map(|i| format!("{i}s:1")).collect();
    let mut create17 = vec![
        "TSCOUNTER.CREATE".to_string(),
        "n".into(),
        "RESOLUTIONS".into(),
    ];
    create17.extend(seventeen);
    for (cmd, err) in [
        (
            args(&["TSCOUNTER.CREATE", "n", "RESOLUTIONS"]),
            "ERR syntax error",
        ),
        (args(&create17), "ERR a counter has 1 to 16 resolutions"),
        (args(&["TSCOUNTER.CREATE", "n", "FOO"]), "ERR syntax error"),
    ] {
        assert_refused(&srv, b"n", &cmd, err);
    }
    // The limits themselves are accepted.
    let mut create16 = vec![
        "TSCOUNTER.CREATE".to_string(),
        "n16".into(),
        "RESOLUTIONS".into(),
    ];
    create16.extend(sixteen);
    assert_eq!(srv.cmd_value(&create16), v_ok(), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "n1", "resolutions", "1s:100000"]),
        v_ok(),
        "{k}"
    );

    // Unknown, repeated or incomplete options.
    let (sa, sb) = (at(ta), at(tb));
    for cmd in [
        &["TSCOUNTER.INCR", "c", "FOO"][..],
        &["TSCOUNTER.INCR", "c", "AT", &sa, "AT", &sb],
        &["TSCOUNTER.INCR", "c", "AT"],
        &["TSCOUNTER.INCRBY", "c", "1", "AT"],
        &["TSCOUNTER.INCRBY", "c", "1", "FOO", "5"],
        &["TSCOUNTER.INCRBY", "c", "1", "AT", &sa, "EXTRA"],
        &["TSCOUNTER.SUM", "c", "1m", "AT", &sa, "AT", &sb],
        &["TSCOUNTER.SUM", "c", "1m", "AT"],
        &["TSCOUNTER.SUM", "c", "1m", "AT", &sa, "5m"],
        &["TSCOUNTER.RANGE", "c", "1s", "FROM", "1", "FROM", "2"],
        &["TSCOUNTER.RANGE", "c", "1s", "TO", "1", "TO", "2"],
        &["TSCOUNTER.RANGE", "c", "1s", "EMPTY", "EMPTY"],
        &["TSCOUNTER.RANGE", "c", "1s", "BOGUS"],
        &["TSCOUNTER.RANGE", "c", "1s", "FROM"],
        &["TSCOUNTER.RANGE", "c", "1s", "TO"],
    ] {
        assert_refused(&srv, c, cmd, "ERR syntax error");
    }

    // Wrong types: a string, a plain hash, a zset, a hash of another family, a
    // damaged counter marker. CREATE on any of them: the key exists.
    assert_eq!(srv.cmd_value(&["SET", "s", "v"]), v_ok());
    assert_eq!(srv.cmd_value(&["HSET", "h", "f", "v"]), v_int(1));
    assert_eq!(srv.cmd_value(&["HSET", "h2", "1s:5", "1"]), v_int(1));
    assert_eq!(srv.cmd_value(&["ZADD", "z", "1", "m"]), v_int(1));
    assert_eq!(
        srv.cmd_value(&["HSET", "fam", "_tally", "stats 1h 24"]),
        v_int(1)
    );
    assert_eq!(
        srv.cmd_value(&["HSET", "fam2", "_tally", "rank 24h 1h"]),
        v_int(1)
    );
    assert_eq!(
        srv.cmd_value(&["HSET", "bad", "_tally", "counter garbage"]),
        v_int(1)
    );
    assert_eq!(
        srv.cmd_value(&["HSET", "bad2", "_tally", "counterx 1s:5"]),
        v_int(1)
    );
    for key in ["s", "h", "h2", "z", "fam", "fam2", "bad", "bad2"] {
        let kb = key.as_bytes();
        for cmd in [
            &["TSCOUNTER.INCRBY", key, "1"][..],
            &["TSCOUNTER.INCRBY", key, "1", "AT", &sb],
            &["TSCOUNTER.INCR", key],
            &["TSCOUNTER.SUM", key, "1m"],
            &["TSCOUNTER.SUM", key, "1m", "5m"],
            &["TSCOUNTER.RANGE", key, "1s"],
            &["TSCOUNTER.INFO", key],
        ] {
            assert_refused(&srv, kb, cmd, WRONGTYPE);
        }
        for cmd in [
            &["TSCOUNTER.CREATE", key][..],
            &["TSCOUNTER.CREATE", key, "RESOLUTIONS", "1s:5"],
        ] {
            assert_refused(&srv, kb, cmd, "ERR key already exists");
        }
    }
    assert_refused(
        &srv,
        c,
        &["TSCOUNTER.CREATE", "c"],
        "ERR key already exists",
    );
    assert_refused(
        &srv,
        c,
        &["TSCOUNTER.CREATE", "c", "RESOLUTIONS", "1s:60", "1m:60"],
        "ERR key already exists",
    );

    // Overflow, both ways.
    let max = i64::MAX.to_string();
    let min = i64::MIN.to_string();
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "o", &max]),
        v_int(i64::MAX)
    );
    let ovf = "ERR increment or decrement would overflow";
    assert_refused(&srv, b"o", &["TSCOUNTER.INCRBY", "o", &max], ovf);
    assert_refused(&srv, b"o", &["TSCOUNTER.INCR", "o"], ovf);
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "o2", &min]),
        v_int(i64::MIN)
    );
    assert_refused(&srv, b"o2", &["TSCOUNTER.INCRBY", "o2", "-1"], ovf);
    // SUM over slots whose total overflows is refused rather than wrapped.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "o3", "RESOLUTIONS", "1s:60"]),
        v_ok()
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "o3", &max, "AT", &sa]),
        v_int(i64::MAX)
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "o3", &max, "AT", &sb]),
        v_int(i64::MAX)
    );
    assert_refused(&srv, b"o3", &["TSCOUNTER.SUM", "o3", "1m", "AT", &sb], ovf);

    // Timestamps out of range, on an existing and on a missing key.
    let old = at(t0 - 2 * 3_600_000); // 1m:60 keeps one hour
    let future = at(t0 + 10 * 60_000); // max-future defaults to 1m
                                       // (The missing key would be created with the default resolutions: 1d:120.)
    let very_old = at(t0 - 200 * 86_400_000);
    for (key, old) in [("c", &old), ("missing", &very_old)] {
        let kb = key.as_bytes();
        for (cmd, err) in [
            (&["TSCOUNTER.INCR", key, "AT", "1000"][..], OUTSIDE),
            (&["TSCOUNTER.INCRBY", key, "7", "AT", old], OUTSIDE),
            (&["TSCOUNTER.INCRBY", key, "0", "AT", old], OUTSIDE),
            (&["TSCOUNTER.INCR", key, "AT", "-1"], OUTSIDE),
            (&["TSCOUNTER.INCR", key, "AT", &min], OUTSIDE),
            (&["TSCOUNTER.INCR", key, "AT", &future], FUTURE),
            (&["TSCOUNTER.INCRBY", key, "1", "AT", &max], FUTURE),
            (&["TSCOUNTER.SUM", key, "1m", "AT", &future], FUTURE),
        ] {
            assert_refused(&srv, kb, cmd, err);
        }
    }
    assert!(!exists(&srv, b"missing"), "{k}");

    // A window longer than any resolution keeps; a resolution the counter lacks.
    for (cmd, err) in [
        (
            &["TSCOUNTER.SUM", "c", "2h"][..],
            "ERR window '2h' is longer than any resolution keeps",
        ),
        (
            &["TSCOUNTER.SUM", "c", "1m", "3600001"],
            "ERR window '3600001ms' is longer than any resolution keeps",
        ),
        (
            &["TSCOUNTER.SUM", "missing", "1000d"],
            "ERR window '1000d' is longer than any resolution keeps",
        ),
        (
            &["TSCOUNTER.RANGE", "c", "5s"],
            "ERR the counter has no resolution '5s'",
        ),
        (
            &["TSCOUNTER.RANGE", "c", "2000", "EMPTY"],
            "ERR the counter has no resolution '2s'",
        ),
    ] {
        assert_refused(&srv, cmd[1].as_bytes(), cmd, err);
    }
    // The longest window is fine.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "c", "1h", "AT", &sb]),
        v_int(8),
        "{k}"
    );

    // After all that, the counter is exactly as it was.
    assert_eq!(hgetall(&srv, c), before, "{k}");
    srv.assert_alive();
}

per_server!(at_within_max_future_counts_as_now);
fn at_within_max_future_counts_as_now(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "f", "RESOLUTIONS", "1s:600"]),
        v_ok()
    );
    let t0 = server_ms(&srv);
    let ahead = t0 + 30_000;
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "f", "7", "AT", &ahead.to_string()]),
        v_int(7)
    );
    let t1 = server_ms(&srv);
    assert!(
        t1 - t0 < 30_000,
        "{k}: too slow to tell 'now' from the AT time"
    );
    let fields = slot_fields(&srv, b"f");
    assert_eq!(fields.len(), 1, "{k}: {fields:?}");
    let (field, count) = fields.iter().next().unwrap();
    let index: i64 = field.strip_prefix("1s:").unwrap().parse().unwrap();
    assert!(
        slot(t0, 1000) <= index && index <= slot(t1, 1000),
        "{k}: stored at {index}, not at the server's now ({t0}..{t1})"
    );
    assert_eq!(count, "7");
    // Reads at a time within max-future are also reads at now.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "f", "5m", "AT", &ahead.to_string()]),
        v_int(7)
    );
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.SUM",
            "f",
            "5m",
            "AT",
            &(t0 + 10 * 60_000).to_string()
        ]),
        v_err(FUTURE),
        "{k}"
    );
}

// =============================================================== behaviour

fn info_resolutions(srv: &Server, key: &str) -> Value {
    let v = srv.cmd_value(&["TSCOUNTER.INFO", key]);
    map_pairs(&v)
        .into_iter()
        .find(|(k, _)| k == "resolutions")
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no resolutions in {v:?}"))
}

fn config_get(srv: &Server, name: &str) -> Value {
    match srv.cmd_value(&["CONFIG", "GET", name]) {
        Value::Array(a) if a.len() == 2 => a[1].clone(),
        other => panic!("CONFIG GET {name}: {other:?}"),
    }
}

per_server!(auto_create_uses_the_configured_resolutions);
fn auto_create_uses_the_configured_resolutions(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        config_get(&srv, "tally.counter-resolutions"),
        v_bulk(DEFAULT_RES),
        "{k}"
    );
    assert_eq!(config_get(&srv, "tally.max-future"), v_bulk("1m"), "{k}");
    let default_pairs: Vec<(i64, i64)> = res_list(DEFAULT_RES)
        .iter()
        .map(|r| (r.ms, r.samples))
        .collect();
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCR", "a"]), v_int(1), "{k}");
    assert_eq!(info_resolutions(&srv, "a"), v_pairs(&default_pairs), "{k}");

    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.counter-resolutions", "1m:5 1s:5"]),
        v_ok(),
        "{k}"
    );
    // Shown in canonical form, finest first.
    assert_eq!(
        config_get(&srv, "tally.counter-resolutions"),
        v_bulk("1s:5 1m:5"),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "b", "4"]),
        v_int(4),
        "{k}"
    );
    assert_eq!(
        info_resolutions(&srv, "b"),
        v_pairs(&[(1000, 5), (60_000, 5)]),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["TSCOUNTER.CREATE", "b2"]), v_ok(), "{k}");
    assert_eq!(
        info_resolutions(&srv, "b2"),
        v_pairs(&[(1000, 5), (60_000, 5)]),
        "{k}"
    );
    assert_eq!(
        hgetall(&srv, b"b").get("_tally").map(String::as_str),
        Some("counter 1s:5 1m:5"),
        "{k}"
    );
    // Existing counters keep their own settings.
    assert_eq!(info_resolutions(&srv, "a"), v_pairs(&default_pairs), "{k}");
    // A missing key is read as an empty counter with the configured resolutions.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "none", "5m"]),
        v_int(0),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "none", "6m"]),
        v_err("ERR window '6m' is longer than any resolution keeps"),
        "{k}"
    );

    // Invalid values are refused and change nothing.
    for (name, value) in [
        ("tally.counter-resolutions", "1s:0"),
        ("tally.counter-resolutions", "5x:5"),
        ("tally.counter-resolutions", "1s"),
        ("tally.counter-resolutions", ""),
        ("tally.counter-resolutions", "1s:5 1000:5"),
        ("tally.max-future", "5x"),
        ("tally.max-future", "0"),
        ("tally.max-future", "-1s"),
    ] {
        let before = config_get(&srv, name);
        let got = srv.cmd_value(&["CONFIG", "SET", name, value]);
        let text = error_text(&got).unwrap_or_else(|| panic!("{k}: {name}={value:?}: {got:?}"));
        assert!(text.starts_with("ERR"), "{k}: {text}");
        assert_eq!(config_get(&srv, name), before, "{k}: {name}={value:?}");
    }

    // max-future follows its config at once.
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.max-future", "5s"]),
        v_ok()
    );
    let t0 = server_ms(&srv);
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCR", "b", "AT", &(t0 + 30_000).to_string()]),
        v_err(FUTURE),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.max-future", "1m"]),
        v_ok()
    );
    let v = srv.cmd_value(&["TSCOUNTER.INCR", "b", "AT", &(t0 + 30_000).to_string()]);
    assert!(
        matches!(v, Value::Int(1 | 5)),
        "{k}: within max-future: {v:?}"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "b", "5m"]),
        v_int(5),
        "{k}"
    );
}

per_server!(module_arguments_set_the_configs);
fn module_arguments_set_the_configs(kind: &ServerKind) {
    let srv = Server::start_with(
        kind,
        ServerOptions::new().module_args(&["counter-resolutions", "1s:5 1m:5", "max-future", "5s"]),
    );
    let k = &kind.name;
    assert_eq!(
        config_get(&srv, "tally.counter-resolutions"),
        v_bulk("1s:5 1m:5"),
        "{k}"
    );
    assert_eq!(config_get(&srv, "tally.max-future"), v_bulk("5s"), "{k}");
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCR", "x"]), v_int(1), "{k}");
    assert_eq!(
        info_resolutions(&srv, "x"),
        v_pairs(&[(1000, 5), (60_000, 5)]),
        "{k}"
    );
    let t0 = server_ms(&srv);
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCR", "x", "AT", &(t0 + 30_000).to_string()]),
        v_err(FUTURE),
        "{k}: 30 s ahead is refused with max-future 5s"
    );
    let v = srv.cmd_value(&["TSCOUNTER.INCR", "x", "AT", &(t0 + 2_000).to_string()]);
    assert!(
        matches!(v, Value::Int(1 | 2)),
        "{k}: 2 s ahead is accepted as now: {v:?}"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "x", "5m"]),
        v_int(2),
        "{k}"
    );
}

per_server!(missing_keys_read_as_empty);
fn missing_keys_read_as_empty(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    for (cmd, want) in [
        (&["TSCOUNTER.INFO", "m"][..], v_nil()),
        (&["TSCOUNTER.SUM", "m", "1m"], v_int(0)),
        (&["TSCOUNTER.SUM", "m", "1m", "AT", "1000"], v_int(0)),
        (
            &["TSCOUNTER.SUM", "m", "1s", "1h", "120d"],
            v_ints(&[0, 0, 0]),
        ),
        (&["TSCOUNTER.RANGE", "m", "1s"], v_arr(vec![])),
        (&["TSCOUNTER.RANGE", "m", "1m", "EMPTY"], v_arr(vec![])),
        (
            &[
                "TSCOUNTER.RANGE",
                "m",
                "1m",
                "FROM",
                "0",
                "TO",
                "100000",
                "EMPTY",
            ],
            v_arr(vec![]),
        ),
    ] {
        assert_eq!(srv.cmd_value(cmd), want, "{k}: {cmd:?}");
        assert_eq!(srv.cmd_value_resp3(cmd), want, "{k}: RESP3 {cmd:?}");
    }
    // INCRBY 0 on a missing key answers 0 and creates nothing.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "m", "0"]),
        v_int(0),
        "{k}"
    );
    assert!(
        !exists(&srv, b"m"),
        "{k}: reads and INCRBY 0 create nothing"
    );
    assert_eq!(srv.cmd_value(&["DBSIZE"]), v_int(0), "{k}");
}

per_server!(zero_slots_are_removed_and_an_empty_counter_disappears);
fn zero_slots_are_removed_and_an_empty_counter_disappears(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    // The simplest case, default resolutions.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "z", "5"]),
        v_int(5),
        "{k}"
    );
    assert_eq!(
        slot_fields(&srv, b"z").len(),
        7,
        "{k}: one slot per resolution"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "z", "-5"]),
        v_int(0),
        "{k}"
    );
    assert!(!exists(&srv, b"z"), "{k}: no slot left, the key disappears");

    // Two timestamps: slots reach 0 one by one.
    let rs = res_list("1s:60 1h:2");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "y", "RESOLUTIONS", "1s:60", "1h:2"]),
        v_ok()
    );
    assert_eq!(
        hgetall(&srv, b"y").len(),
        2,
        "{k}: CREATE stores only the settings"
    );
    let t0 = server_ms(&srv);
    let (ta, tb) = (t0 - 10_000, t0);
    let (sa, sb) = (ta.to_string(), tb.to_string());
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "y", "5", "AT", &sa]),
        v_int(5)
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "y", "2", "AT", &sb]),
        v_int(2)
    );
    assert_eq!(
        slot_fields(&srv, b"y"),
        expected_fields(&rs, &[(ta, 5), (tb, 2)]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "y", "-5", "AT", &sa]),
        v_int(0)
    );
    assert_eq!(
        slot_fields(&srv, b"y"),
        expected_fields(&rs, &[(ta, 5), (tb, 2), (ta, -5)]),
        "{k}: the 1s slot that reached 0 is gone"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "y", "-2", "AT", &sb]),
        v_int(0)
    );
    assert!(!exists(&srv, b"y"), "{k}");

    // A counter created empty disappears once its only slots are back to zero.
    assert_eq!(srv.cmd_value(&["TSCOUNTER.CREATE", "e"]), v_ok());
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCRBY", "e", "0"]), v_int(0));
    assert!(
        exists(&srv, b"e"),
        "{k}: INCRBY 0 keeps the created counter"
    );
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCRBY", "e", "3"]), v_int(3));
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCRBY", "e", "-3"]), v_int(0));
    assert!(!exists(&srv, b"e"), "{k}");
}

per_server!(old_slots_are_removed_by_the_next_write);
/// Proof that a write trims: the old slot and the write run inside one MULTI/EXEC, where
/// no timer can run, with a DEBUG SLEEP in between that lets the slot leave its range.
fn old_slots_are_removed_by_the_next_write(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "w", "RESOLUTIONS", "100ms:3", "1h:2"]),
        v_ok()
    );
    let mut conn = srv.conn();
    let got = pipeline(
        &mut conn,
        &[
            args(&["MULTI"]),
            args(&["TSCOUNTER.INCR", "w"]),
            args(&["HKEYS", "w"]),
            args(&["DEBUG", "SLEEP", "0.5"]),
            args(&["TSCOUNTER.INCR", "w"]),
            args(&["HKEYS", "w"]),
            args(&["EXEC"]),
        ],
    );
    let Value::Array(exec) = &got[6] else {
        panic!("{k}: EXEC gave {got:?}")
    };
    assert_eq!(exec[0], v_int(1), "{k}");
    assert_eq!(exec[3], v_int(1), "{k}: the new 100ms slot starts at 1");
    let keys = |v: &Value| -> Vec<String> {
        let Value::Array(a) = v else { panic!("{v:?}") };
        let mut out: Vec<String> = a.iter().map(|x| value_text(x).unwrap()).collect();
        out.sort();
        out
    };
    let fine = |ks: &[String]| -> Vec<i64> {
        ks.iter()
            .filter_map(|f| f.strip_prefix("100ms:"))
            .map(|i| i.parse().unwrap())
            .collect()
    };
    let (first, second) = (keys(&exec[1]), keys(&exec[4]));
    let (old, new) = (fine(&first), fine(&second));
    assert_eq!(old.len(), 1, "{k}: {first:?}");
    assert_eq!(
        new.len(),
        1,
        "{k}: the write removed the old slot: {second:?}"
    );
    assert!(new[0] >= old[0] + 3, "{k}: {old:?} -> {new:?}");
    // The hour slot(s) still count both increments.
    let hour: i64 = hgetall(&srv, b"w")
        .iter()
        .filter(|(f, _)| f.starts_with("1h:"))
        .map(|(_, v)| v.parse::<i64>().unwrap())
        .sum();
    assert_eq!(hour, 2, "{k}");
}

per_server!(idle_counters_are_trimmed_by_the_timer);
/// Nobody writes: the timer alone trims old slots, deletes counters left empty, and
/// `INFO tally` shows it.
fn idle_counters_are_trimmed_by_the_timer(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let expired0 = info_i64(&srv, "tally", "tally_slots_expired");
    let ticks0 = info_i64(&srv, "tally", "tally_timer_ticks");
    let visited0 = info_i64(&srv, "tally", "tally_keys_visited");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "i", "RESOLUTIONS", "100ms:3", "1h:2"]),
        v_ok()
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "j", "RESOLUTIONS", "100ms:2"]),
        v_ok()
    );
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCRBY", "i", "3"]), v_int(3));
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCRBY", "j", "4"]), v_int(4));
    assert!(
        wait_until(Duration::from_secs(10), || {
            !exists(&srv, b"j")
                && !slot_fields(&srv, b"i")
                    .keys()
                    .any(|f| f.starts_with("100ms:"))
        }),
        "{k}: timer did not trim: i={:?} j={:?}",
        hgetall(&srv, b"i"),
        hgetall(&srv, b"j")
    );
    let fields = slot_fields(&srv, b"i");
    assert_eq!(fields.len(), 1, "{k}: the hour slot stays: {fields:?}");
    assert_eq!(fields.values().next().map(String::as_str), Some("3"), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "i", "1h"]),
        v_int(3),
        "{k}"
    );
    assert!(
        info_i64(&srv, "tally", "tally_slots_expired") >= expired0 + 2,
        "{k}"
    );
    assert!(
        info_i64(&srv, "tally", "tally_keys_visited") >= visited0 + 2,
        "{k}"
    );
    let ticks1 = info_i64(&srv, "tally", "tally_timer_ticks");
    assert!(ticks1 > ticks0, "{k}");
    assert!(
        wait_until(Duration::from_secs(5), || info_i64(
            &srv,
            "tally",
            "tally_timer_ticks"
        ) > ticks1),
        "{k}: the timer keeps ticking"
    );
    assert!(
        info_i64(&srv, "tally", "tally_tracked_objects") >= 1,
        "{k}: i is still tracked"
    );
}

/// (field, value) pairs of a RESP2 key-spec / command-doc style flat array.
fn flat_map(v: &Value) -> BTreeMap<String, Value> {
    let Value::Array(a) = v else { panic!("{v:?}") };
    a.chunks(2)
        .map(|c| (value_text(&c[0]).unwrap(), c[1].clone()))
        .collect()
}

fn texts(v: &Value) -> Vec<String> {
    let Value::Array(a) = v else { panic!("{v:?}") };
    a.iter().map(|x| value_text(x).unwrap()).collect()
}

per_server!(command_info_and_getkeys);
fn command_info_and_getkeys(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    for (name, arity, write, key_flags, sample) in [
        (
            "tscounter.create",
            -2,
            true,
            ["RW", "insert"],
            &["RESOLUTIONS", "1s:5"][..],
        ),
        (
            "tscounter.incrby",
            -3,
            true,
            ["RW", "update"],
            &["5", "AT", "1"],
        ),
        ("tscounter.incr", -2, true, ["RW", "update"], &[]),
        (
            "tscounter.sum",
            -3,
            false,
            ["RO", "access"],
            &["1m", "5m", "AT", "1"],
        ),
        (
            "tscounter.range",
            -3,
            false,
            ["RO", "access"],
            &["1s", "FROM", "1", "TO", "2", "EMPTY"],
        ),
        ("tscounter.info", 2, false, ["RO", "access"], &[]),
    ] {
        let v = srv.cmd_value(&["COMMAND", "INFO", name]);
        let Value::Array(outer) = &v else {
            panic!("{k}: {v:?}")
        };
        let Value::Array(info) = &outer[0] else {
            panic!("{k}: {name} unknown: {v:?}")
        };
        assert_eq!(value_text(&info[0]).as_deref(), Some(name), "{k}");
        assert_eq!(info[1], v_int(arity), "{k}: {name} arity");
        let flags = texts(&info[2]);
        if write {
            assert_eq!(flags, ["write", "denyoom", "module"], "{k}: {name}");
        } else {
            assert_eq!(flags, ["readonly", "module"], "{k}: {name}");
        }
        assert_eq!(
            &info[3..6],
            &[v_int(1), v_int(1), v_int(1)],
            "{k}: {name} first/last/step"
        );
        let Value::Array(specs) = &info[8] else {
            panic!("{k}: {info:?}")
        };
        assert_eq!(specs.len(), 1, "{k}: {name} has one key spec");
        let spec = flat_map(&specs[0]);
        assert_eq!(
            texts(&spec["flags"]),
            key_flags,
            "{k}: {name} key spec flags"
        );
        let begin = flat_map(&spec["begin_search"]);
        assert_eq!(value_text(&begin["type"]).as_deref(), Some("index"), "{k}");
        assert_eq!(flat_map(&begin["spec"])["index"], v_int(1), "{k}");

        // GETKEYS finds the key (and only it), with or without options.
        for key in ["k", "{tag}other"] {
            let mut cmd = vec![name.to_string(), key.to_string()];
            cmd.extend(sample.iter().map(|s| s.to_string()));
            let mut full = vec!["COMMAND".to_string(), "GETKEYS".into()];
            full.extend(cmd);
            assert_eq!(srv.cmd_value(&full), v_bulks(&[key]), "{k}: {full:?}");
        }
    }
}

per_server!(hash_layout_is_the_documented_one);
fn hash_layout_is_the_documented_one(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    // Resolutions are stored canonically, finest first, whatever the input form.
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.CREATE",
            "L",
            "RESOLUTIONS",
            "60s:5",
            "1000ms:10",
            "168h:2"
        ]),
        v_ok()
    );
    let rs = res_list("1s:10 1m:5 1w:2");
    let h = hgetall(&srv, b"L");
    assert_eq!(
        h.keys().collect::<Vec<_>>(),
        ["_state", "_tally"],
        "{k}: {h:?}"
    );
    assert_eq!(h["_tally"], "counter 1s:10 1m:5 1w:2", "{k}");
    assert!(
        parse_state(&h["_state"], &rs).iter().all(|&(_, n)| n == 0),
        "{k}: {h:?}"
    );

    let t0 = server_ms(&srv);
    let incs = [(t0 - 2_000, 3), (t0, 4), (t0 - 1_500, -1)];
    for (ts, by) in incs {
        let v = srv.cmd_value(&[
            "TSCOUNTER.INCRBY",
            "L",
            &by.to_string(),
            "AT",
            &ts.to_string(),
        ]);
        assert!(matches!(v, Value::Int(_)), "{k}: {v:?}");
    }
    // `<res label>:<slot index>` = count, where index = floor(ts / res).
    let want = expected_fields(&rs, &incs);
    assert!(
        want.contains_key(&format!("1s:{}", slot(t0, 1000))),
        "{want:?}"
    );
    assert!(
        want.contains_key(&format!("1w:{}", slot(t0, 604_800_000))),
        "{want:?}"
    );
    let h = hgetall(&srv, b"L");
    assert_eq!(slot_fields(&srv, b"L"), want, "{k}");
    assert_eq!(
        h.len(),
        want.len() + 2,
        "{k}: only _tally, _state and slots: {h:?}"
    );
    // `_state`: per resolution the number of stored slots and a lower bound of their
    // indexes (all within `samples` of it).
    for ((lo, n), r) in parse_state(&h["_state"], &rs).into_iter().zip(&rs) {
        let idx: Vec<i64> = want
            .keys()
            .filter_map(|f| f.strip_prefix(&format!("{}:", label(r.ms))))
            .map(|i| i.parse().unwrap())
            .collect();
        assert_eq!(n, idx.len() as i64, "{k}: {r:?} in {h:?}");
        assert!(
            idx.iter().all(|&i| lo <= i && i < lo + r.samples),
            "{k}: {r:?} {h:?}"
        );
    }
    // INFO describes the same thing.
    let starts: Vec<i64> = want
        .keys()
        .map(|f| {
            let (l, i) = f.split_once(':').unwrap();
            let r = rs.iter().find(|r| label(r.ms) == l).unwrap();
            i.parse::<i64>().unwrap() * r.ms
        })
        .collect();
    let info = map_pairs(&srv.cmd_value(&["TSCOUNTER.INFO", "L"]));
    let names: Vec<&str> = info.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["resolutions", "slots", "first", "last", "memory"],
        "{k}"
    );
    assert_eq!(
        info[0].1,
        v_pairs(&[(1000, 10), (60_000, 5), (604_800_000, 2)]),
        "{k}"
    );
    assert_eq!(info[1].1, v_int(want.len() as i64), "{k}");
    assert_eq!(info[2].1, v_int(*starts.iter().min().unwrap()), "{k}");
    assert_eq!(info[3].1, v_int(*starts.iter().max().unwrap()), "{k}");
    assert!(
        matches!(info[4].1, Value::Int(m) if m > 100),
        "{k}: {:?}",
        info[4]
    );
}

per_server!(resp2_and_resp3_reply_shapes);
fn resp2_and_resp3_reply_shapes(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "r", "RESOLUTIONS", "1s:60", "1m:5"]),
        v_ok()
    );
    // An empty counter: first/last are nil.
    let memory = |v: &Value| {
        map_pairs(v)
            .into_iter()
            .find(|(n, _)| n == "memory")
            .map(|(_, m)| m)
            .unwrap()
    };
    let res_pairs = v_pairs(&[(1000, 60), (60_000, 5)]);
    let v2 = srv.cmd_value(&["TSCOUNTER.INFO", "r"]);
    let m = memory(&v2);
    assert_eq!(
        v2,
        v_arr(vec![
            v_bulk("resolutions"),
            res_pairs.clone(),
            v_bulk("slots"),
            v_int(0),
            v_bulk("first"),
            v_nil(),
            v_bulk("last"),
            v_nil(),
            v_bulk("memory"),
            m.clone(),
        ]),
        "{k}: RESP2 INFO is a flat array"
    );
    let v3 = srv.cmd_value_resp3(&["TSCOUNTER.INFO", "r"]);
    assert_eq!(
        v3,
        v_map(vec![
            (v_bulk("resolutions"), res_pairs.clone()),
            (v_bulk("slots"), v_int(0)),
            (v_bulk("first"), v_nil()),
            (v_bulk("last"), v_nil()),
            (v_bulk("memory"), memory(&v3)),
        ]),
        "{k}: RESP3 INFO is a map"
    );

    let t0 = server_ms(&srv);
    let ts = t0 - 3_000;
    let s = ts.to_string();
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "r", "6", "AT", &s]),
        v_int(6)
    );
    assert_eq!(
        srv.cmd_value_resp3(&["TSCOUNTER.INCRBY", "r", "1", "AT", &s]),
        v_int(7)
    );
    assert_eq!(
        srv.cmd_value_resp3(&["TSCOUNTER.INCR", "r", "AT", &s]),
        v_int(8)
    );
    let v3 = srv.cmd_value_resp3(&["TSCOUNTER.INFO", "r"]);
    let first = slot(ts, 60_000) * 60_000;
    let last = slot(ts, 1000) * 1000;
    assert_eq!(
        v3,
        v_map(vec![
            (v_bulk("resolutions"), res_pairs.clone()),
            (v_bulk("slots"), v_int(2)),
            (v_bulk("first"), v_int(first)),
            (v_bulk("last"), v_int(last)),
            (v_bulk("memory"), memory(&v3)),
        ]),
        "{k}"
    );
    // SUM: one window → integer, several → array, in both protocols.
    let s_at = t0.to_string();
    for resp3 in [false, true] {
        let q = |a: &[&str]| {
            if resp3 {
                srv.cmd_value_resp3(a)
            } else {
                srv.cmd_value(a)
            }
        };
        assert_eq!(
            q(&["TSCOUNTER.SUM", "r", "5s", "AT", &s_at]),
            v_int(8),
            "{k}"
        );
        assert_eq!(q(&["TSCOUNTER.SUM", "r", "5s", "AT", &s]), v_int(8), "{k}");
        assert_eq!(
            q(&["TSCOUNTER.SUM", "r", "1s", "AT", &s_at]),
            v_int(0),
            "{k}"
        );
        assert_eq!(
            q(&["TSCOUNTER.SUM", "r", "1s", "5s", "5m", "AT", &s_at]),
            v_ints(&[0, 8, 8]),
            "{k}"
        );
        assert_eq!(
            q(&["TSCOUNTER.SUM", "r", "5s", "5s", "AT", &s_at]),
            v_ints(&[8, 8]),
            "{k}"
        );
        // RANGE: [start, count] pairs, oldest first.
        assert_eq!(
            q(&["TSCOUNTER.RANGE", "r", "1s", "FROM", &s, "TO", &s]),
            v_pairs(&[(last, 8)]),
            "{k}"
        );
        assert_eq!(
            q(&[
                "TSCOUNTER.RANGE",
                "r",
                "1s",
                "FROM",
                &(ts - 1000).to_string(),
                "TO",
                &(ts + 1000).to_string(),
                "EMPTY"
            ]),
            v_pairs(&[(last - 1000, 0), (last, 8), (last + 1000, 0)]),
            "{k}"
        );
        assert_eq!(
            q(&["TSCOUNTER.RANGE", "r", "1m", "TO", &s]),
            v_pairs(&[(first, 8)]),
            "{k}"
        );
        assert_eq!(
            q(&[
                "TSCOUNTER.RANGE",
                "r",
                "1m",
                "FROM",
                &(ts + 60_000).to_string()
            ]),
            v_arr(vec![]),
            "{k}"
        );
        assert_eq!(
            q(&[
                "TSCOUNTER.RANGE",
                "r",
                "1s",
                "FROM",
                &s_at,
                "TO",
                &s,
                "EMPTY"
            ]),
            v_arr(vec![]),
            "{k}: FROM after TO"
        );
        assert_eq!(
            q(&["TSCOUNTER.CREATE", "r"]),
            v_err("ERR key already exists"),
            "{k}"
        );
        assert_eq!(q(&["TSCOUNTER.INFO", "nope"]), v_nil(), "{k}");
    }
    assert_eq!(
        srv.cmd_value_resp3(&["TSCOUNTER.CREATE", "r3"]),
        v_ok(),
        "{k}"
    );
}

per_server!(binary_and_empty_key_names);
fn binary_and_empty_key_names(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let keys: [&[u8]; 4] = [b"", b"\x00bin\xff\r\n key", "é:1s:5".as_bytes(), b"_tally"];
    for (n, key) in keys.iter().enumerate() {
        let key = *key;
        let q = |rest: &[&str]| {
            let mut c: Vec<&[u8]> = vec![rest[0].as_bytes(), key];
            c.extend(rest[1..].iter().map(|s| s.as_bytes()));
            srv.cmd_value(&c)
        };
        assert_eq!(
            q(&["TSCOUNTER.CREATE", "RESOLUTIONS", "1s:60", "1m:5"]),
            v_ok(),
            "{k} {n}"
        );
        let t0 = server_ms(&srv);
        let s = t0.to_string();
        assert_eq!(q(&["TSCOUNTER.INCRBY", "5", "AT", &s]), v_int(5), "{k} {n}");
        assert_eq!(q(&["TSCOUNTER.INCR", "AT", &s]), v_int(6), "{k} {n}");
        assert_eq!(
            q(&["TSCOUNTER.SUM", "1m", "5m", "AT", &s]),
            v_ints(&[6, 6]),
            "{k} {n}"
        );
        assert_eq!(
            q(&["TSCOUNTER.RANGE", "1m", "FROM", &s, "TO", &s]),
            v_pairs(&[(slot(t0, 60_000) * 60_000, 6)]),
            "{k} {n}"
        );
        let info = map_pairs(&q(&["TSCOUNTER.INFO"]));
        assert_eq!(info[1].1, v_int(2), "{k} {n}");
        assert_eq!(slot_fields(&srv, key).len(), 2, "{k} {n}");
        assert_eq!(
            q(&["TSCOUNTER.CREATE"]),
            v_err("ERR key already exists"),
            "{k} {n}"
        );
    }
    // The timer finds binary names too: a short-lived counter under an odd name goes.
    let odd = b"\xff\x00timer";
    assert_eq!(
        srv.cmd_value(&[&b"TSCOUNTER.CREATE"[..], odd, b"RESOLUTIONS", b"100ms:2"]),
        v_ok()
    );
    assert_eq!(srv.cmd_value(&[&b"TSCOUNTER.INCR"[..], odd]), v_int(1));
    assert!(
        wait_until(Duration::from_secs(10), || !exists(&srv, odd)),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["DBSIZE"]), v_int(keys.len() as i64), "{k}");
}

/// Runs `cmds` in one MULTI/EXEC (no timer can run in between); returns EXEC's replies.
fn transaction(srv: &Server, cmds: &[&[&str]]) -> Vec<Value> {
    let mut all = vec![args(&["MULTI"])];
    all.extend(cmds.iter().map(|c| args(c)));
    all.push(args(&["EXEC"]));
    let mut conn = srv.conn();
    let got = pipeline(&mut conn, &all);
    match got.last() {
        Some(Value::Array(replies)) => replies.clone(),
        other => panic!("{}: EXEC gave {other:?} ({got:?})", srv.kind().name),
    }
}

fn exists_in(srv: &Server, db: i64, key: &str) -> bool {
    let mut c = srv.conn();
    redis::cmd("SELECT").arg(db).query::<()>(&mut c).unwrap();
    redis::cmd("EXISTS").arg(key).query::<i64>(&mut c).unwrap() == 1
}

fn hkeys_in(srv: &Server, db: i64, key: &str) -> Vec<String> {
    let mut c = srv.conn();
    redis::cmd("SELECT").arg(db).query::<()>(&mut c).unwrap();
    redis::cmd("HKEYS")
        .arg(key)
        .query::<Vec<String>>(&mut c)
        .unwrap()
}

per_server!(keyspace_operations_carry_the_counter);
/// The counter lives in its hash: RENAME, DUMP/RESTORE, COPY, MOVE, SWAPDB, DEL and
/// FLUSHALL carry or remove it whole, and reads never answer from stale state.
fn keyspace_operations_carry_the_counter(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let t = server_ms(&srv).to_string();
    let sum = |key: &str| srv.cmd_value(&["TSCOUNTER.SUM", key, "1h", "AT", &t]);
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "a", "RESOLUTIONS", "1m:60", "1h:24"]),
        v_ok()
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "a", "5", "AT", &t]),
        v_int(5)
    );
    assert_eq!(sum("a"), v_int(5), "{k}");
    assert_eq!(srv.cmd_value(&["RENAME", "a", "b"]), v_ok());
    assert_eq!(sum("a"), v_int(0), "{k}");
    assert_eq!(sum("b"), v_int(5), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "b", "2", "AT", &t]),
        v_int(7)
    );
    assert_eq!(sum("b"), v_int(7), "{k}");
    let payload = srv.cmd_value(&["DUMP", "b"]);
    let Value::BulkString(payload) = payload else {
        panic!("{k}: {payload:?}")
    };
    assert_eq!(
        srv.cmd_value(&[&b"RESTORE"[..], b"c", b"0", &payload]),
        v_ok()
    );
    assert_eq!(sum("c"), v_int(7), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "c", "1", "AT", &t]),
        v_int(8)
    );
    assert_eq!((sum("b"), sum("c")), (v_int(7), v_int(8)), "{k}");
    assert_eq!(srv.cmd_value(&["COPY", "c", "d"]), v_int(1));
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "d", "10", "AT", &t]),
        v_int(18)
    );
    assert_eq!((sum("c"), sum("d")), (v_int(8), v_int(18)), "{k}");
    assert_eq!(srv.cmd_value(&["DEL", "b"]), v_int(1));
    assert_eq!(sum("b"), v_int(0), "{k}");
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INFO", "b"]), v_nil(), "{k}");
    assert_eq!(srv.cmd_value(&["MOVE", "c", "1"]), v_int(1));
    assert_eq!(sum("c"), v_int(0), "{k}");
    assert_eq!(srv.cmd_value(&["SWAPDB", "0", "1"]), v_ok());
    assert_eq!(sum("c"), v_int(8), "{k}: moved then swapped back into db 0");
    assert_eq!(sum("d"), v_int(0), "{k}");
    assert_eq!(srv.cmd_value(&["FLUSHALL"]), v_ok());
    assert_eq!(sum("c"), v_int(0), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "c", "4", "AT", &t]),
        v_int(4)
    );
    assert_eq!(sum("c"), v_int(4), "{k}");
    assert_eq!(
        info_resolutions(&srv, "c"),
        v_pairs(
            &res_list(DEFAULT_RES)
                .iter()
                .map(|r| (r.ms, r.samples))
                .collect::<Vec<_>>()
        ),
        "{k}: recreated with the defaults"
    );
    // A user's own edits of the hash are what reads see, also for a counter large
    // enough to be cached by reads (31 minute slots), edited after a read.
    let t_ms: i64 = t.parse().unwrap();
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "u", "RESOLUTIONS", "1m:60", "1h:24"]),
        v_ok()
    );
    for i in 1..=30 {
        let ts = (t_ms - i * 60_000).to_string();
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.INCRBY", "u", "1", "AT", &ts]),
            v_int(1)
        );
    }
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "u", "18", "AT", &t]),
        v_int(18)
    );
    assert_eq!(sum("u"), v_int(48), "{k}");
    let minute = format!("1m:{}", slot(t_ms, 60_000));
    let hour = format!("1h:{}", slot(t_ms, 3_600_000));
    assert_eq!(srv.cmd_value(&["HSET", "u", &minute, "100"]), v_int(0));
    assert_eq!(
        sum("u"),
        v_int(130),
        "{k}: SUM after a user's HSET of a slot field"
    );
    assert_eq!(srv.cmd_value(&["HSET", "u", &hour, "7"]), v_int(0));
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "u", "1h", "1d", "AT", &t]),
        {
            let Value::Int(day) = srv.cmd_value(&["TSCOUNTER.SUM", "u", "1d", "AT", &t]) else {
                panic!("{k}")
            };
            v_ints(&[130, day])
        }
    );
    assert_eq!(srv.cmd_value(&["HDEL", "u", &minute]), v_int(1));
    assert_eq!(sum("u"), v_int(30), "{k}: after HDEL");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "u", "2", "AT", &t]),
        v_int(2),
        "{k}"
    );
    assert_eq!(sum("u"), v_int(32), "{k}");
}

per_server!(the_timer_follows_counters_that_move);
/// Counters that arrive under a new name or in another database are still trimmed by the
/// timer. Each arrives in a MULTI/EXEC with its write, so its short slot is still there.
fn the_timer_follows_counters_that_move(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let create = |key: &'static str| -> Vec<&'static str> {
        vec!["TSCOUNTER.CREATE", key, "RESOLUTIONS", "100ms:2", "1h:2"]
    };
    let ok = |v: &[Value]| v.iter().all(|x| error_text(x).is_none());
    let r = transaction(
        &srv,
        &[
            &create("a"),
            &["TSCOUNTER.INCR", "a"],
            &["RENAME", "a", "renamed"],
        ],
    );
    assert!(ok(&r), "{k}: {r:?}");
    let r = transaction(
        &srv,
        &[
            &create("b"),
            &["TSCOUNTER.INCR", "b"],
            &["COPY", "b", "copied"],
        ],
    );
    assert!(ok(&r), "{k}: {r:?}");
    let r = transaction(
        &srv,
        &[&create("c"), &["TSCOUNTER.INCR", "c"], &["MOVE", "c", "3"]],
    );
    assert!(ok(&r), "{k}: {r:?}");
    let r = transaction(
        &srv,
        &[
            &create("e"),
            &["TSCOUNTER.INCR", "e"],
            &["SWAPDB", "0", "4"],
            &["SWAPDB", "0", "4"],
            &["MOVE", "e", "5"],
            &["SWAPDB", "5", "6"],
        ],
    );
    assert!(ok(&r), "{k}: {r:?}");
    let r = transaction(
        &srv,
        &[&create("d"), &["TSCOUNTER.INCR", "d"], &["DUMP", "d"]],
    );
    let Value::BulkString(payload) = &r[2] else {
        panic!("{k}: {r:?}")
    };
    // RESTORE of a payload whose 100ms slot has long expired.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        srv.cmd_value(&[&b"RESTORE"[..], b"restored", b"0", payload]),
        v_ok(),
        "{k}"
    );
    let short = |db: i64, key: &str| {
        hkeys_in(&srv, db, key)
            .iter()
            .any(|f| f.starts_with("100ms:"))
    };
    let places = [
        (0, "renamed"),
        (0, "copied"),
        (0, "b"),
        (3, "c"),
        (6, "e"),
        (0, "restored"),
    ];
    assert!(
        wait_until(Duration::from_secs(10), || places
            .iter()
            .all(|&(db, key)| !short(db, key))),
        "{k}: not trimmed: {:?}",
        places
            .iter()
            .map(|&(db, key)| (db, key, hkeys_in(&srv, db, key)))
            .collect::<Vec<_>>()
    );
    for (db, key) in places {
        assert!(
            exists_in(&srv, db, key),
            "{k}: {key} in db {db} keeps its hour slot"
        );
        assert_eq!(
            hkeys_in(&srv, db, key).len(),
            3,
            "{k}: {key}: _tally, _state, 1h"
        );
    }
}
