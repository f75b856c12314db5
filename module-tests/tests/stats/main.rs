//! STATS.* integration tests, on every server kind: accuracy against a two-pass
//! reference, windows across periods, errors, reply shapes in RESP2 and RESP3, REPORT,
//! replication, AOF/RDB reloads, timer expiry, cluster key declaration and ACL.
//!
//! Period-sensitive tests use 1h periods and `AT` timestamps relative to the start of the
//! current hour; each runs inside [`in_one_period`], which repeats the body in the rare
//! case the hour changed while it ran, so no test depends on timing.
//!
//! Files: `accuracy.rs`, `across.rs` (STATS.MGET and STATS.MQUANTILE against the union
//! of every value), `cdf.rs` (STATS.CDF against a log of every value), `windows.rs`,
//! `errors.rs`, `replies.rs` (reply shapes, REPORT), `report_by.rs` (REPORT ... BY),
//! `persistence.rs` (replica, reloads, timer), `storage.rs` (memory, damaged fields). This
//! file holds what they share: the reference statistics and the reply helpers.

use std::time::Duration;

use module_tests::*;

const HOUR: i64 = 3_600_000;

// ------------------------------------------------------------------------- helpers

/// Two-pass reference statistics of a data set.
struct Reference {
    count: usize,
    sum: f64,
    min: f64,
    max: f64,
    mean: f64,
    stddev: f64,
    sorted: Vec<f64>,
}

fn reference(xs: &[f64]) -> Reference {
    // Neumaier-compensated sum, then a corrected two-pass variance.
    let (mut sum, mut comp) = (0.0f64, 0.0f64);
    for &x in xs {
        let t = sum + x;
        comp += if sum.abs() >= x.abs() {
            (sum - t) + x
        } else {
            (x - t) + sum
        };
        sum = t;
    }
    let sum = sum + comp;
    let n = xs.len() as f64;
    let mean = sum / n;
    let (mut s2, mut s1) = (0.0, 0.0);
    for &x in xs {
        let d = x - mean;
        s2 += d * d;
        s1 += d;
    }
    let var = if xs.len() > 1 {
        (s2 - s1 * s1 / n) / (n - 1.0)
    } else {
        0.0
    };
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    Reference {
        count: xs.len(),
        sum,
        min: sorted[0],
        max: sorted[sorted.len() - 1],
        mean,
        stddev: var.max(0.0).sqrt(),
        sorted,
    }
}

impl Reference {
    /// Nearest-rank quantile: the value of rank max(1, ceil(q n)).
    fn quantile(&self, q: f64) -> f64 {
        let n = self.sorted.len();
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        self.sorted[rank - 1]
    }
}

fn rel(a: f64, b: f64) -> f64 {
    if a == b {
        0.0
    } else {
        (a - b).abs() / a.abs().max(b.abs())
    }
}

/// A double from a RESP2 bulk string or a RESP3 double.
fn num(v: &Value) -> f64 {
    match v {
        Value::Double(d) => *d,
        Value::BulkString(b) => std::str::from_utf8(b).unwrap().parse().unwrap(),
        Value::Int(i) => *i as f64,
        other => panic!("expected a number, got {other:?}"),
    }
}

fn field(v: &Value, name: &str) -> Value {
    map_pairs(v)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no field {name} in {v:?}"))
}

const GET_FIELDS: [&str; 9] = [
    "count", "sum", "min", "max", "mean", "stddev", "p50", "p90", "p99",
];

/// Runs `body(start of the current hour)` until it ran within one hour of server time
/// (at most 3 tries; FLUSHALL before each), so hour-relative assertions cannot flake.
fn in_one_period<T>(srv: &Server, mut body: impl FnMut(i64) -> T) -> T {
    for _ in 0..3 {
        assert_eq!(srv.cmd_value(&["FLUSHALL"]), v_ok());
        let before = server_ms(srv).div_euclid(HOUR) * HOUR;
        let out = body(before);
        if server_ms(srv).div_euclid(HOUR) * HOUR == before {
            return out;
        }
    }
    panic!("the hour changed during three consecutive runs");
}

/// Sends `values` to `key` in batches (text is Rust's shortest round-trip form, so the
/// server parses the identical doubles), with an optional AT.
fn add_all(srv: &Server, key: &str, values: &[f64], at: Option<i64>) {
    for chunk in values.chunks(500) {
        let mut args: Vec<String> = vec!["STATS.ADD".into(), key.into()];
        args.extend(chunk.iter().map(|v| format!("{v}")));
        if let Some(at) = at {
            args.push("AT".into());
            args.push(at.to_string());
        }
        let v = srv.cmd_value(&args);
        assert!(matches!(v, Value::Int(_)), "{}: {v:?}", srv.kind().name);
    }
}

/// Checks a GET reply (either protocol) against the reference of `xs`.
fn check_get(ctx: &str, reply: &Value, xs: &[f64]) {
    let r = reference(xs);
    let names: Vec<String> = map_pairs(reply).into_iter().map(|(k, _)| k).collect();
    assert_eq!(names, GET_FIELDS, "{ctx}");
    assert_eq!(field(reply, "count"), v_int(r.count as i64), "{ctx}");
    assert_eq!(num(&field(reply, "min")), r.min, "{ctx} min");
    assert_eq!(num(&field(reply, "max")), r.max, "{ctx} max");
    let sum = num(&field(reply, "sum"));
    assert!(
        rel(sum, r.sum) <= 1e-12 || (sum - r.sum).abs() < 1e-9,
        "{ctx} sum {sum} vs {}",
        r.sum
    );
    let mean = num(&field(reply, "mean"));
    assert!(
        rel(mean, r.mean) <= 1e-12 || (mean - r.mean).abs() < 1e-12,
        "{ctx} mean {mean} vs {}",
        r.mean
    );
    let sd = num(&field(reply, "stddev"));
    assert!(
        rel(sd, r.stddev) <= 1e-9,
        "{ctx} stddev {sd} vs {}",
        r.stddev
    );
    for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
        check_quantile(
            &format!("{ctx} {name}"),
            num(&field(reply, name)),
            r.quantile(q),
        );
    }
}

fn check_quantile(ctx: &str, est: f64, exact: f64) {
    if exact == 0.0 {
        assert_eq!(est, 0.0, "{ctx}");
    } else {
        let err = (est - exact).abs() / exact.abs();
        assert!(
            err <= 0.01,
            "{ctx}: estimate {est}, exact {exact}, error {err}"
        );
    }
}

fn datasets() -> Vec<(&'static str, Vec<f64>)> {
    let mut rng = Rng(2024);
    let n = 6000;
    let mut mixed: Vec<f64> = (0..n).map(|_| rng.normal() * 100.0).collect();
    for i in (0..n).step_by(9) {
        mixed[i] = 0.0;
    }
    vec![
        ("lognormal", (0..n).map(|_| rng.lognormal()).collect()),
        (
            "uniform",
            (0..n).map(|_| 1.0 + 999.0 * rng.uniform()).collect(),
        ),
        ("constant", vec![42.5; n]),
        ("negative", (0..n).map(|_| -rng.lognormal()).collect()),
        ("mixed-sign", mixed),
    ]
}

mod accuracy;
mod across;
mod cdf;
mod errors;
mod persistence;
mod replies;
mod report_by;
mod storage;
mod windows;
