//! A long counter at scale: `RESOLUTIONS 1s:86400 1m:525600 1h:87600` (a day of seconds, a
//! year of minutes, ten years of hours) filled with 100,000 minutes of history by
//! `INCRBY ... AT`, oldest first, as an import would (`TALLY_LONG=1`: nearly the whole
//! year, 525,000 minutes).
//!
//! * No command and no timer tick holds the server for 10 ms while it is written, packed,
//!   read, reloaded and deleted (`SLOWLOG`, `tally_max_tick_us`, beyond the time the
//!   server lost to other work: [`StallWatch`]).
//! * Memory: at most 3 bytes a sample (`MEMORY USAGE ... SAMPLES 0` over INFO's `slots`)
//!   once the import ends.
//! * Sums of 1 day (seconds), 7, 30 days and the whole history (minutes), and of 1 year
//!   (hours) equal a model of the writes; a `SUM` of 7 days takes at most 1 ms at the
//!   server.
//! * An `AT` into an old, packed minute is exact; `LIMIT`, `RANGE` of a day and `INFO`
//!   answer; `DEBUG RELOAD` answers the same.

use module_tests::*;

const MINUTE: i64 = 60_000;

/// Minutes of history written: 100,000, or with `TALLY_LONG` nearly the year the counter
/// keeps (all of them still kept while the test runs).
fn minutes() -> i64 {
    if long_run() {
        525_000
    } else {
        100_000
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// The sums checked against the model, at `at` (the newest minute written), with the
/// server's clock just before and just after the read.
fn sums(srv: &Server, at: i64) -> (Vec<i64>, i64, i64) {
    let before = server_ms(srv);
    let reply = srv.cmd_value(&[
        "TSCOUNTER.SUM",
        "year",
        "1d",
        "7d",
        "30d",
        &format!("{}m", minutes()),
        "365d",
        "AT",
        &at.to_string(),
    ]);
    let after = server_ms(srv);
    let Value::Array(items) = reply else {
        panic!("{reply:?}")
    };
    (items.iter().map(int).collect(), before, after)
}

/// Asserts that `sums` (from [`sums`]) are the model's at the server's time before or after
/// the read (a second's slot may leave the day in between).
fn assert_sums(
    (got, before, after): (Vec<i64>, i64, i64),
    expected: impl Fn(i64) -> Vec<i64>,
    what: &str,
) {
    let (a, b) = (expected(before), expected(after));
    assert!(
        got == a || got == b,
        "{what}: {got:?}, expected {a:?} or {b:?}"
    );
}

/// The sum of the model's counts in the `n` slots of `res_ms` ending with `at`'s, among
/// the `samples` slots kept at `now`.
fn model_sum(writes: &[(i64, i64)], res_ms: i64, samples: i64, n: i64, at: i64, now: i64) -> i64 {
    let hi = at.div_euclid(res_ms);
    let lo = (hi - n + 1).max(now.div_euclid(res_ms) - samples + 1);
    writes
        .iter()
        .filter(|(ts, _)| (lo..=hi).contains(&ts.div_euclid(res_ms)))
        .map(|(_, c)| c)
        .sum()
}

per_server!(a_year_of_minutes_is_packed_read_and_reloaded_without_a_stall);
fn a_year_of_minutes_is_packed_read_and_reloaded_without_a_stall(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start(kind);
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]),
        v_ok()
    );
    let mut watch = StallWatch::start(&srv, STALL_LIMIT_US);
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
    // One write a minute, counts 1..5000, the newest a few minutes ago.
    let newest = server_ms(&srv) - 5 * MINUTE;
    let mut rng = Rng(48);
    let writes: Vec<(i64, i64)> = (0..minutes())
        .rev()
        .map(|back| (newest - back * MINUTE, 1 + rng.below(5000)))
        .collect();
    let mut conn = srv.conn();
    for (i, chunk) in writes.chunks(2_000).enumerate() {
        let cmds: Vec<Vec<String>> = chunk
            .iter()
            .map(|(ts, by)| {
                strings(&[
                    "TSCOUNTER.INCRBY",
                    "year",
                    &by.to_string(),
                    "AT",
                    &ts.to_string(),
                ])
            })
            .collect();
        for reply in pipeline(&mut conn, &cmds) {
            assert!(matches!(reply, Value::Int(n) if n >= 1), "{k}: {reply:?}");
        }
        if i % 10 == 0 {
            watch.check(&srv, "the import");
        }
    }
    watch.check(&srv, "the import");
    // The timer packs what the writes left (the runs that became old while written).
    let most_fields = minutes() / 240 + 87600 / 240 + 1500;
    assert!(
        wait_until(std::time::Duration::from_secs(30), || {
            int(&srv.cmd_value(&["HLEN", "year"])) < most_fields
        }),
        "{k}: {} fields",
        int(&srv.cmd_value(&["HLEN", "year"]))
    );
    watch.check(&srv, "packing");

    let info = srv.cmd_value(&["TSCOUNTER.INFO", "year"]);
    let slots = map_pairs(&info)
        .into_iter()
        .find(|(name, _)| name == "slots")
        .map(|(_, v)| int(&v))
        .unwrap();
    // Minutes, the hours they fall in, and the seconds of the last day.
    let hours = writes
        .iter()
        .map(|(ts, _)| ts.div_euclid(3_600_000))
        .collect::<std::collections::BTreeSet<_>>()
        .len() as i64;
    let seconds = writes
        .iter()
        .filter(|(ts, _)| *ts > server_ms(&srv) - 86_400_000 + 1_000)
        .count() as i64;
    assert!(
        (minutes() + hours + seconds - 2..=minutes() + hours + seconds).contains(&slots),
        "{k}: {info:?}"
    );
    let bytes = int(&srv.cmd_value(&["MEMORY", "USAGE", "year", "SAMPLES", "0"]));
    println!(
        "{k}: {slots} slots, {bytes} bytes, {:.2} a sample (hours' counts above 16,384)",
        bytes as f64 / slots as f64
    );
    // The contract's figure: counts below 16,384, here the minutes alone.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "minutes", "RESOLUTIONS", "1m:525600"]),
        v_ok()
    );
    for chunk in writes.chunks(2_000) {
        let cmds: Vec<Vec<String>> = chunk
            .iter()
            .map(|(ts, by)| {
                strings(&[
                    "TSCOUNTER.INCRBY",
                    "minutes",
                    &by.to_string(),
                    "AT",
                    &ts.to_string(),
                ])
            })
            .collect();
        pipeline(&mut conn, &cmds);
    }
    assert!(
        wait_until(std::time::Duration::from_secs(30), || {
            int(&srv.cmd_value(&["HLEN", "minutes"])) < minutes() / 240 + 500
        }),
        "{k}: minutes not packed"
    );
    let bytes = int(&srv.cmd_value(&["MEMORY", "USAGE", "minutes", "SAMPLES", "0"]));
    let per_sample = bytes as f64 / minutes() as f64;
    println!("{k}: minutes alone {bytes} bytes, {per_sample:.2} a sample");
    assert!(per_sample <= 3.0, "{k}: {per_sample:.2} bytes a sample");
    watch.check(&srv, "a second import");

    // Sums against the model.
    let at = newest;
    let expected = |writes: &[(i64, i64)], now: i64| {
        vec![
            model_sum(writes, 1_000, 86_400, 86_400, at, now),
            model_sum(writes, MINUTE, 525_600, 7 * 1440, at, now),
            model_sum(writes, MINUTE, 525_600, 30 * 1440, at, now),
            model_sum(writes, MINUTE, 525_600, minutes(), at, now),
            model_sum(writes, 3_600_000, 87_600, 365 * 24, at, now),
        ]
    };
    assert_sums(
        sums(&srv, at),
        |now| expected(&writes, now),
        &format!("{k}: sums"),
    );
    watch.check(&srv, "sums");
    assert_eq!(srv.cmd_value(&["CONFIG", "RESETSTAT"]), v_ok());
    let lost = Lost::start(&srv);
    for _ in 0..10 {
        srv.cmd_value(&["TSCOUNTER.SUM", "year", "7d"]);
    }
    let us = usec_per_call_held(&srv, "tscounter.sum", &lost);
    println!("{k}: SUM 7d {us:.0} us");
    assert!(us <= 1_000.0, "{k}: SUM 7d took {us} us at the server");

    // An AT into an old, packed minute (a backfill, then a correction) is exact.
    let mut writes = writes;
    let old = writes[writes.len() / 3].0;
    for by in [1234, -34] {
        let reply = srv.cmd_value(&[
            "TSCOUNTER.INCRBY",
            "year",
            &by.to_string(),
            "AT",
            &old.to_string(),
        ]);
        writes.push((old, by));
        let minute = old.div_euclid(MINUTE);
        let count: i64 = writes
            .iter()
            .filter(|(ts, _)| ts.div_euclid(MINUTE) == minute)
            .map(|(_, c)| c)
            .sum();
        assert_eq!(reply, v_int(count), "{k}");
    }
    assert_sums(
        sums(&srv, at),
        |now| expected(&writes, now),
        &format!("{k}: sums after AT"),
    );
    watch.check(&srv, "AT into the past");

    // LIMIT over a week, allowed and refused; RANGE of a day; INFO.
    let now = server_ms(&srv);
    let week = model_sum(&writes, MINUTE, 525_600, 7 * 1440, now, now);
    let limit = |max: i64| srv.cmd_value(&["TSCOUNTER.LIMIT", "year", "0", "7d", &max.to_string()]);
    match limit(i64::MAX) {
        Value::Array(items) => assert_eq!(items.first(), Some(&v_int(1)), "{k}: {items:?}"),
        other => panic!("{other:?}"),
    }
    match limit(week / 2) {
        Value::Array(items) => assert_eq!(items.first(), Some(&v_int(0)), "{k}: {items:?}"),
        other => panic!("{other:?}"),
    }
    let day = srv.cmd_value(&[
        "TSCOUNTER.RANGE",
        "year",
        "1m",
        "FROM",
        &(at - 86_400_000 + 1).to_string(),
        "TO",
        &at.to_string(),
    ]);
    let Value::Array(day) = day else {
        panic!("{day:?}")
    };
    // The minutes from FROM's to TO's, each written once.
    let listed = (at.div_euclid(MINUTE) - (at - 86_400_000 + 1).div_euclid(MINUTE) + 1) as usize;
    assert_eq!(day.len(), listed, "{k}");
    srv.cmd_value(&["TSCOUNTER.INFO", "year"]);
    watch.check(&srv, "LIMIT, RANGE and INFO");

    // DEBUG RELOAD answers the same; DEL is quick.
    assert_eq!(srv.cmd_value(&["DEBUG", "RELOAD"]), v_ok(), "{k}");
    watch = StallWatch::start(&srv, STALL_LIMIT_US);
    assert_sums(
        sums(&srv, at),
        |now| expected(&writes, now),
        &format!("{k}: sums after DEBUG RELOAD"),
    );
    watch.check(&srv, "reads after DEBUG RELOAD");
    assert_eq!(srv.cmd_value(&["DEL", "year"]), v_int(1), "{k}");
    watch.check(&srv, "DEL");
    srv.assert_alive();
}
