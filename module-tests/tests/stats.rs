//! STATS.* integration tests, on every server kind: accuracy against a two-pass
//! reference, windows across periods, errors, reply shapes in RESP2 and RESP3, REPORT,
//! replication, AOF/RDB reloads, timer expiry, cluster key declaration and ACL.
//!
//! Period-sensitive tests use 1h periods and `AT` timestamps relative to the start of the
//! current hour; each runs inside [`in_one_period`], which repeats the body in the rare
//! case the hour changed while it ran, so no test depends on timing.

use std::time::Duration;

use module_tests::*;

const HOUR: i64 = 3_600_000;
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

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

// --------------------------------------------------------------------------- tests

per_server!(accuracy_against_two_pass_reference);
/// count/sum/min/max/mean/stddev against a two-pass reference and quantiles within 1%,
/// for several distributions, per period and merged over a window of three periods.
fn accuracy_against_two_pass_reference(kind: &ServerKind) {
    let srv = Server::start(kind);
    for (name, xs) in datasets() {
        in_one_period(&srv, |base| {
            let ctx = format!("{} {name}", kind.name);
            let third = xs.len() / 3;
            let (a, rest) = xs.split_at(third);
            let (b, c) = rest.split_at(third);
            add_all(&srv, "s", a, Some(base - 2 * HOUR + 17));
            add_all(&srv, "s", b, Some(base - HOUR + 123_456));
            add_all(&srv, "s", c, None);
            check_get(
                &format!("{ctx} current"),
                &srv.cmd_value(&["STATS.GET", "s"]),
                c,
            );
            check_get(
                &format!("{ctx} 1h"),
                &srv.cmd_value(&["STATS.GET", "s", "WINDOW", "1h"]),
                c,
            );
            let bc = [b, c].concat();
            check_get(
                &format!("{ctx} 2h"),
                &srv.cmd_value(&["STATS.GET", "s", "WINDOW", "2h"]),
                &bc,
            );
            check_get(
                &format!("{ctx} 3h"),
                &srv.cmd_value(&["STATS.GET", "s", "WINDOW", "180m"]),
                &xs,
            );
            check_get(
                &format!("{ctx} resp3"),
                &srv.cmd_value_resp3(&["STATS.GET", "s", "WINDOW", "3h"]),
                &xs,
            );

            let qs = [0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0];
            let r = reference(&xs);
            let mut args = vec!["STATS.QUANTILE".to_string(), "s".into()];
            args.extend(qs.iter().map(|q| q.to_string()));
            args.extend(["WINDOW".to_string(), "3h".to_string()]);
            let Value::Array(got) = srv.cmd_value(&args) else {
                panic!("{ctx}")
            };
            assert_eq!(got.len(), qs.len(), "{ctx}");
            for (q, v) in qs.iter().zip(&got) {
                check_quantile(&format!("{ctx} q={q}"), num(v), r.quantile(*q));
            }
            // q = 0 and q = 1 are the exact extremes.
            assert_eq!(num(&got[0]), r.min, "{ctx}");
            assert_eq!(num(&got[qs.len() - 1]), r.max, "{ctx}");
        });
    }
    srv.assert_alive();
}

per_server!(stddev_near_1e9_is_exact);
/// Values near 1e9 with a spread of 1: sum-of-squares arithmetic would lose everything;
/// the stored moments must stay within 1e-6 (here: 1e-9) of the two-pass stddev, also
/// when several periods are merged.
fn stddev_near_1e9_is_exact(kind: &ServerKind) {
    let srv = Server::start(kind);
    in_one_period(&srv, |base| {
        let mut rng = Rng(7);
        let xs: Vec<f64> = (0..9000).map(|_| 1e9 + rng.uniform()).collect();
        for (i, chunk) in xs.chunks(3000).enumerate() {
            add_all(&srv, "big", chunk, Some(base - i as i64 * HOUR));
        }
        let reply = srv.cmd_value(&["STATS.GET", "big", "WINDOW", "3h"]);
        check_get(&kind.name, &reply, &xs);
        let r = reference(&xs);
        let sd = num(&field(&reply, "stddev"));
        assert!(rel(sd, r.stddev) <= 1e-9, "{sd} vs {}", r.stddev);
        assert!((sd - (1.0f64 / 12.0).sqrt()).abs() < 0.01, "{sd}");
    });
}

per_server!(windows_and_ranges_across_periods);
/// WINDOW, RANGE (FROM/TO, oldest first, exact period starts) and the ADD reply.
fn windows_and_ranges_across_periods(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    in_one_period(&srv, |base| {
        let at = |t: i64| t.to_string();
        // ADD replies with the count of the period that received the values.
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "1", "2", "3", "AT", &at(base - 2 * HOUR)]),
            v_int(3),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "4", "AT", &at(base - 2 * HOUR + HOUR - 1)]),
            v_int(4),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "10", "at", &at(base - HOUR + 5)]),
            v_int(1),
            "{k}"
        );
        // Nothing in the current period yet.
        assert_eq!(srv.cmd_value(&["STATS.GET", "w"]), v_nil(), "{k}");
        assert_eq!(
            srv.cmd_value(&["STATS.QUANTILE", "w", "0.5"]),
            v_nil(),
            "{k}"
        );
        assert_eq!(
            field(&srv.cmd_value(&["STATS.GET", "w", "WINDOW", "2h"]), "count"),
            v_int(1),
            "{k}"
        );
        assert_eq!(
            field(&srv.cmd_value(&["STATS.GET", "w", "WINDOW", "3h"]), "count"),
            v_int(5),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "20", "30"]),
            v_int(2),
            "{k}"
        );
        let g = srv.cmd_value(&["STATS.GET", "w", "WINDOW", "24h"]);
        assert_eq!(field(&g, "count"), v_int(7), "{k}");
        assert_eq!(num(&field(&g, "sum")), 70.0, "{k}");
        assert_eq!(num(&field(&g, "mean")), 10.0, "{k}");
        assert_eq!(num(&field(&g, "min")), 1.0, "{k}");
        assert_eq!(num(&field(&g, "max")), 30.0, "{k}");

        let starts = |v: Value| -> Vec<i64> {
            let Value::Array(rows) = v else {
                panic!("{k}: {v:?}")
            };
            rows.iter()
                .map(|row| match row {
                    Value::Array(p) if p.len() == 2 => match p[0] {
                        Value::Int(s) => s,
                        _ => panic!("{k}: {row:?}"),
                    },
                    _ => panic!("{k}: {row:?}"),
                })
                .collect()
        };
        let all = vec![base - 2 * HOUR, base - HOUR, base];
        assert_eq!(starts(srv.cmd_value(&["STATS.RANGE", "w"])), all, "{k}");
        assert_eq!(
            starts(srv.cmd_value(&["STATS.RANGE", "w", "FROM", &at(base - HOUR)])),
            all[1..],
            "{k}"
        );
        assert_eq!(
            starts(srv.cmd_value(&["STATS.RANGE", "w", "TO", &at(base - HOUR)])),
            all[..2],
            "{k}"
        );
        // FROM/TO select the periods containing them.
        assert_eq!(
            starts(srv.cmd_value(&[
                "STATS.RANGE",
                "w",
                "FROM",
                &at(base - 90 * 60_000),
                "TO",
                &at(base - 30 * 60_000)
            ])),
            all[..2],
            "{k}"
        );
        assert_eq!(
            starts(srv.cmd_value(&["STATS.RANGE", "w", "FROM", &at(base + HOUR)])),
            Vec::<i64>::new(),
            "{k}"
        );
        // Each row's map is that period's statistics.
        let Value::Array(rows) = srv.cmd_value(&["STATS.RANGE", "w"]) else {
            panic!()
        };
        let Value::Array(first) = &rows[0] else {
            panic!()
        };
        assert_eq!(field(&first[1], "count"), v_int(4), "{k}");
        assert_eq!(num(&field(&first[1], "mean")), 2.5, "{k}");
        assert_eq!(
            num(&field(&first[1], "stddev")),
            (5.0f64 / 3.0).sqrt(),
            "{k}"
        );

        // AT older than the kept range (24 periods by default) is refused.
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "1", "AT", &at(base - 24 * HOUR)]),
            v_err("ERR timestamp is outside the kept range"),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "1", "AT", &at(base - 23 * HOUR)]),
            v_int(1),
            "{k}"
        );
        // A little in the future is now; too far is refused.
        let now = server_ms(&srv);
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "1", "AT", &at(now + 5_000)]),
            v_int(3),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "1", "AT", &at(now + 3_600_000)]),
            v_err("ERR timestamp is too far in the future"),
            "{k}"
        );
        let info = srv.cmd_value(&["STATS.INFO", "w"]);
        assert_eq!(field(&info, "period"), v_int(HOUR), "{k}");
        assert_eq!(field(&info, "keep"), v_int(24), "{k}");
        assert_eq!(field(&info, "periods"), v_int(4), "{k}");
        // The moments field is the 57-byte binary form: tag 2, count, sum, ...
        let m: Vec<u8> = srv.query(&["HGET", "w", &format!("{}:m", base - 2 * HOUR)]);
        assert_eq!(m.len(), 57, "{k}: {m:?}");
        assert_eq!(m[0], 2, "{k}: {m:?}");
        assert_eq!(m[1..9], 4u64.to_le_bytes(), "{k}: count");
        assert_eq!(m[9..17], 10f64.to_bits().to_le_bytes(), "{k}: sum");
        let marker: String = srv.query(&["HGET", "w", "_tally"]);
        assert_eq!(marker, "stats 1h 24", "{k}");
    });
}

per_server!(errors_are_exact_and_change_nothing);
/// Every error of the family, with its exact text, and nothing written by a failed call.
fn errors_are_exact_and_change_nothing(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    let e =
        |args: &[&str], text: &str| assert_eq!(srv.cmd_value(args), v_err(text), "{k}: {args:?}");
    let not_float = "ERR value is not a valid float";
    let not_int = "ERR value is not an integer or out of range";
    let syntax = "ERR syntax error";
    e(&["STATS.ADD", "s", "inf"], not_float);
    e(&["STATS.ADD", "s", "-inf"], not_float);
    e(&["STATS.ADD", "s", "nan"], not_float);
    e(&["STATS.ADD", "s", "1", "abc"], not_float);
    e(&["STATS.ADD", "s", "1", "2", "1e999"], not_float);
    e(&["STATS.ADD", "s", "AT", "5"], not_float);
    e(
        &["STATS.ADD", "s", "1e101"],
        "ERR value is out of range (the limit is 1e100 in magnitude)",
    );
    e(&["STATS.ADD", "s", "1", "AT"], syntax);
    e(&["STATS.ADD", "s", "1", "AT", "x"], not_int);
    e(&["STATS.ADD", "s", "1", "AT", "5", "AT", "6"], syntax);
    e(&["STATS.ADD", "s", "1", "REPORT", "rk"], syntax);
    e(
        &["STATS.ADD", "s", "1", "REPORT", "rk", "m", "KEEP"],
        syntax,
    );
    e(
        &["STATS.ADD", "s", "1", "REPORT", "rk", "m", "KEEP", "x"],
        not_int,
    );
    e(
        &["STATS.ADD", "s", "1", "REPORT", "rk", "m", "KEEP", "0"],
        "ERR REPORT KEEP must be a positive integer",
    );
    e(&["STATS.ADD", "s", "1", "REPORT", "rk", "m", "FOO"], syntax);
    e(
        &[
            "STATS.ADD",
            "s",
            "1",
            "REPORT",
            "rk",
            "m",
            "REPORT",
            "rk",
            "m",
        ],
        syntax,
    );
    e(
        &["STATS.ADD", "s", "1", "AT", "0"],
        "ERR timestamp is outside the kept range",
    );
    e(
        &["STATS.ADD", "s"],
        "ERR wrong number of arguments for 'stats.add' command",
    );
    e(
        &["STATS.CREATE", "c", "PERIOD", "0"],
        "ERR invalid duration '0'",
    );
    e(
        &["STATS.CREATE", "c", "PERIOD", "5x"],
        "ERR invalid duration '5x'",
    );
    e(&["STATS.CREATE", "c", "PERIOD"], syntax);
    e(
        &["STATS.CREATE", "c", "KEEP", "0"],
        "ERR KEEP must be between 1 and 10000",
    );
    e(
        &["STATS.CREATE", "c", "KEEP", "10001"],
        "ERR KEEP must be between 1 and 10000",
    );
    e(&["STATS.CREATE", "c", "KEEP", "x"], not_int);
    e(&["STATS.CREATE", "c", "KEEP", "2", "KEEP", "3"], syntax);
    e(&["STATS.CREATE", "c", "FOO"], syntax);
    e(&["STATS.GET", "s", "WINDOW"], syntax);
    e(&["STATS.GET", "s", "FOO"], syntax);
    e(
        &["STATS.GET", "s", "WINDOW", "5x"],
        "ERR invalid duration '5x'",
    );
    let window_err = "ERR WINDOW must be a multiple of the period (1h) of at most 24 periods";
    e(&["STATS.GET", "s", "WINDOW", "90m"], window_err);
    e(&["STATS.GET", "s", "WINDOW", "25h"], window_err);
    e(
        &["STATS.QUANTILE", "s", "1.5"],
        "ERR quantile must be between 0 and 1",
    );
    e(
        &["STATS.QUANTILE", "s", "-0.1"],
        "ERR quantile must be between 0 and 1",
    );
    e(&["STATS.QUANTILE", "s", "abc"], not_float);
    e(&["STATS.QUANTILE", "s", "nan"], not_float);
    e(&["STATS.QUANTILE", "s", "WINDOW", "1h"], not_float);
    e(
        &["STATS.QUANTILE", "s", "0.5", "WINDOW", "2h", "WINDOW", "1h"],
        syntax,
    );
    e(
        &["STATS.QUANTILE", "s"],
        "ERR wrong number of arguments for 'stats.quantile' command",
    );
    e(&["STATS.RANGE", "s", "FROM"], syntax);
    e(&["STATS.RANGE", "s", "FROM", "x"], not_int);
    e(&["STATS.RANGE", "s", "BAR", "1"], syntax);
    e(
        &["STATS.INFO", "s", "x"],
        "ERR wrong number of arguments for 'stats.info' command",
    );
    assert_eq!(
        srv.query::<i64, _>(&["DBSIZE"]),
        0,
        "{k}: a failed command wrote something"
    );

    // WRONGTYPE: another type, a plain hash, another family's hash.
    srv.query::<(), _>(&["SET", "str", "x"]);
    srv.query::<(), _>(&["HSET", "plain", "f", "v"]);
    srv.query::<(), _>(&["HSET", "other", "_tally", "counter 1s:10"]);
    srv.query::<(), _>(&["HSET", "badmarker", "_tally", "stats 0 0"]);
    for key in ["str", "plain", "other", "badmarker"] {
        e(&["STATS.ADD", key, "1"], WRONGTYPE);
        e(&["STATS.GET", key], WRONGTYPE);
        e(&["STATS.QUANTILE", key, "0.5"], WRONGTYPE);
        e(&["STATS.RANGE", key], WRONGTYPE);
        e(&["STATS.INFO", key], WRONGTYPE);
    }
    e(&["STATS.CREATE", "str"], "ERR key already exists");
    assert_eq!(
        srv.cmd_value(&["STATS.CREATE", "c", "PERIOD", "1m", "KEEP", "3"]),
        v_ok(),
        "{k}"
    );
    e(&["STATS.CREATE", "c"], "ERR key already exists");
    e(
        &["STATS.GET", "c", "WINDOW", "4m"],
        "ERR WINDOW must be a multiple of the period (1m) of at most 3 periods",
    );
    // A missing key is validated against the default settings.
    e(&["STATS.GET", "missing", "WINDOW", "25h"], window_err);

    // WRONGTYPE on the REPORT key, checked before anything is written.
    let before = srv.dump_keyspace();
    e(
        &["STATS.ADD", "fresh", "1", "REPORT", "str", "m"],
        WRONGTYPE,
    );
    e(
        &["STATS.ADD", "fresh", "1", "REPORT", "plain", "m"],
        WRONGTYPE,
    );
    e(&["STATS.ADD", "c", "1", "REPORT", "c", "m"], WRONGTYPE);
    e(
        &["STATS.ADD", "fresh", "1", "REPORT", "fresh", "m"],
        WRONGTYPE,
    );
    assert_eq!(
        srv.dump_keyspace(),
        before,
        "{k}: a failed REPORT wrote something"
    );
    srv.assert_alive();
}

per_server!(reply_shapes_resp2_and_resp3);
/// Exact reply shapes: RESP2 maps are flat arrays and doubles bulk strings; RESP3 has
/// maps and doubles. Missing keys: GET/QUANTILE/INFO nil, RANGE empty.
fn reply_shapes_resp2_and_resp3(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    assert_eq!(srv.cmd_value(&["STATS.GET", "nokey"]), v_nil(), "{k}");
    assert_eq!(srv.cmd_value_resp3(&["STATS.GET", "nokey"]), v_nil(), "{k}");
    assert_eq!(
        srv.cmd_value(&["STATS.QUANTILE", "nokey", "0.5"]),
        v_nil(),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["STATS.RANGE", "nokey"]),
        v_arr(vec![]),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["STATS.INFO", "nokey"]), v_nil(), "{k}");
    assert_eq!(
        srv.cmd_value_resp3(&["STATS.INFO", "nokey"]),
        v_nil(),
        "{k}"
    );

    in_one_period(&srv, |base| {
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "s", "5", "5", "5"]),
            v_int(3),
            "{k}"
        );
        let names = GET_FIELDS;
        let r2 = |vals: [&str; 8]| {
            let mut items = vec![v_bulk("count"), v_int(3)];
            for (n, v) in names[1..].iter().zip(vals) {
                items.push(v_bulk(n));
                items.push(v_bulk(v));
            }
            v_arr(items)
        };
        let r3 = |vals: [f64; 8]| {
            let mut items = vec![(v_bulk("count"), v_int(3))];
            for (n, v) in names[1..].iter().zip(vals) {
                items.push((v_bulk(n), v_double(v)));
            }
            v_map(items)
        };
        assert_eq!(
            srv.cmd_value(&["STATS.GET", "s"]),
            r2(["15", "5", "5", "5", "0", "5", "5", "5"]),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value_resp3(&["STATS.GET", "s"]),
            r3([15.0, 5.0, 5.0, 5.0, 0.0, 5.0, 5.0, 5.0]),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value(&["STATS.QUANTILE", "s", "0", "0.5", "1"]),
            v_bulks(&["5", "5", "5"]),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value_resp3(&["STATS.QUANTILE", "s", "0.5", "0.99"]),
            v_arr(vec![v_double(5.0), v_double(5.0)]),
            "{k}"
        );
        let range2 = srv.cmd_value(&["STATS.RANGE", "s"]);
        assert_eq!(
            range2,
            v_arr(vec![v_arr(vec![
                v_int(base),
                r2(["15", "5", "5", "5", "0", "5", "5", "5"])
            ])]),
            "{k}"
        );
        let range3 = srv.cmd_value_resp3(&["STATS.RANGE", "s"]);
        assert_eq!(
            range3,
            v_arr(vec![v_arr(vec![
                v_int(base),
                r3([15.0, 5.0, 5.0, 5.0, 0.0, 5.0, 5.0, 5.0])
            ])]),
            "{k}"
        );
        // An empty window of an existing key.
        assert_eq!(srv.cmd_value(&["STATS.CREATE", "e"]), v_ok(), "{k}");
        assert_eq!(
            srv.cmd_value(&["STATS.GET", "e", "WINDOW", "24h"]),
            v_nil(),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value_resp3(&["STATS.QUANTILE", "e", "0.5"]),
            v_nil(),
            "{k}"
        );
        assert_eq!(srv.cmd_value(&["STATS.RANGE", "e"]), v_arr(vec![]), "{k}");
        let info2 = srv.cmd_value(&["STATS.INFO", "e"]);
        let Value::Array(items) = &info2 else {
            panic!("{k}: {info2:?}")
        };
        assert_eq!(
            items[..6],
            [
                v_bulk("period"),
                v_int(HOUR),
                v_bulk("keep"),
                v_int(24),
                v_bulk("periods"),
                v_int(0)
            ],
            "{k}"
        );
        assert_eq!(items[6], v_bulk("memory"), "{k}");
        assert!(matches!(items[7], Value::Int(m) if m > 0), "{k}: {info2:?}");
        let info3 = srv.cmd_value_resp3(&["STATS.INFO", "s"]);
        let Value::Map(m) = &info3 else {
            panic!("{k}: {info3:?}")
        };
        let keys: Vec<String> = m.iter().map(|(k, _)| value_text(k).unwrap()).collect();
        assert_eq!(keys, ["period", "keep", "periods", "memory"], "{k}");
        assert_eq!(field(&info3, "periods"), v_int(1), "{k}");
    });
}

per_server!(report_keeps_the_highest_means);
/// REPORT keeps the n highest current-period means in a native zset, with exact scores,
/// and replicates it.
fn report_keeps_the_highest_means(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    in_one_period(&srv, |base| {
        let mut means: Vec<(String, f64)> = Vec::new();
        for i in 0..10 {
            let page = format!("/page/{i}");
            let key = format!("t:{i}");
            // Means like 7/3 are not exact binary fractions: the score must still be
            // exactly the double the server computes, i.e. sum / count.
            let vals = [
                i as f64 * 10.0,
                i as f64 * 10.0 + 1.0,
                i as f64 * 10.0 + 1.0 + (i % 3) as f64,
            ];
            let texts: Vec<String> = vals.iter().map(|v| v.to_string()).collect();
            let mut args = vec!["STATS.ADD", key.as_str()];
            args.extend(texts.iter().map(String::as_str));
            args.extend(["REPORT", "slowest", page.as_str(), "KEEP", "3"]);
            assert_eq!(srv.cmd_value(&args), v_int(3), "{k}");
            means.push((page, vals.iter().sum::<f64>() / 3.0));
        }
        means.sort_by(|a, b| b.1.total_cmp(&a.1));
        let top: Vec<(String, f64)> = means[..3].to_vec();
        let got: Vec<(String, f64)> = srv.query(&["ZREVRANGE", "slowest", "0", "-1", "WITHSCORES"]);
        assert_eq!(got, top, "{k}");
        // An update re-scores the member with its period's new mean.
        assert_eq!(
            srv.cmd_value(&[
                "STATS.ADD",
                "t:0",
                "1000",
                "REPORT",
                "slowest",
                "/page/0",
                "KEEP",
                "3"
            ]),
            v_int(4),
            "{k}"
        );
        let m0 = (0.0 + 1.0 + 1.0 + 1000.0) / 4.0;
        let got: Vec<(String, f64)> = srv.query(&["ZREVRANGE", "slowest", "0", "0", "WITHSCORES"]);
        assert_eq!(got, vec![("/page/0".to_string(), m0)], "{k}");
        assert_eq!(srv.query::<i64, _>(&["ZCARD", "slowest"]), 3, "{k}");
        // Default KEEP is 100; the member is ranked by the period the values went to.
        for i in 0..120 {
            let key = format!("u:{i}");
            let v = (i * 2).to_string();
            srv.query::<i64, _>(&[
                "STATS.ADD",
                &key,
                &v,
                "AT",
                &(base - HOUR).to_string(),
                "REPORT",
                "r100",
                &key,
            ]);
        }
        assert_eq!(srv.query::<i64, _>(&["ZCARD", "r100"]), 100, "{k}");
        let lowest: Vec<(String, f64)> = srv.query(&["ZRANGE", "r100", "0", "0", "WITHSCORES"]);
        assert_eq!(lowest, vec![("u:20".to_string(), 40.0)], "{k}");
        // Ties are cut like ZREMRANGEBYRANK: lowest score, then lowest member.
        for m in ["b", "a", "c"] {
            srv.query::<i64, _>(&[
                "STATS.ADD",
                &format!("tie:{m}"),
                "1",
                "REPORT",
                "ties",
                m,
                "KEEP",
                "2",
            ]);
        }
        let got: Vec<String> = srv.query(&["ZRANGE", "ties", "0", "-1"]);
        assert_eq!(got, ["b", "c"], "{k}");
    });
}

per_server!(replica_and_reloads_hold_the_same_data);
/// Writes of every kind reach a replica as effects, and the AOF and RDB reload to the
/// same data (dump_keyspace equality).
fn replica_and_reloads_hold_the_same_data(kind: &ServerKind) {
    let k = kind.name.as_str();
    let mut primary = Server::start_with(kind, ServerOptions::new().config("appendonly", "yes"));
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    let now = server_ms(&primary);
    let mut rng = Rng(99);
    assert_eq!(
        primary.cmd_value(&["STATS.CREATE", "created", "PERIOD", "1m", "KEEP", "5"]),
        v_ok(),
        "{k}"
    );
    for i in 0..40 {
        let key = format!("s:{}", i % 4);
        let vals: Vec<String> = (0..25)
            .map(|_| format!("{}", rng.lognormal() - 10.0))
            .collect();
        let at = (now - (i % 3) as i64 * HOUR).to_string();
        let member = format!("m{}", i % 7);
        let mut args = vec!["STATS.ADD", key.as_str()];
        args.extend(vals.iter().map(String::as_str));
        args.extend([
            "AT",
            at.as_str(),
            "REPORT",
            "rank",
            member.as_str(),
            "KEEP",
            "4",
        ]);
        assert!(matches!(primary.cmd_value(&args), Value::Int(_)), "{k}");
    }
    primary.query::<i64, _>(&["STATS.ADD", "created", "0.1", "-0.1", "0"]);
    let dump = assert_replica_equal(&primary, &replica, "after the writes");
    assert!(dump.len() >= 6, "{k}: {dump:?}");
    for args in [
        vec!["STATS.GET", "s:1", "WINDOW", "3h"],
        vec!["STATS.RANGE", "s:2"],
        vec![
            "STATS.QUANTILE",
            "s:3",
            "0.1",
            "0.5",
            "0.9",
            "WINDOW",
            "24h",
        ],
    ] {
        assert_eq!(
            replica.cmd_value(&args),
            primary.cmd_value(&args),
            "{k}: {args:?}"
        );
    }
    primary.restart();
    assert_eq!(primary.dump_keyspace(), dump, "{k}: AOF reload differs");

    let mut rdb = Server::start(kind);
    for (key, _) in dump.iter() {
        let name = key.strip_prefix("db0:").unwrap();
        let payload: Vec<u8> = primary.query(&["DUMP", name]);
        assert_eq!(
            rdb.cmd_value(&[
                b"RESTORE".as_slice(),
                name.as_bytes(),
                b"0".as_slice(),
                payload.as_slice()
            ]),
            v_ok(),
            "{k}"
        );
    }
    assert_eq!(rdb.dump_keyspace(), dump, "{k}: RESTORE differs");
    rdb.restart_saving();
    assert_eq!(rdb.dump_keyspace(), dump, "{k}: RDB reload differs");
    assert_eq!(
        rdb.cmd_value(&["STATS.GET", "s:0", "WINDOW", "3h"]),
        primary.cmd_value(&["STATS.GET", "s:0", "WINDOW", "3h"])
    );
    primary.assert_alive();
}

per_server!(timer_expires_idle_periods_on_primary_and_replica);
/// The timer drops periods of an idle key as they leave (200 ms periods, KEEP 2), the key
/// disappears with its last period, and the replica follows.
fn timer_expires_idle_periods_on_primary_and_replica(kind: &ServerKind) {
    let k = kind.name.as_str();
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    assert_eq!(
        primary.cmd_value(&["STATS.CREATE", "e", "PERIOD", "200ms", "KEEP", "2"]),
        v_ok(),
        "{k}"
    );
    assert_eq!(
        primary.cmd_value(&["STATS.CREATE", "idle", "PERIOD", "200ms", "KEEP", "2"]),
        v_ok(),
        "{k}"
    );
    // One value at the start of the previous period (retried if the clock moved to
    // the next period between TIME and ADD), two in the current one.
    assert!(
        (0..5).any(|_| {
            let prev = server_ms(&primary).div_euclid(200) * 200 - 200 + 10;
            primary.cmd_value(&["STATS.ADD", "e", "1", "AT", &prev.to_string()]) == v_int(1)
        }),
        "{k}"
    );
    assert_eq!(
        primary.cmd_value(&["STATS.ADD", "e", "2", "3"]),
        v_int(2),
        "{k}"
    );
    // Both periods are there right after the writes (unless the clock already moved on).
    let fields = primary.query::<i64, _>(&["HLEN", "e"]);
    assert!(fields == 5 || fields == 3, "{k}: {fields}");
    let mut saw_one_period = fields == 3;
    assert!(
        wait_until(Duration::from_secs(3), || {
            let n = primary.query::<i64, _>(&["HLEN", "e"]);
            saw_one_period |= n == 3;
            n == 0
        }),
        "{k}: key not expired on the primary"
    );
    assert!(
        saw_one_period,
        "{k}: the older period was not dropped first"
    );
    assert!(
        wait_until(Duration::from_secs(3), || replica
            .query::<i64, _>(&["EXISTS", "e"])
            == 0),
        "{k}: expiry did not reach the replica"
    );
    // A created object with no data keeps its settings.
    assert_eq!(
        field(&primary.cmd_value(&["STATS.INFO", "idle"]), "period"),
        v_int(200),
        "{k}"
    );
    let expired: i64 = primary
        .info("tally")
        .get("tally_slots_expired")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(expired >= 2, "{k}: slots_expired {expired}");
    assert_replica_equal(&primary, &replica, "after expiry");
    primary.assert_alive();
}

per_server!(report_key_is_declared);
/// REPORT's rankkey is a declared key: COMMAND GETKEYS lists it, a cluster answers
/// CROSSSLOT for keys in different slots, and ACL key permissions apply.
fn report_key_is_declared(kind: &ServerKind) {
    let k = kind.name.as_str();
    let srv = Server::start(kind);
    assert_eq!(
        srv.cmd_value(&[
            "COMMAND",
            "GETKEYS",
            "STATS.ADD",
            "s",
            "1",
            "2",
            "AT",
            "5",
            "REPORT",
            "rk",
            "m",
            "KEEP",
            "3"
        ]),
        v_bulks(&["s", "rk"]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["COMMAND", "GETKEYS", "STATS.ADD", "s", "1"]),
        v_bulks(&["s"]),
        "{k}"
    );

    // ACL: a user allowed only s* keys cannot REPORT into another key.
    let mut c = conn_as_user(&srv, "u", &["~s*"]);
    let r = redis::cmd("STATS.ADD")
        .arg("s1")
        .arg("1")
        .arg("REPORT")
        .arg("rk")
        .arg("m")
        .query::<Value>(&mut c);
    let text = match r {
        Err(e) => redis_error_text(&e),
        Ok(Value::ServerError(e)) => server_error_text(&e),
        Ok(v) => panic!("{k}: expected NOPERM, got {v:?}"),
    };
    assert!(text.starts_with("NOPERM"), "{k}: {text}");
    let ok = redis::cmd("STATS.ADD")
        .arg("s1")
        .arg("1")
        .arg("REPORT")
        .arg("srk")
        .arg("m")
        .query::<Value>(&mut c);
    assert!(matches!(ok, Ok(Value::Int(1))), "{k}: {ok:?}");
    assert_eq!(srv.query::<i64, _>(&["EXISTS", "rk"]), 0, "{k}");

    let cluster = start_cluster(kind, 3, 0);
    let node = cluster.node_for_key("{a}s");
    let v = node.cmd_value(&["STATS.ADD", "{a}s", "1", "REPORT", "{b}r", "m"]);
    assert!(
        error_text(&v).is_some_and(|t| t.starts_with("CROSSSLOT")),
        "{k}: {v:?}"
    );
    let v = node.cmd_value(&["STATS.ADD", "{a}s", "1", "2", "REPORT", "{a}r", "m"]);
    assert_eq!(v, v_int(2), "{k}");
    let got: Vec<(String, f64)> = node.query(&["ZRANGE", "{a}r", "0", "-1", "WITHSCORES"]);
    assert_eq!(got, vec![("m".to_string(), 1.5)], "{k}");
}

per_server!(memory_of_24_hourly_periods);
/// 24 hourly periods of 10,000 lognormal latencies each stay under 64 KB.
fn memory_of_24_hourly_periods(kind: &ServerKind) {
    let srv = Server::start(kind);
    in_one_period(&srv, |base| {
        let mut rng = Rng(31);
        for h in 0..24 {
            let xs: Vec<f64> = (0..10_000).map(|_| rng.lognormal()).collect();
            add_all(&srv, "lat", &xs, Some(base - h * HOUR));
        }
        let info = srv.cmd_value(&["STATS.INFO", "lat"]);
        assert_eq!(field(&info, "periods"), v_int(24));
        // SAMPLES 0: every field counted (the default samples 5 of a large hash).
        let usage: i64 = srv.query(&["MEMORY", "USAGE", "lat", "SAMPLES", "0"]);
        println!(
            "{}: 24 hourly periods x 10,000 lognormal values: MEMORY USAGE {usage} bytes",
            kind.name
        );
        assert!(usage < 64 * 1024, "{}: {usage} bytes", kind.name);
        let sampled: i64 = srv.query(&["MEMORY", "USAGE", "lat"]);
        assert_eq!(field(&info, "memory"), v_int(sampled));
        let g = srv.cmd_value(&["STATS.GET", "lat", "WINDOW", "24h"]);
        assert_eq!(field(&g, "count"), v_int(240_000));
    });
}

per_server!(corrupt_fields_are_survivable);
/// Malformed stored fields (a user's HSET) never crash a read or a write: the period
/// counts as empty and is overwritten.
fn corrupt_fields_are_survivable(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    in_one_period(&srv, |base| {
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "x", "1", "2"]),
            v_int(2),
            "{k}"
        );
        let m = format!("{base}:m");
        let q = format!("{base}:q");
        srv.query::<(), _>(&["HSET", "x", &q, "\u{1}garbage"]);
        assert_eq!(srv.cmd_value(&["STATS.GET", "x"]), v_nil(), "{k}");
        assert_eq!(srv.cmd_value(&["STATS.RANGE", "x"]), v_arr(vec![]), "{k}");
        assert_eq!(srv.cmd_value(&["STATS.ADD", "x", "7"]), v_int(1), "{k}");
        srv.query::<(), _>(&["HSET", "x", &m, "1 nan 0 0 0 0 0"]);
        assert_eq!(
            srv.cmd_value(&["STATS.QUANTILE", "x", "0.5"]),
            v_nil(),
            "{k}"
        );
        srv.query::<(), _>(&["HDEL", "x", &q]);
        assert_eq!(srv.cmd_value(&["STATS.ADD", "x", "8"]), v_int(1), "{k}");
        assert_eq!(
            num(&field(&srv.cmd_value(&["STATS.GET", "x"]), "mean")),
            8.0,
            "{k}"
        );
        srv.query::<(), _>(&["HSET", "x", "junk", "1", "99:m", "x"]);
        assert_eq!(
            field(&srv.cmd_value(&["STATS.INFO", "x"]), "periods"),
            v_int(1),
            "{k}"
        );
    });
    srv.assert_alive();
}
