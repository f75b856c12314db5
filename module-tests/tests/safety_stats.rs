//! STATS safety, on every server kind: reads whose cost is bounded by their
//! input, output and the stored data touched once; objects whose fields a user edited
//! with native commands keep answering (a damaged period counts as empty) and keep
//! expiring; timer visits that change nothing do not touch the key; the expiry schedule
//! gives back what deleted objects used.

use std::time::{Duration, Instant};

use module_tests::*;

// ------------------------------------------------------------------------- helpers

fn is_error(v: &Value) -> bool {
    error_text(v).is_some()
}

/// The commands that read an object, each of which must answer without an error.
/// `window` is the object's whole kept span.
fn reads(key: &str, window: &str) -> Vec<Vec<String>> {
    [
        vec!["STATS.GET", key],
        vec!["STATS.GET", key, "WINDOW", window],
        vec!["STATS.QUANTILE", key, "0.1", "0.5", "0.99"],
        vec!["STATS.QUANTILE", key, "0.5", "WINDOW", window],
        vec!["STATS.RANGE", key],
        vec!["STATS.INFO", key],
        vec!["STATS.MGET", "2", key, key, "WINDOW", window],
        vec!["STATS.MQUANTILE", "1", key, "0.5", "0.99"],
    ]
    .iter()
    .map(|c| c.iter().map(|s| s.to_string()).collect())
    .collect()
}

#[track_caller]
fn assert_reads_answer(srv: &Server, key: &str, window: &str, what: &str) {
    for c in reads(key, window) {
        let v = srv.cmd_value(&c);
        assert!(!is_error(&v), "{}: {what}: {c:?} -> {v:?}", srv.kind().name);
    }
}

// ------------------------------------------------------------- 1. bounded reads

per_server!(quantile_of_many_fractions_is_one_walk);
/// 20,001 fractions over a sketch of 10,000 buckets: one sort and one walk of the
/// buckets, not one walk per fraction (that took 289 ms).
fn quantile_of_many_fractions_is_one_walk(kind: &ServerKind) {
    let srv = Server::start(kind);
    let mut conn = srv.conn();
    // gamma^i spreads the values over one bucket each: 10,000 buckets.
    let gamma: f64 = (1.0 + 0.0099) / (1.0 - 0.0099);
    let values: Vec<String> = (-1000..9000)
        .map(|i| format!("{:e}", gamma.powi(i)))
        .collect();
    for chunk in values.chunks(1000) {
        let mut c = vec!["STATS.ADD".to_string(), "q".to_string()];
        c.extend(chunk.iter().cloned());
        let replies = pipeline(&mut conn, &[c]);
        assert!(!is_error(&replies[0]), "{}: {replies:?}", kind.name);
    }
    let mut rng = Rng(42);
    let fractions: Vec<String> = (0..20_001).map(|_| format!("{}", rng.uniform())).collect();
    let mut c = vec!["STATS.QUANTILE".to_string(), "q".to_string()];
    c.extend(fractions.iter().cloned());
    assert_eq!(srv.cmd_value(&["CONFIG", "RESETSTAT"]), v_ok());
    let reply = srv.cmd_value(&c);
    let per_call = usec_per_call(&srv, "stats.quantile");
    let Value::Array(answers) = reply else {
        panic!("{}: {reply:?}", kind.name);
    };
    assert_eq!(answers.len(), fractions.len(), "{}", kind.name);
    // Answers are in argument order: spot-check against one fraction at a time.
    for at in [0usize, 1, 777, 10_000, 20_000] {
        let single = srv.cmd_value(&["STATS.QUANTILE", "q", fractions[at].as_str()]);
        assert_eq!(
            single,
            v_arr(vec![answers[at].clone()]),
            "{}: fraction {at}",
            kind.name
        );
    }
    // The machine may be loaded: the bound is 50 ms plus ten times what a native
    // command with as many arguments takes now (one walk per fraction took ~1 s).
    let mut zadd = vec!["ZADD".to_string(), "z".to_string()];
    for f in &fractions {
        zadd.push(f.clone());
        zadd.push(f.clone());
    }
    assert!(!is_error(&srv.cmd_value(&zadd)));
    let native = usec_per_call(&srv, "zadd");
    assert!(
        per_call < 50_000.0 + 10.0 * native,
        "{}: STATS.QUANTILE of 20,001 fractions took {per_call} us (ZADD {native} us)",
        kind.name
    );
    srv.assert_alive();
}

per_server!(window_and_range_over_the_most_periods_are_bounded);
/// GET WINDOW and RANGE over KEEP=2000 (the most) stored periods: one pass over the
/// stored data.
fn window_and_range_over_the_most_periods_are_bounded(kind: &ServerKind) {
    let srv = Server::start(kind);
    let mut conn = srv.conn();
    assert_eq!(
        srv.cmd_value(&["STATS.CREATE", "w", "PERIOD", "1s", "KEEP", "2000"]),
        v_ok()
    );
    let now = server_ms(&srv);
    // 1,995 periods: the clock moves on while they are written.
    let cmds: Vec<Vec<String>> = (0..1_995i64)
        .map(|i| {
            vec![
                "STATS.ADD".into(),
                "w".into(),
                format!("{}", i % 97 + 1),
                "AT".into(),
                format!("{}", now - i * 1000),
            ]
        })
        .collect();
    for chunk in cmds.chunks(2000) {
        for r in pipeline(&mut conn, chunk) {
            assert!(!is_error(&r), "{}: {r:?}", kind.name);
        }
    }
    assert_eq!(srv.cmd_value(&["CONFIG", "RESETSTAT"]), v_ok());
    let get = srv.cmd_value(&["STATS.GET", "w", "WINDOW", "2000s"]);
    let count = map_pairs(&get)
        .into_iter()
        .find(|(k, _)| k == "count")
        .map(|(_, v)| v);
    // The oldest period may have left between the writes and the read.
    assert!(
        matches!(count, Some(Value::Int(n)) if (1_985..=1_995).contains(&n)),
        "{}: {get:?}",
        kind.name
    );
    let Value::Array(rows) = srv.cmd_value(&["STATS.RANGE", "w"]) else {
        panic!("{}: RANGE is not an array", kind.name);
    };
    assert!(rows.len() >= 1_985, "{}: {}", kind.name, rows.len());
    let q = srv.cmd_value(&["STATS.QUANTILE", "w", "0.5", "WINDOW", "2000s"]);
    assert!(!is_error(&q), "{}: {q:?}", kind.name);
    // One pass over the stored periods: compared with HGETALL, which touches every
    // field once (the machine may be loaded). The module's hash scan makes two
    // strings per field, so it costs a few times HGETALL. RANGE also answers 2,000
    // maps.
    assert!(!is_error(&srv.cmd_value(&["HGETALL", "w"])));
    let native = usec_per_call(&srv, "hgetall");
    for (command, bound) in [
        ("stats.get", 1.0),
        ("stats.quantile", 1.0),
        ("stats.range", 2.0),
    ] {
        let us = usec_per_call(&srv, command);
        assert!(
            us < bound * (20_000.0 + 10.0 * native),
            "{}: {command} took {us} us (HGETALL {native} us)",
            kind.name
        );
    }
    srv.assert_alive();
}

// ------------------------------------------------------------ 2. edited objects

per_server!(edited_fields_never_break_the_object);
/// A user HSETs garbage into each kind of field, or HDELs one: the object keeps
/// answering (the damaged period counts as empty and the next write replaces it), and it
/// still leaves on time. A replica ends equal to the primary.
fn edited_fields_never_break_the_object(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    let srv = &primary;
    // A forged sketch that claims 2^40 buckets, and one with a huge index.
    let huge_count: &[u8] = &[1, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 2, 1];
    let huge_index: &[u8] = &[1, 0, 0, 1, 0xfe, 0xff, 0xff, 0xff, 0x0f, 1];
    let edits: Vec<(&str, Vec<Vec<u8>>)> = vec![
        (
            "moments garbage",
            vec![b"HSET".to_vec(), b"{m}".to_vec(), b"garbage".to_vec()],
        ),
        (
            "sketch garbage",
            vec![b"HSET".to_vec(), b"{q}".to_vec(), b"garbage".to_vec()],
        ),
        (
            "sketch huge count",
            vec![b"HSET".to_vec(), b"{q}".to_vec(), huge_count.to_vec()],
        ),
        (
            "sketch huge index",
            vec![b"HSET".to_vec(), b"{q}".to_vec(), huge_index.to_vec()],
        ),
        (
            "moments huge values",
            vec![
                b"HSET".to_vec(),
                b"{m}".to_vec(),
                b"1 1e308 0 1e308 1e308 1e308 1e308".to_vec(),
            ],
        ),
        ("moments deleted", vec![b"HDEL".to_vec(), b"{m}".to_vec()]),
        ("sketch deleted", vec![b"HDEL".to_vec(), b"{q}".to_vec()]),
        (
            "foreign field",
            vec![b"HSET".to_vec(), b"5:m".to_vec(), b"x".to_vec()],
        ),
    ];
    const PERIOD: u64 = 300;
    for (n, (what, edit)) in edits.iter().enumerate() {
        let key = format!("e{n}");
        assert_eq!(
            srv.cmd_value(&["STATS.CREATE", &key, "PERIOD", "300ms", "KEEP", "2"]),
            v_ok()
        );
        let v = srv.cmd_value(&["STATS.ADD", &key, "1", "2", "3"]);
        assert!(!is_error(&v), "{}: {what}: {v:?}", kind.name);
        let fields = hgetall(srv, &key);
        let m = fields
            .keys()
            .find(|f| f.ends_with(":m"))
            .unwrap_or_else(|| panic!("no :m field in {fields:?}"))
            .clone();
        let q = m.replace(":m", ":q");
        let mut c: Vec<Vec<u8>> = vec![edit[0].clone(), key.as_bytes().to_vec()];
        for a in &edit[1..] {
            c.push(match a.as_slice() {
                b"{m}" => m.as_bytes().to_vec(),
                b"{q}" => q.as_bytes().to_vec(),
                _ => a.clone(),
            });
        }
        let v = srv.cmd_value(&c);
        assert!(!is_error(&v), "{}: {what}: {v:?}", kind.name);
        assert_reads_answer(srv, &key, "600ms", what);
        // Writes to the damaged period answer too, and replace it.
        let v = srv.cmd_value(&["STATS.ADD", &key, "10"]);
        assert!(!is_error(&v), "{}: {what}: ADD -> {v:?}", kind.name);
        assert_reads_answer(srv, &key, "600ms", what);
        assert!(
            !is_error(&srv.cmd_value(&["STATS.QUANTILE", &key, "0.5"])),
            "{}: {what}",
            kind.name
        );
    }
    // Every object leaves once its periods have (KEEP 2 x 300 ms), except the one
    // with a field tally never wrote (the user's field stays, with the settings).
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut left: Vec<usize> = (0..edits.len()).collect();
    while !left.is_empty() && Instant::now() < deadline {
        left.retain(|n| {
            let key = format!("e{n}");
            let fields = hgetall(srv, &key);
            fields
                .keys()
                .any(|f| (f.ends_with(":m") || f.ends_with(":q")) && f != "5:m")
        });
        std::thread::sleep(Duration::from_millis(PERIOD / 3));
    }
    assert_eq!(
        left,
        Vec::<usize>::new(),
        "{}: periods never left",
        kind.name
    );
    for n in 0..edits.len() - 1 {
        assert!(!exists(srv, format!("e{n}")), "{}: e{n} stayed", kind.name);
    }
    let max_tick = info_i64(srv, "tally", "tally_max_tick_us");
    assert!(
        max_tick < 10_000,
        "{}: a tick took {max_tick} us",
        kind.name
    );
    assert_replica_equal(&primary, &replica, "after the edits");
    srv.assert_alive();
    replica.assert_alive();
}

per_server!(edited_markers_are_refused_or_bounded);
/// The marker: garbage or another family makes the hash something else (a user's hash
/// is never taken over); valid but extreme settings stay within the documented bounds.
fn edited_markers_are_refused_or_bounded(kind: &ServerKind) {
    let srv = Server::start(kind);
    let since_start = Lost::start(&srv);
    for (n, marker) in [
        "garbage",
        "stats 1ms 99999999999",
        "stats 9223372036854775807 2",
        "stats 1ms -5",
        "stats",
    ]
    .iter()
    .enumerate()
    {
        let key = format!("m{n}");
        assert!(!is_error(&srv.cmd_value(&["STATS.ADD", &key, "1"])));
        assert_eq!(srv.cmd_value(&["HSET", &key, "_tally", marker]), v_int(0));
        for c in reads(&key, "1h") {
            assert_eq!(
                srv.cmd_value(&c),
                v_err(WRONGTYPE),
                "{}: {marker}",
                kind.name
            );
        }
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", &key, "1"]),
            v_err(WRONGTYPE),
            "{}: {marker}",
            kind.name
        );
    }
    // The most extreme settings a stored object may have (an earlier version created up
    // to KEEP 10000): 1 ms periods, on an object whose periods were written with 1 h
    // periods, plus 10,000 foreign fields.
    assert!(!is_error(&srv.cmd_value(&["STATS.ADD", "x", "1", "2"])));
    let mut c = vec!["HSET".to_string(), "x".to_string()];
    for i in 0..10_000 {
        c.push(format!("junk{i}"));
        c.push("v".into());
    }
    assert_eq!(srv.cmd_value(&c), v_int(10_000));
    assert_eq!(
        srv.cmd_value(&["HSET", "x", "_tally", "stats 1ms 10000"]),
        v_int(0)
    );
    // Its windows merge at most 2000 periods, like those of a new object.
    assert_eq!(
        srv.cmd_value(&["STATS.GET", "x", "WINDOW", "10s"]),
        v_err("ERR WINDOW must be a multiple of the period (1ms) of at most 2000 periods")
    );
    assert_eq!(srv.cmd_value(&["CONFIG", "RESETSTAT"]), v_ok());
    let lost = Lost::start(&srv);
    for _ in 0..20 {
        assert_reads_answer(&srv, "x", "2s", "extreme marker");
        let v = srv.cmd_value(&["STATS.ADD", "x", "5"]);
        assert!(!is_error(&v), "{}: {v:?}", kind.name);
        std::thread::sleep(Duration::from_millis(5));
    }
    for command in ["stats.add", "stats.get", "stats.info", "stats.range"] {
        let us = usec_per_call_held(&srv, command, &lost);
        assert!(us < 10_000.0, "{}: {command} took {us} us", kind.name);
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_ticks_below(&srv, STALL_LIMIT_US, &since_start, "extreme marker");
    srv.assert_alive();
}

per_server!(foreign_fields_do_not_make_visits_or_writes_walk_them);
/// 200,000 foreign fields in an object with 100 ms periods: neither the writes nor the
/// timer visits (one each time a period leaves) walk them all every time.
fn foreign_fields_do_not_make_visits_or_writes_walk_them(kind: &ServerKind) {
    let srv = Server::start(kind);
    let mut conn = srv.conn();
    // KEEP 20: the object lives 2 s past its last value (a key with no period left is
    // deleted, and the next ADD would make one of the default settings), far more than
    // the gap between two writes below on however busy a machine.
    assert_eq!(
        srv.cmd_value(&["STATS.CREATE", "j", "PERIOD", "100ms", "KEEP", "20"]),
        v_ok()
    );
    for chunk in 0..20 {
        let mut c = vec!["HSET".to_string(), "j".to_string()];
        for i in 0..10_000 {
            c.push(format!("junk{chunk}:{i}"));
            c.push("v".into());
        }
        let r = pipeline(&mut conn, &[c]);
        assert_eq!(r, vec![v_int(10_000)]);
    }
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]),
        v_ok()
    );
    // No STATS command and no tick of 10 ms, beyond the time the server lost to other
    // work, checked every round.
    let mut watch = StallWatch::start(&srv, STALL_LIMIT_US);
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1500) {
        let v = srv.cmd_value(&["STATS.ADD", "j", "1"]);
        assert!(!is_error(&v), "{}: {v:?}", kind.name);
        assert_reads_answer(&srv, "j", "300ms", "junk");
        watch.check(&srv, "junk");
        std::thread::sleep(Duration::from_millis(30));
    }
    std::thread::sleep(Duration::from_millis(500));
    watch.check(&srv, "junk, after the writes");
    // The same object all along, not one made again with the default settings.
    let info = map_pairs(&srv.cmd_value(&["STATS.INFO", "j"]));
    let setting = |name: &str| info.iter().find(|(f, _)| f == name).map(|(_, v)| v.clone());
    assert_eq!(
        (setting("period"), setting("keep")),
        (Some(v_int(100)), Some(v_int(20))),
        "{}: {info:?}",
        kind.name
    );
    srv.assert_alive();
}

// ------------------------------------------------------------ 3. timer visits

per_server!(a_visit_that_changes_nothing_keeps_watch);
/// A visit that changes nothing (here: the one a RENAME asks for) does not open the key
/// for writing, which would abort a WATCHing transaction.
///
/// NEEDS the lead's change to `commands::expire_key` (src/commands/mod.rs) opening the
/// scheduled key read-only; the STATS visit itself reopens it for writing only when it
/// deletes something.
fn a_visit_that_changes_nothing_keeps_watch(kind: &ServerKind) {
    let srv = Server::start(kind);
    assert!(!is_error(&srv.cmd_value(&["STATS.ADD", "s", "1"])));
    let mut conn = srv.conn();
    // One pipeline: the WATCH comes before any timer tick.
    let r = pipeline(&mut conn, &[vec!["RENAME", "s", "s2"], vec!["WATCH", "s2"]]);
    assert_eq!(r, vec![v_ok(), v_ok()], "{}", kind.name);
    // The rename schedules a visit at once; let several ticks pass.
    let visited = info_i64(&srv, "tally", "tally_keys_visited");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        info_i64(&srv, "tally", "tally_keys_visited") > visited,
        "{}: no visit",
        kind.name
    );
    let r = pipeline(&mut conn, &[vec!["MULTI"], vec!["PING"], vec!["EXEC"]]);
    assert_eq!(
        r.get(2),
        Some(&v_arr(vec![v_simple("PONG")])),
        "{}: the visit invalidated WATCH",
        kind.name
    );
    srv.assert_alive();
}

// ------------------------------------------------------ 5. schedule gives back

per_server!(deleted_objects_leave_the_schedule);
/// 2,000 x (STATS.ADD, DEL): the schedule forgets deleted objects.
///
/// NEEDS the lead's keyspace-event fix (src/commands/mod.rs, src/expiry.rs: a `del`
/// event unschedules the key); it fails on a branch without it.
fn deleted_objects_leave_the_schedule(kind: &ServerKind) {
    let srv = Server::start(kind);
    let mut conn = srv.conn();
    let cmds: Vec<Vec<String>> = (0..2000)
        .flat_map(|i| {
            [
                vec!["STATS.ADD".to_string(), format!("s:{i}"), "1".into()],
                vec!["DEL".to_string(), format!("s:{i}")],
            ]
        })
        .collect();
    for r in pipeline(&mut conn, &cmds) {
        assert!(!is_error(&r), "{}: {r:?}", kind.name);
    }
    let tracked = info_i64(&srv, "tally", "tally_tracked_objects");
    assert!(tracked <= 5, "{}: {tracked} tracked", kind.name);
    srv.assert_alive();
}

per_server!(objects_expiring_whole_keep_the_server_alive);
/// 5 x 1000 objects whose every period leaves at once: the timer unlinks each key. It used to
/// do that through a second (write) handle while its read handle was still open, and the
/// read handle's close then read the freed value (Valkey 9 crashed on it now and then).
fn objects_expiring_whole_keep_the_server_alive(kind: &ServerKind) {
    let srv = Server::start(kind);
    let mut conn = srv.conn();
    for round in 0..5 {
        let cmds: Vec<Vec<String>> = (0..1000)
            .flat_map(|i| {
                let key = format!("gone:{round}:{i}");
                [
                    strings(&["STATS.CREATE", &key, "PERIOD", "100ms", "KEEP", "1"]),
                    // REPORT allocates sorted-set nodes (score 1.0) among the freed values.
                    strings(&[
                        "STATS.ADD",
                        &key,
                        "1",
                        "REPORT",
                        "slowest",
                        &format!("m:{round}:{i}"),
                        "KEEP",
                        "100000",
                    ]),
                ]
            })
            .collect();
        for r in pipeline(&mut conn, &cmds) {
            assert!(!is_error(&r), "{}: {r:?}", kind.name);
        }
        assert!(
            wait_until(Duration::from_secs(10), || srv
                .query::<i64, &str>(&["DBSIZE"])
                == 1),
            "{}: round {round}: objects do not expire",
            kind.name
        );
        srv.assert_alive();
    }
}

per_server!(the_smallest_expiry_budget_still_makes_progress);
/// With `tally.expire-budget-us` at its minimum (10), a visit that could not start within
/// the budget answered "unfinished" and came back next tick, forever: an object with a
/// long name (slow to open) was visited every millisecond without ever being trimmed, and
/// the start-up scan, which only ran with budget left, never finished. Now each tick makes
/// at least one visit and one scan step with a minimal budget of their own.
fn the_smallest_expiry_budget_still_makes_progress(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start(kind);
    let mut conn = srv.conn();
    let long = "x".repeat(200_000);
    let mut cmds = Vec::new();
    for i in 0..20 {
        let key = format!("{long}:{i}");
        cmds.push(strings(&[
            "STATS.CREATE",
            &key,
            "PERIOD",
            "100ms",
            "KEEP",
            "1",
        ]));
        cmds.push(strings(&["STATS.ADD", &key, "1"]));
    }
    cmds.push(strings(&["CONFIG", "SET", "tally.expire-budget-us", "10"]));
    for r in pipeline(&mut conn, &cmds) {
        assert!(!is_error(&r), "{k}: {r:?}");
    }
    assert!(
        wait_until(Duration::from_secs(10), || srv
            .query::<i64, &str>(&["DBSIZE"])
            == 0),
        "{k}: objects do not expire with the smallest budget"
    );
    // A reload starts the scan again over objects that are due at once.
    let cmds: Vec<Vec<String>> = (0..20)
        .flat_map(|i| {
            let key = format!("{long}:{i}");
            [
                strings(&["STATS.CREATE", &key, "PERIOD", "100ms", "KEEP", "1"]),
                strings(&["STATS.ADD", &key, "1"]),
            ]
        })
        .collect();
    pipeline(&mut conn, &cmds);
    assert_eq!(srv.cmd_value(&["DEBUG", "RELOAD"]), v_ok(), "{k}");
    assert!(
        wait_until(Duration::from_secs(10), || info_i64(
            &srv,
            "tally",
            "tally_scan_in_progress"
        ) == 0),
        "{k}: the start-up scan never finishes with the smallest budget"
    );
    assert!(
        wait_until(Duration::from_secs(10), || srv
            .query::<i64, &str>(&["DBSIZE"])
            == 0),
        "{k}: objects do not expire after a reload with the smallest budget"
    );
    srv.assert_alive();
}
