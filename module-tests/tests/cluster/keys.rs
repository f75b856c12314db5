//! `COMMAND GETKEYS` names every key of every command of the three families, and the
//! write/readonly/denyoom flags are right.

use super::*;

/// Every command of every family with the keys `COMMAND GETKEYS` must report.
fn getkeys_cases() -> Vec<(Vec<&'static str>, Vec<&'static str>)> {
    vec![
        (vec!["TSCOUNTER.CREATE", "c"], vec!["c"]),
        (
            vec!["TSCOUNTER.CREATE", "c", "RESOLUTIONS", "1s:10", "1m:5"],
            vec!["c"],
        ),
        (vec!["TSCOUNTER.INCRBY", "c", "5"], vec!["c"]),
        (vec!["TSCOUNTER.INCRBY", "c", "5", "AT", "1000"], vec!["c"]),
        (vec!["TSCOUNTER.INCR", "c"], vec!["c"]),
        (vec!["TSCOUNTER.INCR", "c", "AT", "1000"], vec!["c"]),
        (vec!["TSCOUNTER.SUM", "c", "1m", "1h", "AT", "5"], vec!["c"]),
        (
            vec![
                "TSCOUNTER.LIMIT",
                "c",
                "1",
                "5s",
                "5",
                "1h",
                "100",
                "AT",
                "5",
            ],
            vec!["c"],
        ),
        (
            vec![
                "TSCOUNTER.RANGE",
                "c",
                "1s",
                "FROM",
                "1",
                "TO",
                "2",
                "EMPTY",
            ],
            vec!["c"],
        ),
        (vec!["TSCOUNTER.INFO", "c"], vec!["c"]),
        (
            vec!["TSRANK.CREATE", "lb{x}", "WINDOW", "1h", "SLOT", "1m"],
            vec!["lb{x}"],
        ),
        (
            vec!["TSRANK.INCRBY", "lb{x}", "1", "a", "2", "b", "AT", "9"],
            vec!["lb{x}"],
        ),
        (
            vec![
                "TSRANK.TOP",
                "lb{x}",
                "10",
                "OFFSET",
                "1",
                "WITHSCORES",
                "WINDOW",
                "1h",
            ],
            vec!["lb{x}"],
        ),
        (vec!["TSRANK.SCORE", "lb{x}", "a"], vec!["lb{x}"]),
        (
            vec!["TSRANK.HISTORY", "lb{x}", "a", "WINDOW", "1h"],
            vec!["lb{x}"],
        ),
        (vec!["TSRANK.RANK", "lb{x}", "a"], vec!["lb{x}"]),
        (vec!["TSRANK.RANK", "lb{x}", "a", "TIES"], vec!["lb{x}"]),
        (vec!["TSRANK.MSCORE", "lb{x}", "a", "b"], vec!["lb{x}"]),
        (
            vec!["TSRANK.AROUND", "lb{x}", "a", "2", "WITHSCORES"],
            vec!["lb{x}"],
        ),
        (vec!["TSRANK.INFO", "lb{x}"], vec!["lb{x}"]),
        (vec!["TSRANK.REM", "lb{x}", "a", "b"], vec!["lb{x}"]),
        (
            vec!["STATS.CREATE", "s", "PERIOD", "1h", "KEEP", "3"],
            vec!["s"],
        ),
        (vec!["STATS.ADD", "s", "1"], vec!["s"]),
        (vec!["STATS.ADD", "s", "1", "2", "AT", "5"], vec!["s"]),
        (
            vec!["STATS.ADD", "k", "1", "2", "REPORT", "rk", "m"],
            vec!["k", "rk"],
        ),
        (
            vec![
                "STATS.ADD",
                "k",
                "1",
                "AT",
                "5",
                "REPORT",
                "rk",
                "m",
                "KEEP",
                "3",
            ],
            vec!["k", "rk"],
        ),
        (
            vec!["STATS.ADD", "k", "-1.5", "report", "rk", "m"],
            vec!["k", "rk"],
        ),
        (vec!["STATS.GET", "s", "WINDOW", "2h"], vec!["s"]),
        (vec!["STATS.QUANTILE", "s", "0.5", "0.9"], vec!["s"]),
        (vec!["STATS.CDF", "s", "200", "WINDOW", "2h"], vec!["s"]),
        (vec!["STATS.RANGE", "s", "FROM", "1", "TO", "2"], vec!["s"]),
        (vec!["STATS.INFO", "s"], vec!["s"]),
        (
            vec![
                "STATS.ADD",
                "k",
                "1",
                "REPORT",
                "rk",
                "m",
                "BY",
                "p99",
                "KEEP",
                "3",
            ],
            vec!["k", "rk"],
        ),
        (
            vec!["TSCOUNTER.MSUM", "3", "a", "b", "c", "1m", "AT", "1"],
            vec!["a", "b", "c"],
        ),
        (
            vec!["STATS.MGET", "2", "a", "b", "WINDOW", "2h"],
            vec!["a", "b"],
        ),
        (vec!["STATS.MQUANTILE", "1", "a", "0.5", "0.9"], vec!["a"]),
        (
            vec![
                "TSTHROTTLE.ALLOW",
                "t",
                "1",
                "2",
                "3s",
                "QUANTITY",
                "2",
                "AT",
                "5",
            ],
            vec!["t"],
        ),
    ]
}

per_server!(command_keys_and_flags);
fn command_keys_and_flags(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    for (cmd, keys) in getkeys_cases() {
        let mut args = vec!["COMMAND", "GETKEYS"];
        args.extend(&cmd);
        assert_eq!(srv.cmd_value(&args), v_bulks(&keys), "{k}: GETKEYS {cmd:?}");
    }
    // Flags: writes are `write denyoom` (refused under OOM, by `%R~` users and on
    // read-only replicas), reads `readonly`.
    for (name, write) in [
        ("tscounter.create", true),
        ("tscounter.incrby", true),
        ("tscounter.incr", true),
        ("tscounter.sum", false),
        ("tscounter.range", false),
        ("tscounter.info", false),
        ("tscounter.limit", true),
        ("tscounter.mlimit", true),
        ("tscounter.msum", false),
        ("tsrank.create", true),
        ("tsrank.incrby", true),
        ("tsrank.top", false),
        ("tsrank.score", false),
        ("tsrank.rank", false),
        ("tsrank.mscore", false),
        ("tsrank.around", false),
        ("tsrank.info", false),
        ("tsrank.history", false),
        ("tsrank.rem", true),
        ("stats.create", true),
        ("stats.add", true),
        ("stats.get", false),
        ("stats.quantile", false),
        ("stats.cdf", false),
        ("stats.range", false),
        ("stats.info", false),
        ("stats.mget", false),
        ("stats.mquantile", false),
        ("tsthrottle.allow", true),
    ] {
        let info = srv.cmd_value(&["COMMAND", "INFO", name]);
        let Value::Array(outer) = info else {
            panic!("{k}: COMMAND INFO {name}: {info:?}")
        };
        let Some(Value::Array(entry)) = outer.first() else {
            panic!("{k}: COMMAND INFO {name}: {outer:?}")
        };
        let flags: Vec<String> = match entry.get(2) {
            Some(Value::Array(f)) | Some(Value::Set(f)) => {
                f.iter().filter_map(value_text).collect()
            }
            other => panic!("{k}: {name} flags: {other:?}"),
        };
        let has = |f: &str| flags.iter().any(|x| x == f);
        if write {
            assert!(has("write") && has("denyoom"), "{k}: {name}: {flags:?}");
        } else {
            assert!(has("readonly") && !has("write"), "{k}: {name}: {flags:?}");
        }
    }
    srv.assert_alive();
}
