//! Every error of the TSCOUNTER contract with its exact text, and "nothing written on
//! error"; `AT` within the allowed future counts as now.

use super::*;

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

    // Bad durations: the error says what a duration is.
    for (cmd, text) in [
        (&["TSCOUNTER.SUM", "c", "5x"][..], "5x"),
        (&["TSCOUNTER.SUM", "c", "1m", "5x"], "5x"),
        (&["TSCOUNTER.SUM", "c", "0"], "0"),
        (&["TSCOUNTER.SUM", "c", "-5s"], "-5s"),
        (&["TSCOUNTER.SUM", "c", "1m", "FOO"], "FOO"),
        (&["TSCOUNTER.SUM", "c", "1M"], "1M"),
        (&["TSCOUNTER.SUM", "c", "5mins"], "5mins"),
        (&["TSCOUNTER.RANGE", "c", "5x"], "5x"),
        (&["TSCOUNTER.RANGE", "c", "0"], "0"),
        (&["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "5x:10"], "5x"),
    ] {
        assert_refused(&srv, c, cmd, &bad_duration(text));
        assert!(!exists(&srv, b"n"), "{k}");
    }
    // A bad resolution is reported like a bad duration, naming the token and what is
    // wrong in it: its form, or a duplicate.
    let form = "a resolution is res:samples, a duration and how many slots of it to keep \
                (1m:60, 1h:24)";
    let duplicate = "duplicate resolution: each resolution is given once";
    for (cmd, text, hint) in [
        (
            &["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1s"][..],
            "1s",
            form,
        ),
        (
            &["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1m:60", "1h"],
            "1h",
            form,
        ),
        (
            &["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1s:5", "FOO"],
            "FOO",
            form,
        ),
        (
            &["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1s:x"],
            "1s:x",
            form,
        ),
        (
            &["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1s:5", "1000:3"],
            "1000:3",
            duplicate,
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
            duplicate,
        ),
        (
            &["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1s:0"],
            "1s:0",
            form,
        ),
        (
            &["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1m:5", "1s:-1"],
            "1s:-1",
            form,
        ),
    ] {
        assert_refused(
            &srv,
            c,
            cmd,
            &format!("ERR invalid duration '{text}': {hint}"),
        );
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
        (
            args(&[
                "TSCOUNTER.CREATE",
                "n",
                "RESOLUTIONS",
                "1s:524288",
                "1m:524289",
            ]),
            "ERR a counter keeps at most 1048576 samples over all its resolutions",
        ),
        // Too many samples in one resolution is the counter's size too, never a bad
        // duration.
        (
            args(&["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1s:1048577"]),
            "ERR a counter keeps at most 1048576 samples over all its resolutions",
        ),
        (
            args(&["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1m:2000000"]),
            "ERR a counter keeps at most 1048576 samples over all its resolutions",
        ),
        (
            args(&[
                "TSCOUNTER.CREATE",
                "n",
                "RESOLUTIONS",
                "1s:600000",
                "1m:600000",
            ]),
            "ERR a counter keeps at most 1048576 samples over all its resolutions",
        ),
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
        srv.cmd_value(&["TSCOUNTER.CREATE", "n1", "resolutions", "1s:1048576"]),
        v_ok(),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.CREATE",
            "year",
            "RESOLUTIONS",
            "1s:86400",
            "1m:525600",
            "1h:87600"
        ]),
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
            (&["TSCOUNTER.INCRBY", key, "1", "AT", &max], OUTSIDE),
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
            "ERR window '2h' is longer than any resolution keeps (at most 1h)",
        ),
        (
            &["TSCOUNTER.SUM", "c", "1m", "3600001"],
            "ERR window '3600001ms' is longer than any resolution keeps (at most 1h)",
        ),
        (
            &["TSCOUNTER.SUM", "missing", "1000d"],
            "ERR window '1000d' is longer than any resolution keeps (at most 120d)",
        ),
        (
            &["TSCOUNTER.RANGE", "c", "5s"],
            "ERR the counter has no resolution '5s' (it has 1s, 1m)",
        ),
        (
            &["TSCOUNTER.RANGE", "c", "2000", "EMPTY"],
            "ERR the counter has no resolution '2s' (it has 1s, 1m)",
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

/// The largest duration (10,000 years of 365.25 days) and the timestamp bound (2^53).
const MAX_DURATION_MS: i64 = 315_576_000_000_000;
const TIMESTAMP_LIMIT: i64 = 1 << 53;

per_server!(edges_of_time_are_refused);
/// A timestamp outside `[0, 2^53)` is outside the kept range, a duration or a resolution's
/// span beyond 10,000 years is an invalid duration, on every command and config that takes
/// one; the largest allowed values work; nothing is written or changed on refusal.
fn edges_of_time_are_refused(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let max_days = MAX_DURATION_MS / 86_400_000; // 3652500d, exactly
    let over_days = format!("{}d", max_days + 1);
    let max_d = format!("{max_days}d");
    // 1w:9000 keeps 172 years: at today's clock that reaches before 1970, so a negative
    // AT is "kept" unless timestamps themselves are bounded.
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.CREATE",
            "long",
            "RESOLUTIONS",
            "1d:1000",
            "1w:9000"
        ]),
        v_ok()
    );
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCR", "long"]), v_int(1));
    let invalid = |text: &str| long_duration(text);
    let span = |text: &str| {
        format!(
            "ERR invalid duration '{text}': a resolution's span (res x samples) is at most \
             10000 years"
        )
    };
    let (neg, day_before_epoch) = ("-100000000000000", "-86400000");
    let limit = TIMESTAMP_LIMIT.to_string();
    let max_ts = (TIMESTAMP_LIMIT - 1).to_string();
    let i64_max = i64::MAX.to_string();
    for key in ["long", "missing"] {
        let kb = key.as_bytes();
        for (cmd, err) in [
            (&["TSCOUNTER.INCR", key, "AT", neg][..], OUTSIDE.to_string()),
            (
                &["TSCOUNTER.INCR", key, "AT", day_before_epoch],
                OUTSIDE.into(),
            ),
            (&["TSCOUNTER.INCRBY", key, "3", "AT", "-1"], OUTSIDE.into()),
            (
                &["TSCOUNTER.INCRBY", key, "3", "AT", &limit],
                OUTSIDE.into(),
            ),
            (
                &["TSCOUNTER.INCRBY", key, "3", "AT", &i64_max],
                OUTSIDE.into(),
            ),
            // Inside the range but far ahead: the future rule.
            (
                &["TSCOUNTER.INCRBY", key, "3", "AT", &max_ts],
                FUTURE.into(),
            ),
            (
                &["TSCOUNTER.SUM", key, "1d", "AT", day_before_epoch],
                OUTSIDE.into(),
            ),
            (&["TSCOUNTER.SUM", key, "1d", "AT", &limit], OUTSIDE.into()),
            (
                &["TSCOUNTER.LIMIT", key, "1", "1d", "9", "AT", "-1"],
                OUTSIDE.into(),
            ),
            (
                &["TSCOUNTER.LIMIT", key, "1", "1d", "9", "AT", &limit],
                OUTSIDE.into(),
            ),
            (
                &["TSCOUNTER.RANGE", key, "1d", "FROM", "-1"],
                OUTSIDE.into(),
            ),
            (
                &["TSCOUNTER.RANGE", key, "1d", "TO", &limit],
                OUTSIDE.into(),
            ),
            (
                &["TSCOUNTER.RANGE", key, "1d", "FROM", neg, "EMPTY"],
                OUTSIDE.into(),
            ),
            // Durations beyond 10,000 years.
            (&["TSCOUNTER.SUM", key, &over_days], invalid(&over_days)),
            (
                &["TSCOUNTER.SUM", key, "1d", "106751991167d"],
                invalid("106751991167d"),
            ),
            (
                &["TSCOUNTER.LIMIT", key, "1", &over_days, "9"],
                invalid(&over_days),
            ),
            (
                &["TSCOUNTER.RANGE", key, &over_days, "EMPTY"],
                invalid(&over_days),
            ),
        ] {
            assert_refused(&srv, kb, cmd, &err);
        }
    }
    assert!(!exists(&srv, b"missing"), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "long", "1d"]),
        v_int(1),
        "{k}"
    );

    // Resolutions: the resolution itself and its span (resolution x samples).
    for (spec, err) in [
        ("106751991167d:100000", invalid("106751991167d")),
        (&format!("{over_days}:1"), invalid(&over_days)),
        (&format!("{max_d}:2"), span(&format!("{max_d}:2"))),
        ("1000d:10000", span("1000d:10000")),
        (
            &format!("{}ms:10000", MAX_DURATION_MS / 10_000 + 1),
            span(&format!("{}ms:10000", MAX_DURATION_MS / 10_000 + 1)),
        ),
    ] {
        assert_refused(
            &srv,
            b"n3",
            &["TSCOUNTER.CREATE", "n3", "RESOLUTIONS", spec],
            &err,
        );
        let got = srv.cmd_value(&["CONFIG", "SET", "tally.counter-resolutions", spec]);
        let text = error_text(&got).unwrap_or_else(|| panic!("{k}: {spec}: {got:?}"));
        assert!(
            text.starts_with("ERR") && text.ends_with(&err[4..]),
            "{k}: {text}"
        );
        assert_eq!(
            config_get(&srv, "tally.counter-resolutions"),
            v_bulk(DEFAULT_RES),
            "{k}"
        );
    }
    // max-future is a duration too.
    let got = srv.cmd_value(&["CONFIG", "SET", "tally.max-future", &over_days]);
    let text = error_text(&got).unwrap_or_else(|| panic!("{k}: {got:?}"));
    assert!(text.ends_with(&invalid(&over_days)[4..]), "{k}: {text}");
    assert_eq!(config_get(&srv, "tally.max-future"), v_bulk("1m"), "{k}");

    // The largest allowed values are accepted and answer sensibly: one slot from the epoch.
    let widest = format!("{}ms:10000", MAX_DURATION_MS / 10_000);
    for (key, spec) in [
        ("widest", format!("{max_d}:1")),
        ("widest2", widest.clone()),
    ] {
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.CREATE", key, "RESOLUTIONS", &spec]),
            v_ok(),
            "{k}: {spec}"
        );
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.INCRBY", key, "4", "AT", "0"]),
            v_int(4),
            "{k}"
        );
    }
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.RANGE", "widest", &max_d, "EMPTY"]),
        v_pairs(&[(0, 4)]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "widest", &max_d]),
        v_int(4),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "widest2", &max_d]),
        v_int(4),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.counter-resolutions", &widest]),
        v_ok(),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.max-future", &max_d]),
        v_ok(),
        "{k}"
    );
    // Nearly 10,000 years ahead is now within max-future: it counts as now; 2^53 is not a
    // timestamp whatever max-future says.
    let far = (server_ms(&srv) + MAX_DURATION_MS - 3_600_000).to_string();
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "auto", "2", "AT", &far]),
        v_int(2),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "auto", "3", "AT", &max_ts]),
        v_err(FUTURE),
        "{k}"
    );
    assert_refused(
        &srv,
        b"auto",
        &["TSCOUNTER.INCRBY", "auto", "2", "AT", &limit],
        OUTSIDE,
    );
    srv.assert_alive();
}

per_server!(module_arguments_beyond_the_edges_refuse_the_load);
/// `MODULE LOAD` with a duration config beyond 10,000 years (a resolution span, a window,
/// `max-future`) or a `stats-period` beyond 365.25 days is refused; the largest allowed
/// values load.
fn module_arguments_beyond_the_edges_refuse_the_load(kind: &ServerKind) {
    let srv = Server::start_without_module(kind);
    let k = &kind.name;
    let module = module_path().display().to_string();
    for (name, value) in [
        ("counter-resolutions", "3652500d:2"),
        ("counter-resolutions", "106751991167d:100000"),
        ("max-future", "3652501d"),
        ("rank-window", "3652501d"),
        ("rank-slot", "106751991167d"),
        ("stats-period", "366d"),
    ] {
        let reply = srv.cmd_value(&["MODULE", "LOAD", &module, name, value]);
        assert!(
            error_text(&reply).is_some(),
            "{k}: {name} {value}: {reply:?}"
        );
        srv.assert_alive();
    }
    assert_eq!(
        srv.cmd_value(&[
            "MODULE",
            "LOAD",
            &module,
            "counter-resolutions",
            "3652500d:1",
            "max-future",
            "3652500d",
            "stats-period",
            "8766h",
        ]),
        v_ok(),
        "{k}"
    );
    assert_eq!(
        config_get(&srv, "tally.counter-resolutions"),
        v_bulk("3652500d:1"),
        "{k}"
    );
}
