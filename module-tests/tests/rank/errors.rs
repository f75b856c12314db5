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
            "ERR invalid duration '5x'",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "SLOT", "0"]),
            "ERR invalid duration '0'",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "WINDOW", "1h", "SLOT", "7m"]),
            "ERR WINDOW must be a whole multiple of SLOT",
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
            "ERR increment must be a positive integer",
        ),
        (
            strings(&["TSRANK.INCRBY", "n", "-3", "a"]),
            "ERR increment must be a positive integer",
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
            "ERR value is not an integer or out of range",
        ),
        (
            strings(&["TSRANK.TOP", "b", "-1"]),
            "ERR value is not an integer or out of range",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "OFFSET", "-1"]),
            "ERR value is not an integer or out of range",
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
            "ERR invalid duration '1x'",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "WINDOW", "90m"]),
            "ERR WINDOW must be a multiple of the leaderboard's SLOT, at most its WINDOW",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "WINDOW", "48h"]),
            "ERR WINDOW must be a multiple of the leaderboard's SLOT, at most its WINDOW",
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
        v_err("ERR WINDOW must be a whole multiple of SLOT")
    );
    assert_eq!(srv.dump_keyspace(), before, "{k}");
    srv.assert_alive();
}
