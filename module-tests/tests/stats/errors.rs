//! Every error with its exact text, and "nothing written on error".

use super::*;

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
        "ERR invalid duration '0': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)",
    );
    e(
        &["STATS.CREATE", "c", "PERIOD", "5x"],
        "ERR invalid duration '5x': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)",
    );
    e(&["STATS.CREATE", "c", "PERIOD"], syntax);
    e(
        &["STATS.CREATE", "c", "KEEP", "0"],
        "ERR KEEP must be between 1 and 2000",
    );
    e(
        &["STATS.CREATE", "c", "KEEP", "2001"],
        "ERR KEEP must be between 1 and 2000",
    );
    e(&["STATS.CREATE", "c", "KEEP", "x"], not_int);
    e(&["STATS.CREATE", "c", "KEEP", "2", "KEEP", "3"], syntax);
    e(&["STATS.CREATE", "c", "FOO"], syntax);
    e(&["STATS.GET", "s", "WINDOW"], syntax);
    e(&["STATS.GET", "s", "FOO"], syntax);
    e(
        &["STATS.GET", "s", "WINDOW", "5x"],
        "ERR invalid duration '5x': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)",
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

per_server!(edges_of_time_are_refused);
/// A timestamp outside `[0, 2^53)` is outside the kept range; a period, a window or a kept
/// span (period x keep) beyond 10,000 years is an invalid duration (commands and the
/// `stats-period` config); the largest allowed span works; nothing is written on refusal.
fn edges_of_time_are_refused(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    let max_days = 315_576_000_000_000i64 / 86_400_000; // 10,000 years: 3652500d
    let (max_d, over_d) = (format!("{max_days}d"), format!("{}d", max_days + 1));
    let limit = (1i64 << 53).to_string();
    let max_ts = ((1i64 << 53) - 1).to_string();
    let outside = "ERR timestamp is outside the kept range";
    let future = "ERR timestamp is too far in the future";
    let invalid = |text: &str| long_duration(text);
    // 2000 periods of 5 weeks reach back 191 years: before 1970 at today's clock.
    assert_eq!(
        srv.cmd_value(&["STATS.CREATE", "long", "PERIOD", "5w", "KEEP", "2000"]),
        v_ok()
    );
    assert_eq!(srv.cmd_value(&["STATS.ADD", "long", "2"]), v_int(1));
    let before = srv.dump_keyspace();
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            strings(&["STATS.ADD", "long", "1", "AT", "-1"]),
            outside.into(),
        ),
        (
            strings(&["STATS.ADD", "long", "1", "AT", "-100000000000000"]),
            outside.into(),
        ),
        (
            strings(&["STATS.ADD", "new", "1", "AT", "-1"]),
            outside.into(),
        ),
        (
            strings(&["STATS.ADD", "long", "1", "AT", &limit]),
            outside.into(),
        ),
        (
            strings(&["STATS.ADD", "long", "1", "AT", &max_ts]),
            future.into(),
        ),
        (
            strings(&["STATS.RANGE", "long", "FROM", "-1"]),
            outside.into(),
        ),
        (
            strings(&["STATS.RANGE", "long", "TO", &limit]),
            outside.into(),
        ),
        (
            strings(&["STATS.CREATE", "n", "PERIOD", "106751991167d", "KEEP", "1"]),
            invalid("106751991167d"),
        ),
        (
            strings(&["STATS.CREATE", "n", "PERIOD", &over_d]),
            invalid(&over_d),
        ),
        (
            strings(&["STATS.CREATE", "n", "PERIOD", &max_d, "KEEP", "2"]),
            format!("ERR invalid duration '{max_d}'"),
        ),
        (
            strings(&["STATS.CREATE", "n", "PERIOD", "5000d", "KEEP", "2000"]),
            "ERR invalid duration '5000d'".into(),
        ),
        (
            strings(&["STATS.GET", "long", "WINDOW", &over_d]),
            invalid(&over_d),
        ),
        (
            strings(&["STATS.QUANTILE", "long", "0.5", "WINDOW", &over_d]),
            invalid(&over_d),
        ),
    ];
    for (cmd, want) in &cases {
        assert_eq!(srv.cmd_value(cmd), v_err(want), "{k}: {cmd:?}");
    }
    // The period config must make a valid object with any `stats-keep`: at most 10,000
    // years / 10000 = 365.25 days (the bound from when KEEP went up to 10000).
    for value in [over_d.as_str(), "106751991167d"] {
        assert_config_refused(&srv, "tally.stats-period", value, &invalid(value)[4..]);
    }
    for value in ["366d", "31557600001"] {
        let plain = format!("invalid duration '{value}'");
        assert_config_refused(&srv, "tally.stats-period", value, &plain);
    }
    assert_eq!(srv.dump_keyspace(), before, "{k}: an error wrote something");

    // The largest allowed spans.
    assert_eq!(
        srv.cmd_value(&[
            "STATS.CREATE",
            "widest",
            "PERIOD",
            &format!("{}d", max_days / 10),
            "KEEP",
            "10"
        ]),
        v_ok(),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["STATS.ADD", "widest", "3", "AT", "0"]),
        v_int(1),
        "{k}"
    );
    let got = srv.cmd_value(&["STATS.QUANTILE", "widest", "0.5", "WINDOW", &max_d]);
    assert!(
        matches!(&got, Value::Array(a) if a.len() == 1 && a[0] != Value::Nil),
        "{k}: {got:?}"
    );
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.stats-period", "8766h"]),
        v_ok(),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.stats-keep", "2001"]),
        v_err("ERR CONFIG SET failed (possibly related to argument 'tally.stats-keep') - argument must be between 1 and 2000 inclusive"),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.stats-keep", "2000"]),
        v_ok(),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["STATS.ADD", "auto", "1", "AT", "0"]),
        v_int(1),
        "{k}"
    );
    // Auto-created with exactly the configured settings (no silent fallback).
    let info = map_pairs(&srv.cmd_value(&["STATS.INFO", "auto"]));
    let setting = |name: &str| info.iter().find(|(f, _)| f == name).map(|(_, v)| v.clone());
    assert_eq!(
        setting("period"),
        Some(v_int(31_557_600_000)),
        "{k}: {info:?}"
    );
    assert_eq!(setting("keep"), Some(v_int(2_000)), "{k}: {info:?}");
    srv.assert_alive();
}
