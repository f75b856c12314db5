//! Faults: replication links that break, reloads, memory pressure, and `INFO tally`.
//! One test function per scenario and family, on every server kind.
//!
//! * partial resync: the replica's link is killed (`CLIENT KILL TYPE master` on the
//!   replica, then `CLIENT KILL TYPE replica` on the primary) while writes and timer
//!   expiry go on; the replica resyncs partially and ends equal to the primary;
//! * full resync: the replica is detached (`REPLICAOF NO ONE`), diverges (its own writes
//!   and its own timer, as a primary), and is attached again: a full sync makes it equal;
//! * AOF: with `appendonly yes` and tiny slots, the timer's expiry effects go to the AOF;
//!   a restart reloads exactly the same data;
//! * `DEBUG RELOAD` keeps everything, and expiry continues afterwards;
//! * memory pressure: with `maxmemory` reached, every write command is refused with the
//!   OOM error and every read still works;
//! * `INFO tally`: every field is there and moves as expected.
//!
//! Keyspace comparisons use [`dump_keyspace`]; because the primary's timer may still be
//! expiring while a replica catches up, the harness's [`assert_replica_equal`] compares
//! only once the primary's replication offset stands still and the replica has applied it.

use module_tests::*;
use std::time::Duration;

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

// ================================================================ helpers

fn rounds() -> usize {
    if long_run() {
        200
    } else {
        20
    }
}

/// Sends `cmds` as one pipeline; every reply must be a non-error.
fn pipeline_ok(srv: &Server, cmds: &[Vec<String>]) {
    let out = pipeline(&mut srv.conn(), cmds);
    for (c, v) in cmds.iter().zip(&out) {
        assert!(
            error_text(v).is_none(),
            "{}: {c:?} -> {v:?}",
            srv.kind().name
        );
    }
}

/// One family's workload: long-lived objects (nothing expires during a test) and tiny
/// ones whose slots expire within about a second, so the timer writes effects.
#[derive(Clone, Copy)]
struct Family {
    name: &'static str,
    /// Creates the tiny objects (prefix, so detached nodes can use their own keys).
    setup: fn(&str) -> Vec<Vec<String>>,
    /// One round of writes (prefix, round).
    write: fn(&str, usize) -> Vec<Vec<String>>,
    /// True if `key` (from the dump) belongs to a tiny object.
    tiny_key: fn(&str) -> bool,
    /// Every write command of the family on key `k` (for OOM), and every read.
    writes: fn(&str) -> Vec<Vec<String>>,
    reads: fn(&str) -> Vec<Vec<String>>,
}

const COUNTER: Family = Family {
    name: "counter",
    setup: |p| {
        (0..4)
            .map(|i| {
                strings(&[
                    "TSCOUNTER.CREATE",
                    &format!("{p}tc:{i}"),
                    "RESOLUTIONS",
                    "100ms:5",
                    "200ms:4",
                ])
            })
            .collect()
    },
    write: |p, r| {
        let mut out = Vec::new();
        for i in 0..10 {
            out.push(strings(&[
                "TSCOUNTER.INCRBY",
                &format!("{p}c:{i}"),
                &(r + i).to_string(),
            ]));
        }
        out.push(strings(&["TSCOUNTER.INCR", &format!("{p}tc:{}", r % 4)]));
        out
    },
    tiny_key: |k| k.contains("tc:"),
    writes: |k| {
        vec![
            strings(&["TSCOUNTER.CREATE", &format!("{k}new")]),
            strings(&["TSCOUNTER.INCRBY", k, "5"]),
            strings(&["TSCOUNTER.INCR", k]),
            strings(&["TSCOUNTER.INCR", &format!("{k}new")]),
        ]
    },
    reads: |k| {
        vec![
            strings(&["TSCOUNTER.SUM", k, "1m"]),
            strings(&["TSCOUNTER.RANGE", k, "1s"]),
            strings(&["TSCOUNTER.INFO", k]),
        ]
    },
};

const RANK: Family = Family {
    name: "rank",
    setup: |p| {
        (0..4)
            .map(|i| {
                strings(&[
                    "TSRANK.CREATE",
                    &format!("{p}tlb{{{i}}}"),
                    "WINDOW",
                    "500ms",
                    "SLOT",
                    "100ms",
                ])
            })
            .collect()
    },
    write: |p, r| {
        let mut out = Vec::new();
        for i in 0..10 {
            out.push(strings(&[
                "TSRANK.INCRBY",
                &format!("{p}lb{{{i}}}"),
                &(r + 1).to_string(),
                &format!("m{}", r % 7),
                "1",
                "z",
            ]));
        }
        out.push(strings(&[
            "TSRANK.INCRBY",
            &format!("{p}tlb{{{}}}", r % 4),
            "2",
            &format!("t{r}"),
        ]));
        out
    },
    tiny_key: |k| k.contains("tlb{"),
    writes: |k| {
        vec![
            strings(&[
                "TSRANK.CREATE",
                &format!("{k}new"),
                "WINDOW",
                "1h",
                "SLOT",
                "1m",
            ]),
            strings(&["TSRANK.INCRBY", k, "1", "a"]),
            strings(&["TSRANK.INCRBY", &format!("{k}new2"), "1", "a", "2", "b"]),
        ]
    },
    reads: |k| {
        vec![
            strings(&["TSRANK.TOP", k, "10", "WITHSCORES"]),
            strings(&["TSRANK.SCORE", k, "a"]),
            strings(&["TSRANK.RANK", k, "a"]),
            strings(&["TSRANK.INFO", k]),
        ]
    },
};

const STATS: Family = Family {
    name: "stats",
    setup: |p| {
        (0..4)
            .map(|i| {
                strings(&[
                    "STATS.CREATE",
                    &format!("{p}ts:{i}"),
                    "PERIOD",
                    "100ms",
                    "KEEP",
                    "3",
                ])
            })
            .collect()
    },
    write: |p, r| {
        let mut out = Vec::new();
        for i in 0..10 {
            out.push(strings(&[
                "STATS.ADD",
                &format!("{p}s:{i}"),
                &format!("{}.5", r * 3 + i),
                &format!("-{}", r + 1),
                "REPORT",
                &format!("{p}slow"),
                &format!("s:{i}"),
                "KEEP",
                "5",
            ]));
        }
        out.push(strings(&[
            "STATS.ADD",
            &format!("{p}ts:{}", r % 4),
            &r.to_string(),
        ]));
        out
    },
    tiny_key: |k| k.contains("ts:"),
    writes: |k| {
        vec![
            strings(&["STATS.CREATE", &format!("{k}new")]),
            strings(&["STATS.ADD", k, "1.5"]),
            strings(&["STATS.ADD", k, "1", "REPORT", &format!("{k}rank"), "m"]),
            strings(&["STATS.ADD", &format!("{k}new2"), "1"]),
        ]
    },
    reads: |k| {
        vec![
            strings(&["STATS.GET", k]),
            strings(&["STATS.QUANTILE", k, "0.5", "0.99"]),
            strings(&["STATS.RANGE", k]),
            strings(&["STATS.INFO", k]),
        ]
    },
};

fn setup_and_write(srv: &Server, fam: Family, prefix: &str, rounds: std::ops::Range<usize>) {
    let mut cmds = Vec::new();
    if rounds.start == 0 {
        cmds.extend((fam.setup)(prefix));
    }
    for r in rounds {
        cmds.extend((fam.write)(prefix, r));
    }
    pipeline_ok(srv, &cmds);
}

fn start_pair(kind: &ServerKind, primary_opts: ServerOptions) -> (Server, Server) {
    let primary = Server::start_with(kind, primary_opts);
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    (primary, replica)
}

// ============================================================== scenarios

fn partial_resync(kind: &ServerKind, fam: Family) {
    let k = &kind.name;
    // A backlog large enough for everything written while the link is down (the
    // soak variant writes megabytes of effects), so the resync can be partial.
    let opts = ServerOptions::new().config("repl-backlog-size", "64mb");
    let (primary, replica) = start_pair(kind, opts);
    let n = rounds();
    setup_and_write(&primary, fam, "", 0..n);
    let partial_before = info_i64(&primary, "stats", "sync_partial_ok");
    // Replica side drops the link; writes go on while it reconnects.
    let killed = replica.cmd_value(&["CLIENT", "KILL", "TYPE", "master"]);
    assert_eq!(killed, v_int(1), "{k}: one master link killed");
    setup_and_write(&primary, fam, "", n..2 * n);
    std::thread::sleep(Duration::from_millis(150));
    setup_and_write(&primary, fam, "", 2 * n..3 * n);
    wait_replica_synced(&primary, &replica);
    // Primary side drops it.
    let killed = primary.cmd_value(&["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(killed, v_int(1), "{k}: one replica link killed");
    setup_and_write(&primary, fam, "", 3 * n..4 * n);
    // Let the tiny objects expire while the link comes back: effects of the timer are
    // part of what the partial resync must carry.
    assert!(
        wait_until(Duration::from_secs(5), || {
            info_i64(&primary, "tally", "tally_slots_expired") > 0
        }),
        "{k}: no expiry ran"
    );
    let compared =
        assert_replica_equal(&primary, &replica, &format!("{} partial resync", fam.name));
    assert!(!compared.is_empty(), "{k}: nothing to compare");
    assert!(
        info_i64(&primary, "stats", "sync_partial_ok") >= partial_before + 2,
        "{k}: the replica did not resync partially"
    );
    primary.assert_alive();
    replica.assert_alive();
}

fn full_resync(kind: &ServerKind, fam: Family) {
    let k = &kind.name;
    // A tiny backlog as well: whatever piles up during the detach cannot be replayed.
    let (primary, replica) = start_pair(
        kind,
        ServerOptions::new().config("repl-backlog-size", "16kb"),
    );
    let n = rounds();
    setup_and_write(&primary, fam, "", 0..n);
    wait_replica_synced(&primary, &replica);
    let full_before = info_i64(&primary, "stats", "sync_full");
    // Detached, the replica is a primary: its own writes and its own expiry.
    assert_eq!(replica.cmd_value(&["REPLICAOF", "NO", "ONE"]), v_ok());
    setup_and_write(&replica, fam, "own:", 0..n);
    setup_and_write(&primary, fam, "", n..3 * n);
    std::thread::sleep(Duration::from_millis(600));
    assert_ne!(
        primary.dump_keyspace(),
        replica.dump_keyspace(),
        "{k}: diverged"
    );
    replica.replicate_from(&primary);
    setup_and_write(&primary, fam, "", 3 * n..4 * n);
    let compared = assert_replica_equal(&primary, &replica, &format!("{} full resync", fam.name));
    assert!(!compared.is_empty(), "{k}: nothing to compare");
    assert!(
        info_i64(&primary, "stats", "sync_full") > full_before,
        "{k}: no full resync happened"
    );
    assert!(
        !replica
            .dump_keyspace()
            .keys()
            .any(|key| key.contains("own:")),
        "{k}: the replica kept its own writes"
    );
    primary.assert_alive();
    replica.assert_alive();
}

/// Waits until no tiny object has anything left to expire (its keys are gone or only
/// hold settings), so the keyspace no longer changes by itself.
fn wait_tiny_expired(srv: &Server, fam: Family) {
    let k = &srv.kind().name;
    let settled = wait_until(Duration::from_secs(10), || {
        let d1 = srv.dump_keyspace();
        std::thread::sleep(Duration::from_millis(700));
        let d2 = srv.dump_keyspace();
        d1 == d2
    });
    assert!(settled, "{k} {}: tiny objects never settled", fam.name);
    assert!(
        info_i64(srv, "tally", "tally_slots_expired") > 0,
        "{k} {}: the timer expired nothing",
        fam.name
    );
    let _ = fam.tiny_key;
}

fn aof_reload(kind: &ServerKind, fam: Family) {
    let k = &kind.name;
    let mut srv = Server::start_with(
        kind,
        ServerOptions::new()
            .config("appendonly", "yes")
            .config("appendfsync", "always"),
    );
    setup_and_write(&srv, fam, "", 0..rounds());
    wait_tiny_expired(&srv, fam);
    let before = srv.dump_keyspace();
    assert!(!before.is_empty(), "{k}: nothing written");
    srv.restart();
    assert_eq!(
        srv.dump_keyspace(),
        before,
        "{k} {}: AOF reload differs from the data before",
        fam.name
    );
    srv.assert_alive();
}

fn debug_reload(kind: &ServerKind, fam: Family) {
    let k = &kind.name;
    let srv = Server::start(kind);
    // Slots of 1s: the object written just before the reload expires only after it.
    let key = format!("r{{{}}}", fam.name);
    let setup = match fam.name {
        "counter" => vec![
            strings(&["TSCOUNTER.CREATE", &key, "RESOLUTIONS", "1s:2"]),
            strings(&["TSCOUNTER.INCRBY", &key, "3"]),
        ],
        "rank" => vec![
            strings(&["TSRANK.CREATE", &key, "WINDOW", "2s", "SLOT", "1s"]),
            strings(&["TSRANK.INCRBY", &key, "3", "a"]),
        ],
        _ => vec![
            strings(&["STATS.CREATE", &key, "PERIOD", "1s", "KEEP", "2"]),
            strings(&["STATS.ADD", &key, "3"]),
        ],
    };
    setup_and_write(&srv, fam, "", 0..rounds());
    wait_tiny_expired(&srv, fam);
    // Written now, so nothing expires in the few ms around the reload.
    pipeline_ok(&srv, &setup);
    let before = srv.dump_keyspace();
    assert!(
        before.keys().any(|x| x.contains(&key)),
        "{k}: {key} missing"
    );
    assert_eq!(srv.cmd_value(&["DEBUG", "RELOAD"]), v_ok(), "{k}");
    assert_eq!(
        srv.dump_keyspace(),
        before,
        "{k} {}: DEBUG RELOAD changed data",
        fam.name
    );
    // Expiry goes on after the reload (the schedule is rebuilt by a scan).
    let expired = info_i64(&srv, "tally", "tally_slots_expired");
    let gone = wait_until(Duration::from_secs(10), || {
        !srv.dump_keyspace().iter().any(|(name, d)| {
            name.contains(&key)
                && match &d.value {
                    KeyValue::Hash(f) => f.iter().any(|(f, _)| !f.starts_with('_')),
                    _ => true,
                }
        })
    });
    assert!(gone, "{k} {}: nothing expired after DEBUG RELOAD", fam.name);
    assert!(
        info_i64(&srv, "tally", "tally_slots_expired") > expired,
        "{k}"
    );
    srv.assert_alive();
}

fn oom(kind: &ServerKind, fam: Family) {
    let k = &kind.name;
    let srv = Server::start(kind);
    setup_and_write(&srv, fam, "", 0..3);
    let key = match fam.name {
        "counter" => "c:1",
        "rank" => "lb{1}",
        _ => "s:1",
    };
    let reads_before: Vec<Value> = (fam.reads)(key).iter().map(|c| srv.cmd_value(c)).collect();
    let before = srv.dump_keyspace();
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]),
        v_ok()
    );
    assert_eq!(srv.cmd_value(&["CONFIG", "SET", "maxmemory", "1"]), v_ok());
    for c in (fam.writes)(key) {
        assert_eq!(srv.cmd_value(&c), v_err(OOM), "{k}: {c:?}");
    }
    let reads: Vec<Value> = (fam.reads)(key).iter().map(|c| srv.cmd_value(c)).collect();
    for (c, v) in (fam.reads)(key).iter().zip(&reads) {
        assert!(error_text(v).is_none(), "{k}: read {c:?} under OOM: {v:?}");
    }
    assert_eq!(reads, reads_before, "{k}: reads changed under OOM");
    assert_eq!(srv.cmd_value(&["CONFIG", "SET", "maxmemory", "0"]), v_ok());
    assert_eq!(
        srv.dump_keyspace(),
        before,
        "{k}: a refused write changed data"
    );
    for c in (fam.writes)(key) {
        let v = srv.cmd_value(&c);
        assert!(error_text(&v).is_none(), "{k}: {c:?} after OOM: {v:?}");
    }
    srv.assert_alive();
}

// ================================================================ per family

per_server!(partial_resync_counter);
fn partial_resync_counter(kind: &ServerKind) {
    partial_resync(kind, COUNTER);
}
per_server!(partial_resync_rank);
fn partial_resync_rank(kind: &ServerKind) {
    partial_resync(kind, RANK);
}
per_server!(partial_resync_stats);
fn partial_resync_stats(kind: &ServerKind) {
    partial_resync(kind, STATS);
}
per_server!(full_resync_counter);
fn full_resync_counter(kind: &ServerKind) {
    full_resync(kind, COUNTER);
}
per_server!(full_resync_rank);
fn full_resync_rank(kind: &ServerKind) {
    full_resync(kind, RANK);
}
per_server!(full_resync_stats);
fn full_resync_stats(kind: &ServerKind) {
    full_resync(kind, STATS);
}
per_server!(aof_reload_counter);
fn aof_reload_counter(kind: &ServerKind) {
    aof_reload(kind, COUNTER);
}
per_server!(aof_reload_rank);
fn aof_reload_rank(kind: &ServerKind) {
    aof_reload(kind, RANK);
}
per_server!(aof_reload_stats);
fn aof_reload_stats(kind: &ServerKind) {
    aof_reload(kind, STATS);
}
per_server!(debug_reload_counter);
fn debug_reload_counter(kind: &ServerKind) {
    debug_reload(kind, COUNTER);
}
per_server!(debug_reload_rank);
fn debug_reload_rank(kind: &ServerKind) {
    debug_reload(kind, RANK);
}
per_server!(debug_reload_stats);
fn debug_reload_stats(kind: &ServerKind) {
    debug_reload(kind, STATS);
}
per_server!(oom_refuses_counter_writes_and_serves_reads);
fn oom_refuses_counter_writes_and_serves_reads(kind: &ServerKind) {
    oom(kind, COUNTER);
}
per_server!(oom_refuses_rank_writes_and_serves_reads);
fn oom_refuses_rank_writes_and_serves_reads(kind: &ServerKind) {
    oom(kind, RANK);
}
per_server!(oom_refuses_stats_writes_and_serves_reads);
fn oom_refuses_stats_writes_and_serves_reads(kind: &ServerKind) {
    oom(kind, STATS);
}

// ============================================================= CLIENT PAUSE

per_server!(client_pause_defers_expiry);
/// `CLIENT PAUSE WRITE` on a primary with a replica while objects have slots to expire:
/// the timer must wait (Redis 7.0 aborted on an assertion when a timer replicated during
/// a pause; a cluster manual failover pauses the same way), then resume.
fn client_pause_defers_expiry(kind: &ServerKind) {
    let k = &kind.name;
    let (primary, replica) = start_pair(kind, ServerOptions::new());
    for fam in [COUNTER, RANK, STATS] {
        setup_and_write(&primary, fam, "", 0..4);
    }
    assert_eq!(
        primary.cmd_value(&["CLIENT", "PAUSE", "1500", "WRITE"]),
        v_ok()
    );
    let during = primary.dump_keyspace();
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        primary.dump_keyspace(),
        during,
        "{k}: the timer wrote during a pause"
    );
    primary.assert_alive();
    std::thread::sleep(Duration::from_millis(600));
    // After the pause, expiry resumes and reaches the replica.
    let resumed = wait_until(Duration::from_secs(10), || {
        primary.dump_keyspace() != during
    });
    assert!(resumed, "{k}: expiry did not resume after the pause");
    let compared = assert_replica_equal(&primary, &replica, "after CLIENT PAUSE");
    assert!(!compared.is_empty(), "{k}: nothing to compare");
    primary.assert_alive();
    replica.assert_alive();
}

// ================================================================ INFO tally

per_server!(info_tally_fields_exist_and_move);
fn info_tally_fields_exist_and_move(kind: &ServerKind) {
    let k = &kind.name;
    let srv = Server::start(kind);
    let fields = [
        "tally_tracked_objects",
        "tally_timer_ticks",
        "tally_keys_visited",
        "tally_slots_expired",
        "tally_last_tick_us",
        "tally_max_tick_us",
        "tally_expiry_backlog",
        "tally_scan_in_progress",
        "tally_mirrored_slots",
    ];
    let info = srv.info("tally");
    for f in fields {
        let v = info
            .get(f)
            .unwrap_or_else(|| panic!("{k}: INFO tally lacks {f}: {info:?}"));
        let n: i64 = v.parse().unwrap_or_else(|_| panic!("{k}: {f}={v}"));
        assert!(n >= 0, "{k}: {f}={n}");
    }
    let get = |f: &str| info_i64(&srv, "tally", f);
    // The timer ticks on its own.
    let ticks = get("tally_timer_ticks");
    assert!(
        wait_until(Duration::from_secs(3), || get("tally_timer_ticks") > ticks),
        "{k}: timer_ticks does not grow"
    );
    // The start-up scan finishes.
    assert!(wait_until(Duration::from_secs(3), || get(
        "tally_scan_in_progress"
    ) == 0));
    // Objects with slots to expire are tracked; expiry counts slots and visits.
    let (expired, visited) = (get("tally_slots_expired"), get("tally_keys_visited"));
    let mut cmds = Vec::new();
    for fam in [COUNTER, RANK, STATS] {
        cmds.extend((fam.setup)(""));
        cmds.extend((fam.write)("", 0));
        cmds.extend((fam.write)("", 1));
        cmds.extend((fam.write)("", 2));
        cmds.extend((fam.write)("", 3));
    }
    pipeline_ok(&srv, &cmds);
    let tracked = get("tally_tracked_objects");
    assert!(tracked >= 1, "{k}: tracked_objects={tracked}");
    assert!(
        wait_until(Duration::from_secs(10), || get("tally_slots_expired")
            >= expired + 8),
        "{k}: slots_expired does not grow (counter + rank + stats tiny slots)"
    );
    assert!(
        get("tally_keys_visited") > visited,
        "{k}: keys_visited does not grow"
    );
    let (last, max) = (get("tally_last_tick_us"), get("tally_max_tick_us"));
    assert!(
        max >= last && max > 0,
        "{k}: last_tick_us={last} max_tick_us={max}"
    );
    // Budget: a tick stays near tally.expire-budget-us (1000 µs) even while expiring.
    assert!(max < 200_000, "{k}: a tick took {max} µs");
    // Nothing is due far in the past: the backlog drains.
    assert!(
        wait_until(Duration::from_secs(5), || get("tally_expiry_backlog") == 0),
        "{k}: expiry_backlog does not drain"
    );
    // Read mirrors: a counter with many slots, read by SUM.
    let t = server_ms(&srv);
    let mut cmds = Vec::new();
    for i in 0..40 {
        let at = (t - i * 1000).to_string();
        cmds.push(strings(&["TSCOUNTER.INCRBY", "mirrored", "1", "AT", &at]));
    }
    cmds.push(strings(&["TSCOUNTER.SUM", "mirrored", "1m"]));
    cmds.push(strings(&["TSCOUNTER.RANGE", "mirrored", "1s"]));
    pipeline_ok(&srv, &cmds);
    let mirrored = get("tally_mirrored_slots");
    assert!(
        mirrored >= 16,
        "{k}: mirrored_slots={mirrored} after reading 40 slots"
    );
    assert_eq!(srv.cmd_value(&["DEL", "mirrored"]), v_int(1));
    assert!(
        get("tally_mirrored_slots") < mirrored,
        "{k}: DEL does not drop the mirror"
    );
    srv.assert_alive();
}

// ============================================================ MULTI, scripts

per_server!(multi_and_scripts_replicate);
/// Tally writes inside `MULTI`/`EXEC` and inside Lua scripts (`EVAL`, `redis.call`)
/// replicate as their effects too: the replica (and the AOF) end equal to the primary.
fn multi_and_scripts_replicate(kind: &ServerKind) {
    let k = &kind.name;
    let opts = ServerOptions::new().config("appendonly", "yes");
    let (mut primary, replica) = start_pair(kind, opts);
    let mut conn = primary.conn();
    for fam in [COUNTER, RANK, STATS] {
        let cmds: Vec<Vec<String>> = (fam.setup)("x:")
            .into_iter()
            .chain((0..3).flat_map(|r| (fam.write)("x:", r)))
            .collect();
        let mut pipe = redis::pipe();
        pipe.atomic();
        for c in &cmds {
            let mut cmd = redis::Cmd::new();
            for a in c {
                cmd.arg(a.as_bytes());
            }
            pipe.add_command(cmd);
        }
        let out: Value = pipe
            .query(&mut conn)
            .unwrap_or_else(|e| panic!("{k}: MULTI: {e}"));
        let Value::Array(replies) = out else {
            panic!("{k}: EXEC gave {out:?}")
        };
        for (c, v) in cmds.iter().zip(&replies) {
            assert!(error_text(v).is_none(), "{k}: {c:?} in MULTI: {v:?}");
        }
        // The same writes from a script, on other keys.
        for c in (fam.write)("lua:", 0) {
            let script = "return redis.call(unpack(ARGV))";
            let mut args = vec!["EVAL".to_string(), script.into(), "0".into()];
            args.extend(c.iter().cloned());
            let v = primary.cmd_value(&args);
            assert!(error_text(&v).is_none(), "{k}: EVAL {c:?}: {v:?}");
        }
    }
    // An error inside a transaction changes nothing and the rest still replicates.
    let v = primary.cmd_value(&[
        "EVAL",
        "return redis.pcall('TSCOUNTER.INCRBY', KEYS[1], 'x')",
        "1",
        "lua:bad",
    ]);
    assert_eq!(
        v,
        v_err("ERR value is not an integer or out of range"),
        "{k}"
    );
    let compared = assert_replica_equal(&primary, &replica, "MULTI and scripts");
    assert!(!compared.is_empty(), "{k}: nothing to compare");
    wait_tiny_expired(&primary, COUNTER);
    let settled = primary.dump_keyspace();
    primary.restart();
    assert_eq!(
        primary.dump_keyspace(),
        settled,
        "{k}: AOF reload after MULTI and scripts"
    );
    primary.assert_alive();
}
