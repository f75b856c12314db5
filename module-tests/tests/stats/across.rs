//! STATS.MGET and STATS.MQUANTILE: one summary of several objects, checked against the
//! brute-force union of every value of every key's window (count, min and max exact, sum,
//! mean and stddev against a two-pass reference, quantiles within 1%), then exact replies
//! and errors, key declarations and key permissions.

use super::*;

/// `(key, period ms)` of the objects of the model test: two hourly ones, one by minutes,
/// one by half hours, and a key never written.
const KEYS: [(&str, i64); 5] = [
    ("page:a", HOUR),
    ("page:b", HOUR),
    ("page:c", 60_000),
    ("page:d", HOUR / 2),
    ("page:none", HOUR),
];

per_server!(mget_and_mquantile_answer_for_the_union_of_the_values);
/// Seeded random values with `AT` over the last hours into objects of different periods,
/// then MGET and MQUANTILE over random subsets of the keys (missing keys, a key named
/// twice) with and without WINDOW: every reply is the statistics of the union of the
/// values each key's window holds. Runs within one hour of server time, so the windows
/// the model counts are the server's.
fn mget_and_mquantile_answer_for_the_union_of_the_values(kind: &ServerKind) {
    let srv = Server::start(kind);
    in_one_period(&srv, |hour| {
        for (key, period) in &KEYS[..4] {
            let period = format!("{period}");
            assert_eq!(
                srv.cmd_value(&["STATS.CREATE", key, "PERIOD", &period, "KEEP", "600"]),
                v_ok()
            );
        }
        let mut rng = Rng(0x6d67_6574);
        let now = server_ms(&srv);
        // (key index, ts, value) of every value added.
        let mut log: Vec<(usize, i64, f64)> = Vec::new();
        for _ in 0..40 {
            let k = rng.below(4) as usize;
            // Mostly this hour (before now), some in the hours before.
            let ts = if rng.chance(70) {
                hour + rng.below((now - hour).max(1))
            } else {
                hour - rng.below(3 * HOUR)
            };
            let values: Vec<f64> = (0..1 + rng.below(60))
                .map(|_| (rng.lognormal() * 100.0 * (k + 1) as f64).round() / 8.0 - 5.0)
                .collect();
            add_all(&srv, KEYS[k].0, &values, Some(ts));
            log.extend(values.iter().map(|&v| (k, ts, v)));
        }
        let (mut checked, mut empty) = (0, 0);
        for step in 0..120 {
            let n = 1 + rng.below(5) as usize;
            let chosen: Vec<usize> = (0..n).map(|_| rng.below(5) as usize).collect();
            let window = *rng.pick(&[None, Some(HOUR), Some(2 * HOUR), Some(3 * HOUR)]);
            let mut args = vec![n.to_string()];
            args.extend(chosen.iter().map(|&k| KEYS[k].0.to_string()));
            let mut tail = Vec::new();
            if let Some(w) = window {
                tail.extend(["WINDOW".to_string(), w.to_string()]);
            }
            // Without WINDOW each key answers for its current period, by its own period.
            let union = |now: i64| {
                let mut xs = Vec::new();
                for &k in &chosen {
                    let period = KEYS[k].1;
                    let periods = window.map_or(1, |w| w / period);
                    let current = now.div_euclid(period);
                    xs.extend(log.iter().filter_map(|&(key, ts, v)| {
                        let index = ts.div_euclid(period);
                        (key == k && index > current - periods && index <= current).then_some(v)
                    }));
                }
                xs
            };
            let xs = union(server_ms(&srv));
            let ctx = format!("step {step}: {args:?} {tail:?}");
            let mut mget = vec!["STATS.MGET".to_string()];
            mget.extend(args.iter().cloned());
            mget.extend(tail.iter().cloned());
            let qs = ["0", "0.25", "0.5", "0.9", "0.99", "1"];
            let mut mq = vec!["STATS.MQUANTILE".to_string()];
            mq.extend(args.iter().cloned());
            mq.extend(qs.iter().map(|q| q.to_string()));
            mq.extend(tail.iter().cloned());
            let (got, got3, quantiles) = (
                srv.cmd_value(&mget),
                srv.cmd_value_resp3(&mget),
                srv.cmd_value(&mq),
            );
            // A period of `page:c` (one minute) may end during the calls: the model is
            // the union at both ends of them, and a step where they differ is not
            // checked.
            if union(server_ms(&srv)) != xs {
                continue;
            }
            if xs.is_empty() {
                assert_eq!(got, v_nil(), "{ctx}");
                assert_eq!(got3, v_nil(), "{ctx}");
                assert_eq!(quantiles, v_nil(), "{ctx}");
                empty += 1;
                continue;
            }
            check_get(&ctx, &got, &xs);
            check_get(&ctx, &got3, &xs);
            let r = reference(&xs);
            let Value::Array(estimates) = &quantiles else {
                panic!("{ctx}: {quantiles:?}");
            };
            assert_eq!(estimates.len(), qs.len(), "{ctx}");
            for (q, est) in qs.iter().zip(estimates) {
                let q: f64 = q.parse().unwrap();
                check_quantile(&format!("{ctx} q {q}"), num(est), r.quantile(q));
            }
            checked += 1;
        }
        assert!(
            checked > 80 && empty > 0,
            "{checked} checked, {empty} empty: the workload misses a case"
        );
    });
    srv.assert_alive();
}

per_server!(mget_and_mquantile_replies_and_errors);
/// Exact replies (one key's MGET is its GET), missing keys, and every error, which
/// changes nothing.
fn mget_and_mquantile_replies_and_errors(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    in_one_period(&srv, |hour| {
        add_all(&srv, "a", &[1.0, 2.0, 3.0], Some(hour));
        add_all(&srv, "b", &[10.0], Some(hour));
        // One key answers as its GET and QUANTILE do, in both protocols.
        for window in [vec![], vec!["WINDOW", "2h"]] {
            let mut get = vec!["STATS.GET", "a"];
            get.extend(&window);
            let mut mget = vec!["STATS.MGET", "1", "a"];
            mget.extend(&window);
            assert_eq!(srv.cmd_value(&mget), srv.cmd_value(&get), "{k}");
            assert_eq!(srv.cmd_value_resp3(&mget), srv.cmd_value_resp3(&get), "{k}");
            let mut q = vec!["STATS.QUANTILE", "a", "0.5", "1"];
            q.extend(&window);
            let mut mq = vec!["STATS.MQUANTILE", "1", "a", "0.5", "1"];
            mq.extend(&window);
            assert_eq!(srv.cmd_value(&mq), srv.cmd_value(&q), "{k}");
        }
        let got = srv.cmd_value(&["STATS.MGET", "3", "a", "missing", "b"]);
        check_get(k, &got, &[1.0, 2.0, 3.0, 10.0]);
        assert_eq!(field(&got, "count"), v_int(4), "{k}");
        assert_eq!(field(&got, "sum"), v_bulk("16"), "{k}");
        assert_eq!(field(&got, "min"), v_bulk("1"), "{k}");
        assert_eq!(field(&got, "max"), v_bulk("10"), "{k}");
        assert_eq!(field(&got, "mean"), v_bulk("4"), "{k}");
        // A key named twice counts twice.
        let twice = srv.cmd_value(&["STATS.MGET", "2", "b", "b"]);
        assert_eq!(field(&twice, "count"), v_int(2), "{k}");
        // A key named several times is read once (one window read per distinct key in
        // INFO tally's counts) and its values count at every place it is named: the
        // answer is that of its values added as often.
        let reads = || {
            info_i64(&srv, "tally", "tally_stats_cache_hits")
                + info_i64(&srv, "tally", "tally_stats_cache_misses")
        };
        let before = reads();
        let repeated = srv.cmd_value(&["STATS.MGET", "5", "a", "b", "a", "missing", "a"]);
        assert_eq!(reads() - before, 2, "{k}: a and b read once each");
        check_get(
            k,
            &repeated,
            &[1.0, 2.0, 3.0, 10.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0],
        );
        let before = reads();
        assert_eq!(
            srv.cmd_value_resp3(&["STATS.MQUANTILE", "5", "b", "a", "b", "b", "b", "0.5", "1"]),
            v_arr(vec![v_double(10.0), v_double(10.0)]),
            "{k}: four b (10) and one a (1, 2, 3): the median is 10"
        );
        assert_eq!(
            reads() - before,
            2,
            "{k}: MQUANTILE reads a and b once each"
        );
        assert_eq!(
            srv.cmd_value_resp3(&["STATS.MQUANTILE", "2", "a", "b", "0", "1"]),
            v_arr(vec![v_double(1.0), v_double(10.0)]),
            "{k}"
        );
        // Nothing in any window: nil.
        assert_eq!(
            srv.cmd_value(&["STATS.MGET", "2", "x", "y"]),
            v_nil(),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value(&["STATS.MQUANTILE", "1", "x", "0.5"]),
            v_nil(),
            "{k}"
        );
    });
    assert_eq!(
        srv.cmd_value(&["STATS.CREATE", "m", "PERIOD", "1m", "KEEP", "90"]),
        v_ok()
    );
    srv.cmd_value(&["SET", "str", "x"]);
    let before = srv.dump_keyspace();
    let syntax = "ERR syntax error";
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for (args, err) in [
        (vec!["STATS.MGET", "0", "a"], syntax),
        (vec!["STATS.MGET", "1001", "a"], syntax),
        (
            vec!["STATS.MGET", "x", "a"],
            "ERR value is not an integer or out of range",
        ),
        (vec!["STATS.MGET", "2", "a"], syntax),
        (vec!["STATS.MGET", "1", "a", "FOO"], syntax),
        (vec!["STATS.MGET", "1", "a", "WINDOW"], syntax),
        (
            vec!["STATS.MGET", "1", "a", "WINDOW", "1h", "WINDOW", "1h"],
            syntax,
        ),
        (
            vec!["STATS.MGET", "1", "a", "WINDOW", "1x"],
            "ERR invalid duration '1x': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)",
        ),
        (vec!["STATS.MGET", "2", "a", "str"], wrongtype),
        (vec!["STATS.MQUANTILE", "2", "a", "str", "0.5"], wrongtype),
        // No quantile after the keys is a syntax error, as the reference says.
        (
            vec!["STATS.MQUANTILE", "1", "a", "WINDOW", "1h"],
            "ERR syntax error",
        ),
        (
            vec!["STATS.MQUANTILE", "1", "a", "x"],
            "ERR value is not a valid float",
        ),
        (
            vec!["STATS.MQUANTILE", "1", "a", "0.5", "FOO"],
            "ERR value is not a valid float",
        ),
        (vec!["STATS.MQUANTILE", "2", "a", "0.5"], "ERR syntax error"),
    ] {
        assert_eq!(
            error_text(&srv.cmd_value(&args)).as_deref(),
            Some(err),
            "{k}: {args:?}"
        );
    }
    // WINDOW by each key's own period: what GET answers for the key that refuses it.
    for (args, single) in [
        (
            vec!["STATS.MGET", "2", "m", "a", "WINDOW", "90s"],
            vec!["STATS.GET", "m", "WINDOW", "90s"],
        ),
        (
            vec!["STATS.MGET", "2", "m", "a", "WINDOW", "30m"],
            vec!["STATS.GET", "a", "WINDOW", "30m"],
        ),
        (
            vec!["STATS.MGET", "2", "m", "missing", "WINDOW", "30m"],
            vec!["STATS.GET", "missing", "WINDOW", "30m"],
        ),
        (
            vec!["STATS.MQUANTILE", "1", "a", "2", "WINDOW", "1h"],
            vec!["STATS.QUANTILE", "a", "2", "WINDOW", "1h"],
        ),
    ] {
        let want = srv.cmd_value(&single);
        assert!(error_text(&want).is_some(), "{k}: {single:?} {want:?}");
        assert_eq!(srv.cmd_value(&args), want, "{k}: {args:?}");
    }
    assert_eq!(
        error_text(&srv.cmd_value(&["STATS.MGET", "1"])).as_deref(),
        Some("ERR wrong number of arguments for 'stats.mget' command")
    );
    assert_eq!(
        error_text(&srv.cmd_value(&["STATS.MQUANTILE", "1", "a"])).as_deref(),
        Some("ERR wrong number of arguments for 'stats.mquantile' command")
    );
    // No quantile after the keys: the arguments stop short.
    for args in [
        vec!["STATS.MQUANTILE", "2", "m", "a"],
        vec!["STATS.MQUANTILE", "2", "m", "a", "WINDOW", "1h"],
    ] {
        assert_eq!(
            error_text(&srv.cmd_value(&args)).as_deref(),
            Some("ERR syntax error"),
            "{k}: {args:?}"
        );
    }
    assert_eq!(srv.dump_keyspace(), before, "{k}: an error wrote something");
    // 1000 keys are taken.
    let mut many = vec!["STATS.MGET".to_string(), "1000".into()];
    many.extend((0..1000).map(|i| format!("k{i}")));
    assert_eq!(srv.cmd_value(&many), v_nil(), "{k}");
    srv.assert_alive();
}

per_server!(mget_and_mquantile_declare_their_keys_and_check_each_permission);
/// GETKEYS names the keys after `numkeys`; a user without access to one of them is
/// refused.
fn mget_and_mquantile_declare_their_keys_and_check_each_permission(kind: &ServerKind) {
    let srv = Server::start(kind);
    assert_eq!(
        srv.cmd_value(&[
            "COMMAND",
            "GETKEYS",
            "STATS.MGET",
            "3",
            "a",
            "b",
            "c",
            "WINDOW",
            "1h"
        ]),
        v_bulks(&["a", "b", "c"])
    );
    assert_eq!(
        srv.cmd_value(&[
            "COMMAND",
            "GETKEYS",
            "STATS.MQUANTILE",
            "2",
            "a",
            "b",
            "0.5",
            "0.9"
        ]),
        v_bulks(&["a", "b"])
    );
    add_all(&srv, "p:a", &[5.0], None);
    let mut own = conn_as_user(&srv, "reader", &["~p:*"]);
    let got = conn_value(&mut own, &["STATS.MGET", "2", "p:a", "p:b"]);
    assert_eq!(field(&got, "count"), v_int(1));
    for args in [
        vec!["STATS.MGET", "2", "p:a", "other"],
        vec!["STATS.MQUANTILE", "2", "other", "p:a", "0.5"],
    ] {
        let e = error_text(&conn_value(&mut own, &args)).unwrap_or_default();
        assert!(e.starts_with("NOPERM"), "{args:?}: {e}");
    }
    srv.assert_alive();
}

per_server!(mget_follows_every_change_behind_its_cache);
/// A repeated MGET answers from the read cache of windows; every change of a key (a
/// STATS.ADD, a native edit, a DEL, a RENAME) is seen by the next MGET and MQUANTILE.
fn mget_follows_every_change_behind_its_cache(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    in_one_period(&srv, |_| {
        add_all(&srv, "c:a", &[1.0, 2.0], None);
        add_all(&srv, "c:b", &[10.0], None);
        let mget = || srv.cmd_value(&["STATS.MGET", "2", "c:a", "c:b", "WINDOW", "2h"]);
        let mq = || srv.cmd_value(&["STATS.MQUANTILE", "2", "c:a", "c:b", "1", "WINDOW", "2h"]);
        for _ in 0..3 {
            check_get(k, &mget(), &[1.0, 2.0, 10.0]);
        }
        add_all(&srv, "c:b", &[20.0], None);
        check_get(k, &mget(), &[1.0, 2.0, 10.0, 20.0]);
        assert_eq!(num(&value_at(&mq(), 0)), 20.0, "{k}");
        // A native edit of a period: the damaged period reads as missing, as GET reads it.
        let fields: Vec<String> = hgetall(&srv, "c:b")
            .into_keys()
            .filter(|f| f.ends_with(":m"))
            .collect();
        assert_eq!(fields.len(), 1, "{k}: {fields:?}");
        assert_eq!(
            srv.cmd_value(&["HSET", "c:b", &fields[0], "junk"]),
            v_int(0)
        );
        assert_eq!(
            srv.cmd_value(&["STATS.GET", "c:b", "WINDOW", "2h"]),
            v_nil(),
            "{k}"
        );
        check_get(k, &mget(), &[1.0, 2.0]);
        assert_eq!(srv.cmd_value(&["DEL", "c:a"]), v_int(1));
        assert_eq!(mget(), v_nil(), "{k}");
        add_all(&srv, "c:x", &[7.0], None);
        assert_eq!(srv.cmd_value(&["RENAME", "c:x", "c:a"]), v_ok());
        check_get(k, &mget(), &[7.0]);
        assert_eq!(mq(), v_arr(vec![v_bulk("7")]), "{k}");
    });
    srv.assert_alive();
}

/// Item `i` of an array reply.
fn value_at(v: &Value, i: usize) -> Value {
    match v {
        Value::Array(items) => items[i].clone(),
        other => panic!("expected an array, got {other:?}"),
    }
}
