//! Keyspace notifications of the counter and stats families: one event per write command
//! that changes a key, named and classed as the contract says, none for refusals, errors
//! or reads; and tally's own events never drop its read caches (reads stay fresh and fast
//! with `notify-keyspace-events KA`, on a replica too).

use module_tests::*;

/// The `(key, event)` pairs of every keyspace event of db 0 published while `work` runs
/// (the subscription is made first, and stragglers are waited for briefly).
fn events_during(srv: &Server, work: impl FnOnce()) -> Vec<(String, String)> {
    module_tests::events_during(srv, "__keyspace@0__:*", work)
        .into_iter()
        .map(|(channel, event)| {
            (
                channel.trim_start_matches("__keyspace@0__:").to_string(),
                event,
            )
        })
        .collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(k, e)| (k.to_string(), e.to_string()))
        .collect()
}

/// The writes of the counter and stats families, then refusals, errors and reads.
fn traffic(srv: &Server) {
    for args in [
        vec!["TSCOUNTER.CREATE", "c"],
        vec!["TSCOUNTER.INCRBY", "c", "3"],
        vec!["TSCOUNTER.INCR", "c"],
        vec!["TSCOUNTER.INCRBY", "c", "0"],
        vec!["TSCOUNTER.LIMIT", "c", "1", "1m", "100"],
        vec!["TSCOUNTER.LIMIT", "c", "1", "1m", "1"],
        vec!["TSCOUNTER.INCRBY", "c", "x"],
        vec!["TSCOUNTER.SUM", "c", "1m"],
        vec!["STATS.CREATE", "s"],
        vec!["STATS.ADD", "s", "1.5", "2.5"],
        vec!["STATS.ADD", "s", "4", "REPORT", "slowest", "/home"],
        vec!["STATS.ADD", "s", "nan"],
        vec!["STATS.GET", "s"],
    ] {
        srv.cmd_value(&args);
    }
}

per_server!(write_commands_fire_one_event_each_in_their_class);
fn write_commands_fire_one_event_each_in_their_class(kind: &ServerKind) {
    let srv = Server::start(kind);
    let all = pairs(&[
        ("c", "tscounter.create"),
        ("c", "tscounter.incrby"),
        ("c", "tscounter.incrby"),
        ("c", "tscounter.limit"),
        ("s", "stats.create"),
        ("s", "stats.add"),
        ("s", "stats.add"),
        ("slowest", "zadd"),
    ]);
    for (flags, want) in [
        ("KA", all.clone()),
        (
            "Kh",
            all.iter().filter(|(_, e)| e != "zadd").cloned().collect(),
        ),
        (
            "Kz",
            all.iter().filter(|(_, e)| e == "zadd").cloned().collect(),
        ),
    ] {
        assert_eq!(srv.cmd_value(&["FLUSHALL"]), v_ok());
        assert_eq!(
            srv.cmd_value(&["CONFIG", "SET", "notify-keyspace-events", flags]),
            v_ok()
        );
        let received = events_during(&srv, || traffic(&srv));
        assert_eq!(received, want, "notify-keyspace-events {flags}");
    }
}

per_server!(own_events_keep_read_caches_fresh_and_fast_on_primary_and_replica);
/// With every event published, a hot counter is still mirrored (its writes do not drop
/// its cache), and reads on the primary and a replica agree with the writes.
fn own_events_keep_read_caches_fresh_and_fast_on_primary_and_replica(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    for srv in [&primary, &replica] {
        assert_eq!(
            srv.cmd_value(&["CONFIG", "SET", "notify-keyspace-events", "KA"]),
            v_ok()
        );
    }
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    assert_eq!(
        primary.cmd_value(&["TSCOUNTER.CREATE", "hot", "RESOLUTIONS", "1h:48", "1d:30"]),
        v_ok()
    );
    let now = server_ms(&primary);
    let mut total = 0;
    for i in 0..60 {
        let at = (now - i * 3_600_000).to_string();
        assert!(matches!(
            primary.cmd_value(&["TSCOUNTER.INCRBY", "hot", "2", "AT", &at]),
            Value::Int(_)
        ));
        total += 2;
        // Reads between writes: each one sees every write so far.
        if i % 10 == 0 {
            let want = if i < 48 { total } else { 96 };
            assert_eq!(
                primary.cmd_value(&["TSCOUNTER.SUM", "hot", "48h"]),
                v_int(want.min(96)),
                "after {i} writes"
            );
        }
    }
    // The counter is mirrored, and stays so across more writes with events on.
    let mirrored = |srv: &Server| info_i64(srv, "tally", "tally_mirrored_slots");
    assert!(mirrored(&primary) > 0, "the hot counter has a read mirror");
    for _ in 0..5 {
        primary.cmd_value(&["TSCOUNTER.INCR", "hot"]);
    }
    assert!(
        mirrored(&primary) > 0,
        "tally's own tscounter.incrby events must not drop the mirror"
    );
    assert_eq!(
        primary.cmd_value(&["TSCOUNTER.SUM", "hot", "30d"]),
        v_int(125)
    );
    // The replica applies HSET effects, whose native events drop its mirrors: its reads
    // stay fresh.
    assert_replica_equal(&primary, &replica, "after hot writes");
    for window in ["1h", "48h", "30d"] {
        let args = ["TSCOUNTER.SUM", "hot", window];
        assert_eq!(
            replica.cmd_value(&args),
            primary.cmd_value(&args),
            "{window}"
        );
    }
    primary.cmd_value(&["TSCOUNTER.INCRBY", "hot", "10"]);
    wait_replica_synced(&primary, &replica);
    assert_eq!(
        replica.cmd_value(&["TSCOUNTER.SUM", "hot", "1h"]),
        primary.cmd_value(&["TSCOUNTER.SUM", "hot", "1h"])
    );
}
