//! TSCOUNTER.MSUM (each window summed over several counters): seeded random traffic
//! checked against a brute-force model of SUM per key, exact replies in RESP2 and RESP3,
//! errors, key declarations and key permissions. The cluster case is in
//! `across_cluster.rs`.

use module_tests::*;

/// Brute-force SUM of one counter: `events` are `(ts, increment)`, `resolutions`
/// `(res_ms, samples)` finest first. `None` when no resolution spans `window`.
fn model_sum(
    resolutions: &[(i64, i64)],
    events: &[(i64, i64)],
    now: i64,
    t: i64,
    window: i64,
) -> Option<i64> {
    let &(res, samples) = resolutions.iter().find(|(r, s)| r * s >= window)?;
    let hi = t.div_euclid(res);
    let first_kept = now.div_euclid(res) - samples + 1;
    let lo = (hi - (window + res - 1) / res + 1).max(first_kept);
    Some(
        events
            .iter()
            .filter(|(ts, _)| (lo..=hi).contains(&ts.div_euclid(res)))
            .map(|(_, by)| by)
            .sum(),
    )
}

const DEFAULTS: &[(i64, i64)] = &[
    (1_000, 120),
    (5_000, 120),
    (60_000, 120),
    (300_000, 120),
    (3_600_000, 120),
    (18_000_000, 120),
    (86_400_000, 120),
];
const MINUTES: &[(i64, i64)] = &[(60_000, 60), (3_600_000, 48)];

per_server!(msum_agrees_with_a_model_of_sum_per_key);
/// Seeded random INCRBYs with `AT` over six counters (two of them with other
/// resolutions), then MSUM calls over random subsets (missing keys and a key named twice
/// included), several windows and `AT`: every reply is the model's sum of each key's SUM,
/// checked with the clock read before and after the call (the kept range moves with it).
fn msum_agrees_with_a_model_of_sum_per_key(kind: &ServerKind) {
    let srv = Server::start(kind);
    let keys = ["m:a", "m:b", "m:c", "m:d", "m:e", "m:f", "m:missing"];
    for key in ["m:e", "m:f"] {
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.CREATE", key, "RESOLUTIONS", "1m:60", "1h:48"]),
            v_ok()
        );
    }
    let resolutions = |key: &str| match key {
        "m:e" | "m:f" => MINUTES,
        _ => DEFAULTS,
    };
    let mut events: Vec<Vec<(i64, i64)>> = vec![Vec::new(); keys.len()];
    let mut rng = Rng(0x3517_4d00);
    let now = server_ms(&srv);
    let mut conn = srv.conn();
    let mut writes = Vec::new();
    for _ in 0..600 {
        let k = rng.below(6) as usize;
        let ts = now - rng.below(50 * 60_000);
        let by = rng.below(20) - 5;
        writes.push(vec![
            "TSCOUNTER.INCRBY".to_string(),
            keys[k].to_string(),
            by.to_string(),
            "AT".into(),
            ts.to_string(),
        ]);
        events[k].push((ts, by));
    }
    for reply in pipeline(&mut conn, &writes) {
        assert!(matches!(reply, Value::Int(_)), "{reply:?}");
    }
    let windows = ["1s", "10s", "90s", "5m", "30m", "1h", "2h", "1d", "3d"];
    let (mut checked, mut nonzero, mut refused) = (0, 0, 0);
    for step in 0..300 {
        let n = 1 + rng.below(5) as usize;
        let chosen: Vec<usize> = (0..n)
            .map(|_| rng.below(keys.len() as i64) as usize)
            .collect();
        let nw = 1 + rng.below(3) as usize;
        let ws: Vec<&str> = (0..nw).map(|_| *rng.pick(&windows)).collect();
        let at = rng
            .chance(60)
            .then(|| server_ms(&srv) - rng.below(40 * 60_000));
        let mut args = vec!["TSCOUNTER.MSUM".to_string(), n.to_string()];
        args.extend(chosen.iter().map(|&k| keys[k].to_string()));
        args.extend(ws.iter().map(|w| w.to_string()));
        if let Some(at) = at {
            args.extend(["AT".to_string(), at.to_string()]);
        }
        let before = server_ms(&srv);
        let got = srv.cmd_value(&args);
        let after = server_ms(&srv);
        let model = |now: i64| -> Option<Vec<i64>> {
            let mut totals = vec![0i64; ws.len()];
            for &k in &chosen {
                for (total, w) in totals.iter_mut().zip(&ws) {
                    let window = duration_ms(w);
                    *total += model_sum(
                        resolutions(keys[k]),
                        &events[k],
                        now,
                        at.unwrap_or(now),
                        window,
                    )?;
                }
            }
            Some(totals)
        };
        let reply = |totals: Option<Vec<i64>>| match totals {
            None => None,
            Some(t) if t.len() == 1 => Some(v_int(t[0])),
            Some(t) => Some(v_arr(t.into_iter().map(v_int).collect())),
        };
        match (reply(model(before)), reply(model(after))) {
            (None, None) => {
                let e = error_text(&got).unwrap_or_default();
                assert!(
                    e.starts_with("ERR window '")
                        && e.contains("' is longer than any resolution keeps (at most "),
                    "step {step}: {args:?}: {got:?}"
                );
                refused += 1;
            }
            (a, b) => {
                assert!(
                    Some(&got) == a.as_ref() || Some(&got) == b.as_ref(),
                    "step {step}: {args:?}: {got:?}, model {a:?} / {b:?}"
                );
                checked += 1;
                if got != v_int(0) {
                    nonzero += 1;
                }
            }
        }
    }
    assert!(
        checked > 150 && nonzero > 100 && refused > 20,
        "{checked} checked, {nonzero} not zero, {refused} refused: the workload misses a case"
    );
    // Each key's part is its own SUM: the sum over keys of SUM equals MSUM.
    let at = server_ms(&srv).to_string();
    let mut total = 0;
    for key in &keys[..4] {
        match srv.cmd_value(&["TSCOUNTER.SUM", key, "1h", "AT", &at]) {
            Value::Int(n) => total += n,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.MSUM",
            "4",
            "m:a",
            "m:b",
            "m:c",
            "m:d",
            "1h",
            "AT",
            &at
        ]),
        v_int(total)
    );
    srv.assert_alive();
}

/// `5s`, `90s`, `1h`...: the duration in ms.
fn duration_ms(text: &str) -> i64 {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let n: i64 = text[..split].parse().expect("digits");
    n * match &text[split..] {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => 1,
    }
}

per_server!(msum_replies_and_errors);
/// Exact replies in RESP2 and RESP3, and every error, which changes nothing.
fn msum_replies_and_errors(kind: &ServerKind) {
    let srv = Server::start(kind);
    let now = server_ms(&srv);
    let t0 = (now - 30_000).to_string();
    for (key, by) in [("a", 3), ("b", 4)] {
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.INCRBY", key, &by.to_string(), "AT", &t0]),
            v_int(by)
        );
    }
    let earlier = (now - 3 * 3_600_000).to_string();
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "b", "10", "AT", &earlier]),
        v_int(10)
    );
    let call = |args: &[&str]| {
        let mut all = vec!["TSCOUNTER.MSUM"];
        all.extend(args);
        srv.cmd_value(&all)
    };
    assert_eq!(call(&["2", "a", "b", "1m", "AT", &t0]), v_int(7));
    assert_eq!(
        call(&["2", "a", "b", "1m", "1d", "AT", &t0]),
        v_arr(vec![v_int(7), v_int(17)])
    );
    assert_eq!(call(&["1", "a", "1d", "AT", &t0]), v_int(3));
    // A missing key counts 0; a key named twice counts twice.
    assert_eq!(call(&["3", "a", "nope", "a", "1d", "AT", &t0]), v_int(6));
    assert_eq!(call(&["1", "nope", "1m"]), v_int(0));
    // RESP3: the same integers.
    assert_eq!(
        srv.cmd_value_resp3(&["TSCOUNTER.MSUM", "2", "a", "b", "1m", "1d", "AT", &t0]),
        v_arr(vec![v_int(7), v_int(17)])
    );
    srv.cmd_value(&["SET", "str", "x"]);
    let syntax = "ERR syntax error";
    for (args, err) in [
        (vec!["0", "a", "1m"], syntax.to_string()),
        (vec!["1001", "a", "1m"], syntax.to_string()),
        (vec!["-1", "a", "1m"], syntax.to_string()),
        (
            vec!["x", "a", "1m"],
            "ERR value is not an integer or out of range".to_string(),
        ),
        (vec!["3", "a", "b"], syntax.to_string()),
        (vec!["2", "a", "b"], syntax.to_string()),
        // As SUM: the first argument after the keys is a window.
        (
            vec!["2", "a", "b", "AT", "5"],
            "ERR invalid duration 'AT': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)".to_string(),
        ),
        (vec!["1", "a", "1m", "AT"], syntax.to_string()),
        (
            vec!["1", "a", "1m", "AT", "1", "AT", "2"],
            syntax.to_string(),
        ),
        (
            vec!["1", "a", "1m", "FOO"],
            "ERR invalid duration 'FOO': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)".to_string(),
        ),
        (
            vec!["1", "a", "1x"],
            "ERR invalid duration '1x': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)".to_string(),
        ),
        (
            vec!["1", "a", "1m", "AT", "-1"],
            "ERR timestamp is outside the kept range".to_string(),
        ),
        (
            vec!["2", "a", "str", "1m"],
            "WRONGTYPE Operation against a key holding the wrong kind of value".to_string(),
        ),
        (
            vec!["2", "nope", "a", "200d"],
            "ERR window '200d' is longer than any resolution keeps (at most 120d)".to_string(),
        ),
    ] {
        let mut all = vec!["TSCOUNTER.MSUM"];
        all.extend(&args);
        assert_eq!(
            error_text(&srv.cmd_value(&all)).as_deref(),
            Some(err.as_str()),
            "{args:?}"
        );
    }
    assert_eq!(
        error_text(&srv.cmd_value(&["TSCOUNTER.MSUM", "1", "a"])).as_deref(),
        Some("ERR wrong number of arguments for 'tscounter.msum' command")
    );
    // Sums beyond 64 bits are refused, as one counter's are.
    let big = i64::MAX.to_string();
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "big", &big, "AT", &t0]),
        v_int(i64::MAX)
    );
    assert_eq!(
        error_text(&call(&["2", "big", "a", "1d", "AT", &t0])).as_deref(),
        Some("ERR increment or decrement would overflow")
    );
    // The total is exact whenever it fits in 64 bits, whatever the keys' order: two
    // counters of 2^62 and one of -2^62 sum to 2^62 in every order, and a key named
    // twice counts twice (2^63 then does not fit).
    let (pos, neg) = ((1i64 << 62).to_string(), (-(1i64 << 62)).to_string());
    for (key, by) in [("ob1", &pos), ("ob2", &pos), ("on1", &neg)] {
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.INCRBY", key, by, "AT", &t0]),
            v_int(by.parse().unwrap())
        );
    }
    for order in [
        ["ob1", "ob2", "on1"],
        ["ob1", "on1", "ob2"],
        ["on1", "ob1", "ob2"],
    ] {
        let mut args = vec!["3"];
        args.extend(order);
        args.extend(["5m", "AT", &t0]);
        assert_eq!(call(&args), v_int(1 << 62), "{order:?}");
    }
    assert_eq!(
        call(&["4", "ob1", "on1", "on1", "ob2", "5m", "AT", &t0]),
        v_int(0)
    );
    assert_eq!(
        error_text(&call(&["3", "ob1", "ob1", "ob2", "5m", "AT", &t0])).as_deref(),
        Some("ERR increment or decrement would overflow")
    );
    // 1000 keys are taken.
    let mut many = vec!["TSCOUNTER.MSUM".to_string(), "1000".into()];
    many.extend((0..1000).map(|_| "a".to_string()));
    many.extend(strings(&["1d", "AT", &t0]));
    assert_eq!(srv.cmd_value(&many), v_int(3000));
    srv.assert_alive();
}

per_server!(msum_declares_its_keys_and_checks_each_permission);
/// GETKEYS names the keys after `numkeys`; a user without access to one of them is
/// refused.
fn msum_declares_its_keys_and_checks_each_permission(kind: &ServerKind) {
    let srv = Server::start(kind);
    assert_eq!(
        srv.cmd_value(&[
            "COMMAND",
            "GETKEYS",
            "TSCOUNTER.MSUM",
            "3",
            "a",
            "b",
            "c",
            "1m",
            "5m",
            "AT",
            "1"
        ]),
        v_bulks(&["a", "b", "c"])
    );
    srv.cmd_value(&["TSCOUNTER.INCRBY", "rl:a", "2"]);
    let mut own = conn_as_user(&srv, "reader", &["~rl:*"]);
    assert_eq!(
        conn_value(&mut own, &["TSCOUNTER.MSUM", "2", "rl:a", "rl:b", "1m"]),
        v_int(2)
    );
    for args in [
        ["TSCOUNTER.MSUM", "2", "rl:a", "other", "1m"],
        ["TSCOUNTER.MSUM", "2", "other", "rl:a", "1m"],
    ] {
        let e = error_text(&conn_value(&mut own, &args)).unwrap_or_default();
        assert!(e.starts_with("NOPERM"), "{args:?}: {e}");
    }
    srv.assert_alive();
}
