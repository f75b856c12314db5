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
