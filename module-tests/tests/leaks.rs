//! Small leaks and traces tally must not leave: `CONFIG GET` of a string config keeps the
//! server's memory flat, and the calls tally makes inside its commands do not show in the
//! user's `INFO commandstats`.

use module_tests::*;

/// The string configs (durations and the resolution list), and a value to set each to.
const STRING_CONFIGS: [(&str, &str); 5] = [
    ("tally.counter-resolutions", "1s:60 1m:60"),
    ("tally.max-future", "90s"),
    ("tally.rank-window", "48h"),
    ("tally.rank-slot", "2h"),
    ("tally.stats-period", "30m"),
];

per_server!(config_get_of_string_configs_keeps_memory_flat);
/// 100k `CONFIG GET` of each string config (half before, half after a `CONFIG SET`) leave
/// `used_memory` where it was: a leak of one small string per call would add megabytes.
fn config_get_of_string_configs_keeps_memory_flat(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let mut conn = srv.conn();
    let gets = |conn: &mut redis::Connection, name: &str, n: usize| {
        let batch: Vec<Vec<&str>> = vec![vec!["CONFIG", "GET", name]; 1000];
        for _ in 0..n / 1000 {
            let replies = pipeline(conn, &batch);
            assert!(replies
                .iter()
                .all(|r| matches!(r, Value::Array(a) if a.len() == 2)));
        }
    };
    for (name, value) in STRING_CONFIGS {
        // Warm up (reply buffers, allocator caches), then measure.
        gets(&mut conn, name, 2_000);
        let before = info_i64(&srv, "memory", "used_memory");
        gets(&mut conn, name, 50_000);
        assert_eq!(
            srv.cmd_value(&["CONFIG", "SET", name, value]),
            v_ok(),
            "{k}: {name}"
        );
        gets(&mut conn, name, 50_000);
        let after = info_i64(&srv, "memory", "used_memory");
        assert!(
            after - before < 256 * 1024,
            "{k}: {name}: used_memory grew by {} bytes over 100k CONFIG GET",
            after - before
        );
        let got = srv.cmd_value(&["CONFIG", "GET", name]);
        assert_eq!(got, v_arr(vec![v_bulk(name), v_bulk(value)]), "{k}");
    }
    srv.assert_alive();
}

per_server!(tally_writes_and_reads_leave_no_commands_in_commandstats);
/// Writes and reads of every family (a leaderboard's meta read from the keyspace
/// included, which checks its fields for TTLs) add nothing to `INFO commandstats` but the
/// tally commands themselves. Valkey 9 has hash field TTLs but no module call to read
/// them: there the meta check runs `HPTTL`, the one command allowed to show.
fn tally_writes_and_reads_leave_no_commands_in_commandstats(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(srv.cmd_value(&["CONFIG", "RESETSTAT"]), v_ok());
    for cmd in [
        &["TSRANK.CREATE", "b", "WINDOW", "2h", "SLOT", "1h"][..],
        &["TSRANK.INCRBY", "b", "1", "m"],
        &["TSRANK.INCRBY", "b", "2", "n", "3", "m"],
        &["TSRANK.INCRBY", "auto", "1", "m"],
        &["TSRANK.TOP", "b", "10", "WITHSCORES"],
        &["TSRANK.SCORE", "b", "m"],
        &["TSRANK.HISTORY", "b", "m"],
        &["TSCOUNTER.INCR", "c"],
        &["TSCOUNTER.SUM", "c", "1m"],
        &["TSCOUNTER.RANGE", "c", "1s"],
        &["STATS.ADD", "s", "1", "2"],
        &["STATS.GET", "s"],
        &["STATS.QUANTILE", "s", "0.5"],
    ] {
        let got = srv.cmd_value(cmd);
        assert!(error_text(&got).is_none(), "{k}: {cmd:?}: {got:?}");
    }
    let stats = srv.info("commandstats");
    let foreign: Vec<&String> = stats
        .keys()
        .filter(|name| name.starts_with("cmdstat_"))
        .filter(|name| {
            let command = name.trim_start_matches("cmdstat_");
            let tally = ["tsrank.", "tscounter.", "stats."]
                .iter()
                .any(|family| command.starts_with(family));
            let allowed = command == "hpttl" && kind.is_valkey();
            // The client's own connection set-up and the test's own calls.
            let harness = command.starts_with("client|")
                || ["hello", "config|resetstat", "info"].contains(&command);
            !tally && !allowed && !harness
        })
        .collect();
    assert!(foreign.is_empty(), "{k}: {foreign:?} in {stats:?}");
    srv.assert_alive();
}
