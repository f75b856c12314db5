//! STATS.CDF: the share of a window's values at or below each value, against a
//! brute-force reference (a log of every value added); its errors and reply shapes; equal
//! answers on a replica and after an AOF reload.

use super::*;

/// Every value added, with the period (hours before the current one) it went to.
#[derive(Default)]
struct Log {
    added: Vec<(i64, f64)>,
}

impl Log {
    /// The values of the latest `periods` periods, sorted.
    fn window(&self, periods: i64) -> Vec<f64> {
        let mut xs: Vec<f64> = self
            .added
            .iter()
            .filter(|(back, _)| *back < periods)
            .map(|(_, v)| *v)
            .collect();
        xs.sort_by(f64::total_cmp);
        xs
    }
}

/// The share of `sorted` at or below `x`, computed as the module divides.
fn share(sorted: &[f64], x: f64) -> f64 {
    sorted.partition_point(|&v| v <= x) as f64 / sorted.len() as f64
}

/// Checks CDF answers for `asked` over the values `sorted` (the contract): exactly 0 below
/// the min, exactly 1 at or above the max, otherwise between the true shares at
/// `x * (1 - 0.01)` and `x * (1 + 0.01)` (the other way round below zero); exact at 0
/// (no value here lies strictly between -1e-9 and 1e-9 but 0 itself).
fn check_cdf(ctx: &str, reply: &Value, asked: &[f64], sorted: &[f64]) {
    if sorted.is_empty() {
        assert_eq!(reply, &v_nil(), "{ctx}");
        return;
    }
    let Value::Array(items) = reply else {
        panic!("{ctx}: {reply:?}")
    };
    assert_eq!(items.len(), asked.len(), "{ctx}");
    let (min, max) = (sorted[0], sorted[sorted.len() - 1]);
    for (&x, item) in asked.iter().zip(items) {
        let got = num(item);
        assert!((0.0..=1.0).contains(&got), "{ctx}: x={x}: {got}");
        if x < min {
            assert_eq!(got, 0.0, "{ctx}: x={x} below the min {min}");
        } else if x >= max {
            assert_eq!(got, 1.0, "{ctx}: x={x} at or above the max {max}");
        } else if x == 0.0 {
            assert_eq!(got, share(sorted, 0.0), "{ctx}: x=0");
        } else {
            let (a, b) = (x * 0.99, x * 1.01);
            let (lo, hi) = (share(sorted, a.min(b)), share(sorted, a.max(b)));
            assert!(
                lo <= got && got <= hi,
                "{ctx}: x={x}: {got} not in {lo}..={hi}"
            );
        }
    }
}

/// A value of one of several shapes: skewed positive, negative, either sign, small
/// integers (many repeats, so values asked often equal stored ones), zero.
fn value(rng: &mut Rng) -> f64 {
    match rng.below(5) {
        0 => rng.lognormal(),
        1 => -rng.lognormal() / 10.0,
        2 => rng.normal() * 100.0,
        3 => rng.below(20) as f64 - 5.0,
        _ => 0.0,
    }
}

/// Values to ask about over `sorted`: stored ones as they are and nudged by 0.3% and 2%
/// either way, the ends and just past them, zero, random ones.
fn probes(rng: &mut Rng, sorted: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0, -1e100, 1e100];
    if let (Some(&min), Some(&max)) = (sorted.first(), sorted.last()) {
        out.extend([
            min,
            max,
            min.next_down(),
            max.next_down(),
            max.next_up(),
            min - 1.0,
        ]);
    }
    for _ in 0..25 {
        if !sorted.is_empty() {
            let v = *rng.pick(sorted);
            out.extend([v, v * 1.003, v * 0.997, v * 1.02, v * 0.98]);
        }
        out.push(value(rng) * 1.5);
    }
    out
}

per_server!(cdf_matches_a_log_of_every_value);
/// Random values with `AT` across period edges (first and last millisecond of a period,
/// periods that left: refused), read back over every window size, through the read cache
/// and cold, in RESP2 and RESP3.
fn cdf_matches_a_log_of_every_value(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    in_one_period(&srv, |base| {
        let mut rng = Rng(4242);
        let mut log = Log::default();
        assert_eq!(
            srv.cmd_value(&["STATS.CREATE", "c", "PERIOD", "1h", "KEEP", "6"]),
            v_ok(),
            "{k}"
        );
        // Nothing stored yet: every window is empty.
        assert_eq!(
            srv.cmd_value(&["STATS.CDF", "c", "1", "WINDOW", "6h"]),
            v_nil(),
            "{k}"
        );
        for round in 0..12 {
            for _ in 0..8 {
                let back = rng.below(8);
                // The current period only up to now (a later time is in the future).
                let end = if back == 0 {
                    server_ms(&srv) - base
                } else {
                    HOUR - 1
                };
                let within = match rng.below(4) {
                    0 => 0,
                    1 => end,
                    _ => rng.below(end + 1),
                };
                let at = base - back * HOUR + within;
                let values: Vec<f64> = (0..1 + rng.below(12)).map(|_| value(&mut rng)).collect();
                let mut args: Vec<String> = vec!["STATS.ADD".into(), "c".into()];
                args.extend(values.iter().map(|v| format!("{v}")));
                args.extend(["AT".into(), at.to_string()]);
                let reply = srv.cmd_value(&args);
                if back >= 6 {
                    assert_eq!(
                        reply,
                        v_err("ERR timestamp is outside the kept range"),
                        "{k}"
                    );
                } else {
                    assert!(matches!(reply, Value::Int(_)), "{k}: {reply:?}");
                    log.added.extend(values.iter().map(|&v| (back, v)));
                }
            }
            for periods in 1..=6 {
                let sorted = log.window(periods);
                let asked = probes(&mut rng, &sorted);
                let mut args: Vec<String> = vec!["STATS.CDF".into(), "c".into()];
                args.extend(asked.iter().map(|v| format!("{v:e}")));
                if periods > 1 || round % 2 == 0 {
                    args.extend(["WINDOW".into(), format!("{periods}h")]);
                }
                let ctx = format!("{k} round {round} window {periods}h");
                let first = srv.cmd_value(&args);
                check_cdf(&ctx, &first, &asked, &sorted);
                // Again (the closed periods' merge now cached), and in RESP3.
                assert_eq!(srv.cmd_value(&args), first, "{ctx}: second read");
                let resp3 = srv.cmd_value_resp3(&args);
                check_cdf(&format!("{ctx} resp3"), &resp3, &asked, &sorted);
                if let Value::Array(items) = &resp3 {
                    assert!(items.iter().all(|i| matches!(i, Value::Double(_))), "{ctx}");
                }
            }
        }
        // A cold read (the object's cache dropped by a native edit) answers the same.
        let sorted = log.window(6);
        let asked = probes(&mut rng, &sorted);
        let mut args: Vec<String> = vec!["STATS.CDF".into(), "c".into()];
        args.extend(asked.iter().map(|v| format!("{v:e}")));
        args.extend(["WINDOW".into(), "6h".into()]);
        let cached = srv.cmd_value(&args);
        assert_eq!(srv.cmd_value(&["HSET", "c", "note", "x"]), v_int(1), "{k}");
        assert_eq!(srv.cmd_value(&["HDEL", "c", "note"]), v_int(1), "{k}");
        assert_eq!(srv.cmd_value(&args), cached, "{k}: cold read");
        check_cdf(&format!("{k} final"), &cached, &asked, &sorted);
    });
    srv.assert_alive();
}

per_server!(cdf_errors_are_exact_and_missing_or_empty_is_nil);
/// Missing key and empty window: nil. Values follow ADD's rules; 1 to 1000 of them; the
/// window follows GET's rules; another type is WRONGTYPE.
fn cdf_errors_are_exact_and_missing_or_empty_is_nil(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    assert_eq!(srv.cmd_value(&["STATS.CDF", "none", "1"]), v_nil(), "{k}");
    assert_eq!(
        srv.cmd_value(&["STATS.CREATE", "e", "PERIOD", "1h"]),
        v_ok(),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["STATS.CDF", "e", "1", "WINDOW", "24h"]),
        v_nil(),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["STATS.ADD", "s", "1", "2", "3", "4"]),
        v_int(4),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["SET", "str", "x"]), v_ok(), "{k}");
    let not_float = "ERR value is not a valid float";
    let thousand: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
    let mut at_most: Vec<&str> = vec!["STATS.CDF", "s"];
    at_most.extend(thousand.iter().map(String::as_str));
    let Value::Array(shares) = srv.cmd_value(&at_most) else {
        panic!("{k}: 1000 values refused")
    };
    assert_eq!(shares.len(), 1000, "{k}");
    let mut over = at_most.clone();
    over.push("1000");
    for (args, want) in [
        (
            vec!["STATS.CDF", "s"],
            "ERR wrong number of arguments for 'stats.cdf' command",
        ),
        (vec!["STATS.CDF", "s", "abc"], not_float),
        (vec!["STATS.CDF", "s", "1", "inf"], not_float),
        (vec!["STATS.CDF", "s", "nan"], not_float),
        (vec!["STATS.CDF", "s", "WINDOW", "1h"], not_float),
        (
            vec!["STATS.CDF", "s", "1e200"],
            "ERR value is out of range (the limit is 1e100 in magnitude)",
        ),
        (over, "ERR too many values, at most 1000"),
        (vec!["STATS.CDF", "s", "1", "WINDOW"], "ERR syntax error"),
        (
            vec!["STATS.CDF", "s", "1", "WINDOW", "1h", "WINDOW", "2h"],
            "ERR syntax error",
        ),
        (vec!["STATS.CDF", "s", "1", "FOO"], not_float),
        (
            vec!["STATS.CDF", "s", "1", "WINDOW", "x"],
            "ERR invalid duration 'x': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)",
        ),
        (
            vec!["STATS.CDF", "s", "1", "WINDOW", "90m"],
            "ERR WINDOW must be a multiple of the period (1h) of at most 24 periods",
        ),
        (
            vec!["STATS.CDF", "none", "1", "WINDOW", "25h"],
            "ERR WINDOW must be a multiple of the period (1h) of at most 24 periods",
        ),
        (vec!["STATS.CDF", "str", "1"], WRONGTYPE),
    ] {
        assert_eq!(
            srv.cmd_value(&args),
            v_err(want),
            "{k}: {:?}",
            &args[..args.len().min(4)]
        );
    }
    // The ends: exactly 0 below the min, 1 at or above the max, in the order asked.
    let reply = srv.cmd_value(&["STATS.CDF", "s", "4", "0.5", "1e100", "-1e100", "1"]);
    let Value::Array(items) = &reply else {
        panic!("{k}: {reply:?}")
    };
    let got: Vec<f64> = items.iter().map(num).collect();
    assert_eq!(got[..4], [1.0, 0.0, 1.0, 0.0], "{k}");
    assert!((0.0..=0.25).contains(&got[4]), "{k}: {got:?}");
    srv.assert_alive();
}

per_server!(cdf_is_equal_on_a_replica_and_after_an_aof_reload);
/// A read command: a replica and an AOF reload answer exactly what the primary answers.
fn cdf_is_equal_on_a_replica_and_after_an_aof_reload(kind: &ServerKind) {
    let k = kind.name.as_str();
    let mut primary = Server::start_with(kind, ServerOptions::new().config("appendonly", "yes"));
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    let now = server_ms(&primary);
    let mut rng = Rng(5);
    for i in 0..30 {
        let mut args: Vec<String> = vec!["STATS.ADD".into(), format!("s:{}", i % 3)];
        args.extend((0..20).map(|_| format!("{}", value(&mut rng))));
        args.extend(["AT".into(), (now - (i % 4) as i64 * HOUR).to_string()]);
        assert!(matches!(primary.cmd_value(&args), Value::Int(_)), "{k}");
    }
    assert_replica_equal(&primary, &replica, "after the writes");
    let queries: Vec<Vec<&str>> = ["s:0", "s:1", "s:2"]
        .into_iter()
        .map(|key| {
            vec![
                "STATS.CDF",
                key,
                "-3",
                "0",
                "2.5",
                "17",
                "250",
                "WINDOW",
                "4h",
            ]
        })
        .collect();
    let answers: Vec<Value> = queries.iter().map(|q| primary.cmd_value(q)).collect();
    for (q, want) in queries.iter().zip(&answers) {
        assert!(
            matches!(want, Value::Array(a) if a.len() == 5),
            "{k}: {want:?}"
        );
        assert_eq!(&replica.cmd_value(q), want, "{k}: replica {q:?}");
    }
    primary.restart();
    for (q, want) in queries.iter().zip(&answers) {
        assert_eq!(
            &primary.cmd_value(q),
            want,
            "{k}: after the AOF reload {q:?}"
        );
    }
    primary.assert_alive();
    replica.assert_alive();
}
