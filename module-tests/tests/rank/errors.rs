//! Every TSRANK error with its exact text, and nothing written on error.

use super::*;

per_server!(errors_have_exact_texts_and_write_nothing);
fn errors_have_exact_texts_and_write_nothing(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    srv.cmd(&["TSRANK.INCRBY", "b", "1", "a"]).expect("incr");
    srv.cmd(&["SET", "str", "x"]).expect("set");
    srv.cmd(&["ZADD", "plainz", "1", "a"]).expect("zadd");
    srv.cmd(&["HSET", "notmeta", "f", "v"]).expect("hset");
    srv.cmd(&["SET", "badmeta|meta", "x"]).expect("set");
    let before = srv.dump_keyspace();
    let now = server_ms(&srv);
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            strings(&["TSRANK.CREATE"]),
            "ERR wrong number of arguments for 'tsrank.create' command",
        ),
        (
            strings(&["TSRANK.INCRBY", "b", "1"]),
            "ERR wrong number of arguments for 'tsrank.incrby' command",
        ),
        (
            strings(&["TSRANK.TOP", "b"]),
            "ERR wrong number of arguments for 'tsrank.top' command",
        ),
        (
            strings(&["TSRANK.SCORE", "b"]),
            "ERR wrong number of arguments for 'tsrank.score' command",
        ),
        (
            strings(&["TSRANK.SCORE", "b", "a", "c"]),
            "ERR wrong number of arguments for 'tsrank.score' command",
        ),
        (
            strings(&["TSRANK.RANK", "b"]),
            "ERR wrong number of arguments for 'tsrank.rank' command",
        ),
        (
            strings(&["TSRANK.INFO", "b", "x"]),
            "ERR wrong number of arguments for 'tsrank.info' command",
        ),
        (strings(&["TSRANK.CREATE", "b"]), "ERR key already exists"),
        (strings(&["TSRANK.CREATE", "str"]), "ERR key already exists"),
        (
            strings(&["TSRANK.CREATE", "n", "WINDOW"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "WINDOW", "1h", "WINDOW", "1h"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "FOO", "1h"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "WINDOW", "5x"]),
            "ERR invalid duration '5x': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "SLOT", "0"]),
            "ERR invalid duration '0': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "WINDOW", "1h", "SLOT", "7m"]),
            "ERR WINDOW (1h) must be a whole multiple of SLOT (7m)",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "WINDOW", "10001s", "SLOT", "1s"]),
            "ERR WINDOW can hold at most 10000 slots",
        ),
        (
            strings(&["TSRANK.INCRBY", "n", "x", "a"]),
            "ERR value is not an integer or out of range",
        ),
        (
            strings(&["TSRANK.INCRBY", "n", "0", "a"]),
            "ERR increment must be a non-zero integer",
        ),
        (
            strings(&["TSRANK.INCRBY", "n", "-3", "a"]),
            "ERR count would go below zero",
        ),
        (
            strings(&["TSRANK.INCRBY", "n", "1", "a", "2"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.INCRBY", "n", "1", "a", "AT"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.INCRBY", "n", "1", "a", "AT", "x"]),
            "ERR value is not an integer or out of range",
        ),
        (
            strings(&["TSRANK.INCRBY", "n", "1", "a", "AT", "1", "2", "b"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.INCRBY", "b", "1", "a", "AT", "1"]),
            OUTSIDE,
        ),
        (
            strings(&[
                "TSRANK.INCRBY",
                "b",
                "1",
                "a",
                "AT",
                &(now - 25 * HOUR).to_string(),
            ]),
            OUTSIDE,
        ),
        (
            strings(&[
                "TSRANK.INCRBY",
                "b",
                "1",
                "a",
                "AT",
                &(now + 3_600_000).to_string(),
            ]),
            FUTURE,
        ),
        (
            strings(&["TSRANK.INCRBY", "b", "9007199254740993", "a"]),
            "ERR increment or decrement would overflow",
        ),
        (
            strings(&[
                "TSRANK.INCRBY",
                "b",
                "4503599627370496",
                "a",
                "4503599627370496",
                "a",
            ]),
            "ERR increment or decrement would overflow",
        ),
        (strings(&["TSRANK.INCRBY", "str", "1", "a"]), WRONGTYPE),
        (strings(&["TSRANK.INCRBY", "plainz", "1", "a"]), WRONGTYPE),
        (strings(&["TSRANK.INCRBY", "badmeta", "1", "a"]), WRONGTYPE),
        (strings(&["TSRANK.TOP", "str", "1"]), WRONGTYPE),
        (strings(&["TSRANK.TOP", "plainz", "1"]), WRONGTYPE),
        (strings(&["TSRANK.SCORE", "badmeta", "a"]), WRONGTYPE),
        (strings(&["TSRANK.INFO", "plainz"]), WRONGTYPE),
        (
            strings(&["TSRANK.TOP", "b", "x"]),
            "ERR value is not an integer or out of range: count is an integer >= 0",
        ),
        (
            strings(&["TSRANK.TOP", "b", "-1"]),
            "ERR value is not an integer or out of range: count is an integer >= 0",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "OFFSET", "-1"]),
            "ERR value is not an integer or out of range: OFFSET is an integer >= 0",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "OFFSET"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "WITHSCORES", "WITHSCORES"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "BOGUS"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "WINDOW", "1x"]),
            "ERR invalid duration '1x': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "WINDOW", "90m"]),
            "ERR WINDOW must be a multiple of the slot (1h) of at most 24 slots (1d)",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "WINDOW", "48h"]),
            "ERR WINDOW must be a multiple of the slot (1h) of at most 24 slots (1d)",
        ),
    ];
    for (cmd, want) in &cases {
        assert_eq!(srv.cmd_value(cmd), v_err(want), "{k}: {cmd:?}");
    }
    assert_eq!(srv.dump_keyspace(), before, "{k}: an error wrote something");
    // The configured defaults are checked too when a write auto-creates.
    srv.cmd(&["CONFIG", "SET", "tally.rank-slot", "7m"])
        .expect("config");
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "fresh", "1", "a"]),
        v_err("ERR WINDOW (1d) must be a whole multiple of SLOT (7m)")
    );
    assert_eq!(srv.dump_keyspace(), before, "{k}");
    srv.assert_alive();
}

per_server!(edges_of_time_are_refused);
/// A timestamp outside `[0, 2^53)` is outside the kept range; a window or slot beyond
/// 10,000 years is an invalid duration (commands and configs); the largest allowed window
/// works; nothing is written on refusal.
fn edges_of_time_are_refused(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let max_days = 315_576_000_000_000i64 / 86_400_000; // 10,000 years: 3652500d
    let (max_d, over_d) = (format!("{max_days}d"), format!("{}d", max_days + 1));
    let limit = (1i64 << 53).to_string();
    let max_ts = ((1i64 << 53) - 1).to_string();
    // 10000 weekly slots reach back 191 years: before 1970 at today's clock.
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "long", "WINDOW", "10000w", "SLOT", "1w"]),
        v_ok()
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "long", "1", "m"]),
        v_int(1)
    );
    let before = srv.dump_keyspace();
    let invalid = |text: &str| long_duration(text);
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            strings(&["TSRANK.INCRBY", "long", "1", "m", "AT", "-1"]),
            OUTSIDE.into(),
        ),
        (
            strings(&["TSRANK.INCRBY", "long", "1", "m", "AT", "-100000000000000"]),
            OUTSIDE.into(),
        ),
        (
            strings(&["TSRANK.INCRBY", "long", "1", "m", "AT", &limit]),
            OUTSIDE.into(),
        ),
        (
            strings(&["TSRANK.INCRBY", "new", "1", "m", "AT", "-1"]),
            OUTSIDE.into(),
        ),
        (
            strings(&["TSRANK.INCRBY", "long", "1", "m", "AT", &max_ts]),
            FUTURE.into(),
        ),
        (
            strings(&[
                "TSRANK.CREATE",
                "n",
                "WINDOW",
                "106751991167d",
                "SLOT",
                "106751991167d",
            ]),
            invalid("106751991167d"),
        ),
        (
            strings(&["TSRANK.CREATE", "n", "WINDOW", &over_d, "SLOT", &over_d]),
            invalid(&over_d),
        ),
        (
            strings(&["TSRANK.CREATE", "n", "WINDOW", &max_d, "SLOT", &over_d]),
            invalid(&over_d),
        ),
        (
            strings(&["TSRANK.TOP", "long", "1", "WINDOW", &over_d]),
            invalid(&over_d),
        ),
        (
            strings(&["TSRANK.HISTORY", "long", "m", "WINDOW", &over_d]),
            invalid(&over_d),
        ),
    ];
    for (cmd, want) in &cases {
        assert_eq!(srv.cmd_value(cmd), v_err(want), "{k}: {cmd:?}");
    }
    for name in ["tally.rank-window", "tally.rank-slot"] {
        assert_config_refused(&srv, name, &over_d, &invalid(&over_d)[4..]);
        assert_config_refused(&srv, name, "106751991167d", &invalid("106751991167d")[4..]);
    }
    assert_eq!(srv.dump_keyspace(), before, "{k}: an error wrote something");
    assert_eq!(
        srv.cmd_value(&["TSRANK.SCORE", "long", "m"]),
        v_int(1),
        "{k}"
    );

    // The widest window: ten slots of 1,000 years.
    let slot = format!("{}d", max_days / 10);
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "widest", "WINDOW", &max_d, "SLOT", &slot]),
        v_ok(),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "widest", "5", "m", "AT", "0"]),
        v_int(5),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "widest", "10", "WITHSCORES", "WINDOW", &max_d]),
        v_arr(vec![v_bulk("m"), v_int(5)]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.HISTORY", "widest", "m"]),
        v_arr(vec![v_arr(vec![v_int(0), v_int(5)])]),
        "{k}"
    );
    srv.assert_alive();
}
