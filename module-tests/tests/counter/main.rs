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
//!
//! Files: `model.rs` (the model-based workload), `errors.rs`, `config.rs` (creation and
//! settings), `trimming.rs`, `replies.rs` (command info, layout, reply shapes, key
//! names), `keyspace.rs` (keyspace operations and the timer). This file holds what they
//! share: the error texts, the reference model's resolutions and slot arithmetic, and
//! the reply helpers.

use module_tests::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const OUTSIDE: &str = "ERR timestamp is outside the kept range";
const FUTURE: &str = "ERR timestamp is too far in the future";
const DEFAULT_RES: &str = "1s:120 5s:120 1m:120 5m:120 1h:120 5h:120 1d:120";

/// How long (server time) a model batch may take before its classification of timestamps
/// could change. Every batch asserts it stayed inside.
const MARGIN_MS: i64 = 20_000;

mod config;
mod encoding;
mod errors;
mod in_place;
mod keyspace;
mod model;
mod packed;
mod replies;
mod trimming;
mod upgrade;

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

/// `_state` as documented in src/counter/mod.rs: `<ref> <d>:<n> ...`, one `d:n` per resolution
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
