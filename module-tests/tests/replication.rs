//! Replication and persistence of TSCOUNTER data (every `server_kinds()`):
//! a replica attached during a workload, AOF and RDB reloads, trimming by the primary's
//! timer reaching the replica, trimming resuming after a restart and after a promotion,
//! and replicas never trimming on their own.
//!
//! `every_write_command_replicates_exactly`: one case per write command of the module's
//! table (`write_cases`, keyed by command name), each ending with the replica equal to
//! the primary, and a check that every write command the server lists has one.
//!
//! Comparisons are byte-for-byte (`dump_keyspace`). A timer may trim between two dumps,
//! so replica/primary comparisons retry until the primary's replication offset did not
//! move while both dumps were taken; reload comparisons use timestamps whose slots stay
//! kept far longer than the test runs.

use module_tests::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

// ================================================================= helpers

fn has_prefix(srv: &Server, key: &str, prefix: &str) -> bool {
    slot_fields(srv, key).keys().any(|f| f.starts_with(prefix))
}

/// One pipelined batch of counter writes on `keys` (created with `sets`), with `AT`
/// times up to `back_ms` before the server's now; some writes are refused (too old, key
/// exists), some bring slots back to 0. Returns how many replies were integers.
fn workload_batch(
    conn: &mut redis::Connection,
    now: i64,
    rng: &mut Rng,
    keys: &[(String, &str)],
    back_ms: i64,
    n: usize,
) -> usize {
    let mut cmds = Vec::with_capacity(n);
    for _ in 0..n {
        let (key, set) = &keys[rng.below(keys.len() as i64) as usize];
        let ts = (now - rng.below(back_ms)).to_string();
        let cmd: Vec<String> = match rng.below(12) {
            0 => {
                let mut c = vec!["TSCOUNTER.CREATE".to_string(), key.clone()];
                if !set.is_empty() {
                    c.push("RESOLUTIONS".into());
                    c.extend(set.split(' ').map(String::from));
                }
                c
            }
            1 => vec!["TSCOUNTER.INCR".into(), key.clone(), "AT".into(), ts],
            2 => vec!["TSCOUNTER.INCR".into(), key.clone()],
            3 => vec![
                "TSCOUNTER.INCRBY".into(),
                key.clone(),
                "1".into(),
                "AT".into(),
                "1000".into(), // refused: far too old
            ],
            4 => vec![
                "TSCOUNTER.SUM".into(),
                key.clone(),
                "1m".into(),
                "5m".into(),
            ],
            _ => vec![
                "TSCOUNTER.INCRBY".into(),
                key.clone(),
                (rng.below(7) - 3).to_string(),
                "AT".into(),
                ts,
            ],
        };
        cmds.push(cmd);
    }
    pipeline(conn, &cmds)
        .iter()
        .filter(|v| matches!(v, Value::Int(_)))
        .count()
}

/// Counters of several shapes: created with explicit resolutions or auto-created with the
/// defaults, including short resolutions whose slots expire while the test runs.
fn counter_keys(short: bool) -> Vec<(String, &'static str)> {
    let sets: &[&str] = if short {
        &[
            "1s:3 1m:5",
            "500ms:4",
            "",
            "1s:60 1m:60 1h:24 1d:365",
            "2s:5 13s:7",
        ]
    } else {
        &["1m:60 1h:24", "", "5s:100 1d:3", "1s:60 1m:60 1h:24 1d:365"]
    };
    (0..20)
        .map(|i| (format!("ctr:{i}"), sets[i % sets.len()]))
        .collect()
}

/// An array of integers.
fn v_ints(items: &[i64]) -> Value {
    v_arr(items.iter().map(|i| v_int(*i)).collect())
}

/// One command line and its exact reply.
type Step = (Vec<&'static str>, Value);

/// A case per write command of the module, keyed by its name: the commands it runs on the
/// primary, each with its exact reply. Each case writes keys of its own.
fn write_cases() -> Vec<(&'static str, Vec<Step>)> {
    let mlimit = |a: &'static str, limit: &'static str| {
        vec![
            "TSCOUNTER.MLIMIT",
            "2",
            "ml:a",
            "ml:b",
            "1",
            "1",
            "1m",
            a,
            "1",
            "1m",
            limit,
        ]
    };
    vec![
        (
            "TSCOUNTER.CREATE",
            vec![
                (
                    vec!["TSCOUNTER.CREATE", "cr", "RESOLUTIONS", "1m:60", "1h:24"],
                    v_ok(),
                ),
                (vec!["TSCOUNTER.CREATE", "cr2"], v_ok()),
            ],
        ),
        (
            "TSCOUNTER.INCRBY",
            vec![
                (vec!["TSCOUNTER.INCRBY", "ib", "5"], v_int(5)),
                (vec!["TSCOUNTER.INCRBY", "ib", "-2"], v_int(3)),
                (vec!["TSCOUNTER.INCRBY", "ib", "-3"], v_int(0)),
            ],
        ),
        (
            "TSCOUNTER.INCR",
            vec![
                (vec!["TSCOUNTER.INCR", "in"], v_int(1)),
                (vec!["TSCOUNTER.INCR", "in"], v_int(2)),
            ],
        ),
        (
            "TSCOUNTER.LIMIT",
            vec![
                (
                    vec!["TSCOUNTER.LIMIT", "li", "2", "1m", "3", "1h", "10"],
                    v_arr(vec![v_int(1), v_int(0), v_ints(&[2, 2])]),
                ),
                (
                    vec!["TSCOUNTER.LIMIT", "li", "1", "1m", "3", "1h", "10"],
                    v_arr(vec![v_int(1), v_int(0), v_ints(&[3, 3])]),
                ),
            ],
        ),
        (
            "TSCOUNTER.MLIMIT",
            vec![
                (vec!["TSCOUNTER.INCRBY", "ml:b", "4"], v_int(4)),
                (
                    mlimit("10", "5"),
                    v_arr(vec![
                        v_int(1),
                        v_int(0),
                        v_arr(vec![v_ints(&[1]), v_ints(&[5])]),
                    ]),
                ),
            ],
        ),
        (
            "TSRANK.CREATE",
            vec![(
                vec!["TSRANK.CREATE", "rc", "WINDOW", "1h", "SLOT", "1m"],
                v_ok(),
            )],
        ),
        (
            "TSRANK.INCRBY",
            vec![
                (
                    vec!["TSRANK.INCRBY", "ri", "3", "a", "2", "b"],
                    v_ints(&[3, 2]),
                ),
                (vec!["TSRANK.INCRBY", "ri", "4", "b"], v_int(6)),
            ],
        ),
        (
            "TSRANK.REM",
            vec![
                (
                    vec!["TSRANK.INCRBY", "rr", "3", "a", "2", "b", "1", "c"],
                    v_ints(&[3, 2, 1]),
                ),
                (vec!["TSRANK.REM", "rr", "a", "c", "zz"], v_int(2)),
            ],
        ),
        ("STATS.CREATE", vec![(vec!["STATS.CREATE", "sc"], v_ok())]),
        (
            "STATS.ADD",
            vec![
                (vec!["STATS.ADD", "sa", "1.5", "2.5"], v_int(2)),
                (
                    vec!["STATS.ADD", "sa", "4", "REPORT", "sa:rank", "m"],
                    v_int(3),
                ),
            ],
        ),
        (
            "TSTHROTTLE.ALLOW",
            vec![(
                vec!["TSTHROTTLE.ALLOW", "th", "0", "1", "1m"],
                v_ints(&[1, 1, 0, 0, 60_000]),
            )],
        ),
    ]
}

// ================================================================== tests

per_server!(every_write_command_replicates_exactly);
/// Every write command of the module's table has a case in `write_cases`; after each
/// case the replica holds exactly the primary's data.
fn every_write_command_replicates_exactly(kind: &ServerKind) {
    let (primary, replica) = start_with_replica(kind);
    let k = &kind.name;
    let cases = write_cases();
    assert_cases_cover(
        &primary,
        "replication.rs write_cases",
        &tally_write_commands(&primary),
        cases.iter().map(|(name, _)| name),
    );
    for (name, commands) in &cases {
        assert!(
            commands.iter().any(|(args, _)| args[0] == *name),
            "{k}: the case of {name} does not run it"
        );
        for (args, want) in commands {
            assert_eq!(&primary.cmd_value(args), want, "{k}: {name}: {args:?}");
        }
        assert_replica_equal(&primary, &replica, name);
    }
    replica.assert_alive();
}

per_server!(replica_attached_during_a_workload_is_identical);
fn replica_attached_during_a_workload_is_identical(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    let k = &kind.name;
    let keys = counter_keys(true);
    let attached = AtomicBool::new(false);
    let writes_after = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut conn = primary.conn();
            let mut rng = Rng(7);
            let (mut batches, mut after) = (0, 0);
            // Write before, during and after the attach, for at least 1.5 s after it.
            let mut attach_seen: Option<Instant> = None;
            loop {
                let now = server_ms(&primary);
                workload_batch(&mut conn, now, &mut rng, &keys, 100_000, 100);
                batches += 1;
                if attached.load(Ordering::SeqCst) {
                    after += 1;
                    let t = *attach_seen.get_or_insert_with(Instant::now);
                    if t.elapsed() > Duration::from_millis(1500) && after >= 10 {
                        return (batches, after);
                    }
                }
                assert!(batches < 100_000, "writer never saw the attach");
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        replica.replicate_from(&primary);
        attached.store(true, Ordering::SeqCst);
        writer.join().expect("writer")
    });
    assert!(writes_after.1 >= 10, "{k}: {writes_after:?}");
    assert_replica_equal(&primary, &replica, "after the workload");
    let dump = primary.dump_keyspace();
    assert!(dump.len() >= 10, "{k}: {} keys", dump.len());
    // Later writes, and later trimming of the short slots, keep them equal.
    let mut conn = primary.conn();
    let mut rng = Rng(8);
    for _ in 0..5 {
        let now = server_ms(&primary);
        workload_batch(&mut conn, now, &mut rng, &keys, 10_000, 100);
    }
    std::thread::sleep(Duration::from_millis(1200));
    assert_replica_equal(&primary, &replica, "after trimming");
    replica.assert_alive();
}

per_server!(aof_reload_restores_the_same_data);
/// AOF: the effects written to the AOF rebuild exactly the same data, after a clean
/// shutdown, after a rewrite, and after a crash with `appendfsync always`.
fn aof_reload_restores_the_same_data(kind: &ServerKind) {
    let mut srv = Server::start_with(
        kind,
        ServerOptions::new()
            .config("appendonly", "yes")
            .config("appendfsync", "always"),
    );
    let k = &kind.name;
    let keys = counter_keys(false);
    let mut rng = Rng(21);
    let mut conn = srv.conn();
    let mut ok = 0;
    for _ in 0..10 {
        // Slots at most 30 s old: every one stays kept for minutes.
        ok += workload_batch(&mut conn, server_ms(&srv), &mut rng, &keys, 30_000, 200);
    }
    drop(conn);
    assert!(ok > 1000, "{k}: {ok}");
    let before = srv.dump_keyspace();
    assert!(before.len() >= 15, "{k}: {}", before.len());
    let t_before = server_ms(&srv).to_string();
    let sums = |srv: &Server| -> Vec<Value> {
        keys.iter()
            .map(|(key, _)| srv.cmd_value(&["TSCOUNTER.SUM", key, "1h", "5m", "AT", &t_before]))
            .collect()
    };
    let sums_before = sums(&srv);
    assert!(sums_before
        .iter()
        .any(|v| matches!(v, Value::Array(a) if a[0] != v_int(0))));
    srv.restart();
    assert_eq!(
        srv.dump_keyspace(),
        before,
        "{k}: AOF reload after shutdown"
    );
    assert_eq!(sums(&srv), sums_before, "{k}: reads after the reload");

    let v = srv.cmd_value(&["BGREWRITEAOF"]);
    assert!(error_text(&v).is_none(), "{k}: BGREWRITEAOF: {v:?}");
    assert!(
        wait_until(Duration::from_secs(20), || {
            srv.info("persistence")
                .get("aof_rewrite_in_progress")
                .map(String::as_str)
                == Some("0")
                && srv
                    .info("persistence")
                    .get("aof_rewrite_scheduled")
                    .map(String::as_str)
                    == Some("0")
        }),
        "{k}: rewrite did not finish"
    );
    srv.restart();
    assert_eq!(
        srv.dump_keyspace(),
        before,
        "{k}: AOF reload after a rewrite"
    );

    let mut conn = srv.conn();
    workload_batch(&mut conn, server_ms(&srv), &mut rng, &keys, 30_000, 200);
    drop(conn);
    let before = srv.dump_keyspace();
    srv.restart_after_kill();
    assert_eq!(srv.dump_keyspace(), before, "{k}: AOF reload after SIGKILL");
    // The counters keep working.
    assert!(
        matches!(srv.cmd_value(&["TSCOUNTER.INCR", "ctr:0"]), Value::Int(_)),
        "{k}"
    );
    srv.assert_alive();
}

per_server!(rdb_reload_restores_the_same_data);
fn rdb_reload_restores_the_same_data(kind: &ServerKind) {
    let mut srv = Server::start(kind);
    let k = &kind.name;
    let keys = counter_keys(false);
    let mut rng = Rng(31);
    let mut conn = srv.conn();
    for _ in 0..10 {
        workload_batch(&mut conn, server_ms(&srv), &mut rng, &keys, 30_000, 200);
    }
    drop(conn);
    // A binary key name in another database travels too.
    let mut c = srv.conn();
    redis::cmd("SELECT").arg(2).query::<()>(&mut c).unwrap();
    let v = redis::cmd("TSCOUNTER.INCRBY")
        .arg(&b"bin\xff\x00"[..])
        .arg(9)
        .query::<i64>(&mut c);
    assert_eq!(v.ok(), Some(9), "{k}");
    drop(c);
    let before = srv.dump_keyspace();
    assert!(before.len() >= 16, "{k}: {}", before.len());
    srv.restart_saving();
    assert_eq!(srv.dump_keyspace(), before, "{k}: RDB reload");
    assert!(
        matches!(srv.cmd_value(&["TSCOUNTER.INCR", "ctr:1"]), Value::Int(_)),
        "{k}"
    );
    srv.assert_alive();
}

per_server!(idle_trimming_on_the_primary_reaches_the_replica);
/// The primary's timer trims a counter nobody writes to; its effects reach the replica.
fn idle_trimming_on_the_primary_reaches_the_replica(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    let k = &kind.name;
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    for (key, res) in [
        ("t1", &["1s:5", "1h:2"][..]),
        ("t2", &["1s:5"]),
        ("t3", &["1h:2"]),
    ] {
        let mut c = vec!["TSCOUNTER.CREATE", key, "RESOLUTIONS"];
        c.extend(res);
        assert_eq!(primary.cmd_value(&c), v_ok(), "{k}");
        assert_eq!(
            primary.cmd_value(&["TSCOUNTER.INCRBY", key, "3"]),
            v_int(3),
            "{k}"
        );
    }
    // The 1s slots live at least 4 s: the replica has them first.
    assert_replica_equal(&primary, &replica, "after the writes");
    assert!(has_prefix(&replica, "t1", "1s:"), "{k}");
    assert!(exists(&replica, "t2"), "{k}");
    assert!(
        wait_until(Duration::from_secs(20), || {
            !has_prefix(&primary, "t1", "1s:") && !exists(&primary, "t2")
        }),
        "{k}: the primary did not trim"
    );
    assert_replica_equal(&primary, &replica, "after trimming");
    assert!(!has_prefix(&replica, "t1", "1s:"), "{k}");
    assert!(has_prefix(&replica, "t1", "1h:"), "{k}");
    assert!(!exists(&replica, "t2"), "{k}");
    assert!(exists(&replica, "t3"), "{k}");
}

per_server!(trimming_resumes_after_a_restart);
/// After an RDB restart nobody writes: the start-up scan finds the counter again and the
/// timer trims it.
fn trimming_resumes_after_a_restart(kind: &ServerKind) {
    let mut srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "r1", "RESOLUTIONS", "2s:4", "1h:2"]),
        v_ok()
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "r2", "RESOLUTIONS", "2s:4"]),
        v_ok()
    );
    let mut c = srv.conn();
    redis::cmd("SELECT").arg(5).query::<()>(&mut c).unwrap();
    let v = redis::cmd("TSCOUNTER.CREATE")
        .arg("r3")
        .arg("RESOLUTIONS")
        .arg("2s:4")
        .query::<String>(&mut c);
    assert_eq!(v.ok().as_deref(), Some("OK"), "{k}");
    assert_eq!(
        redis::cmd("TSCOUNTER.INCR")
            .arg("r3")
            .query::<i64>(&mut c)
            .ok(),
        Some(1)
    );
    drop(c);
    let t0 = server_ms(&srv);
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCR", "r1"]), v_int(1), "{k}");
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCR", "r2"]), v_int(1), "{k}");
    // The 2s slot leaves at the earliest 6 s after t0.
    srv.restart_saving();
    if server_ms(&srv) < t0 + 5_000 {
        assert!(has_prefix(&srv, "r1", "2s:"), "{k}: the RDB kept the slot");
        assert!(exists(&srv, "r2"), "{k}");
    }
    let r3_gone = || {
        let mut c = srv.conn();
        redis::cmd("SELECT").arg(5).query::<()>(&mut c).unwrap();
        redis::cmd("EXISTS").arg("r3").query::<i64>(&mut c).unwrap() == 0
    };
    assert!(
        wait_until(Duration::from_secs(30), || {
            !has_prefix(&srv, "r1", "2s:") && !exists(&srv, "r2") && r3_gone()
        }),
        "{k}: no trimming after the restart: {:?} (INFO {:?})",
        slot_fields(&srv, "r1"),
        srv.info("tally")
    );
    assert!(has_prefix(&srv, "r1", "1h:"), "{k}");
}

per_server!(replicas_never_trim_but_a_promoted_replica_does);
/// A replica whose primary is gone keeps its data untouched while it is a replica, even
/// after its slots would have expired; promoted, it trims by itself.
fn replicas_never_trim_but_a_promoted_replica_does(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    let k = &kind.name;
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    assert_eq!(
        primary.cmd_value(&["TSCOUNTER.CREATE", "p1", "RESOLUTIONS", "1s:4", "1h:2"]),
        v_ok()
    );
    assert_eq!(
        primary.cmd_value(&["TSCOUNTER.CREATE", "p2", "RESOLUTIONS", "1s:4"]),
        v_ok()
    );
    let t0 = server_ms(&primary);
    assert_eq!(
        primary.cmd_value(&["TSCOUNTER.INCRBY", "p1", "4"]),
        v_int(4)
    );
    assert_eq!(
        primary.cmd_value(&["TSCOUNTER.INCRBY", "p2", "5"]),
        v_int(5)
    );
    wait_replica_synced(&primary, &replica);
    let snapshot = replica.dump_keyspace();
    drop(primary); // SIGKILL: no more effects can arrive
    assert!(
        snapshot.keys().any(|key| key.ends_with("p2")),
        "{k}: the replica got the data before its primary died: {snapshot:?}"
    );
    // Past the moment every 1s slot has left (t0 + 4 s), plus time for several ticks.
    while server_ms(&replica) < t0 + 6_000 {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        replica.info("replication").get("role").map(String::as_str),
        Some("slave"),
        "{k}"
    );
    assert_eq!(
        replica.dump_keyspace(),
        snapshot,
        "{k}: a replica trimmed on its own"
    );

    assert_eq!(
        replica.cmd_value(&["REPLICAOF", "NO", "ONE"]),
        v_ok(),
        "{k}"
    );
    assert!(
        wait_until(Duration::from_secs(20), || {
            !has_prefix(&replica, "p1", "1s:") && !exists(&replica, "p2")
        }),
        "{k}: the promoted replica did not trim: {:?}",
        replica.info("tally")
    );
    assert_eq!(
        slot_fields(&replica, "p1").len(),
        1,
        "{k}: the hour slot stays"
    );
    // And it takes writes as a primary.
    assert!(
        matches!(replica.cmd_value(&["TSCOUNTER.INCR", "p1"]), Value::Int(_)),
        "{k}"
    );
}

per_server!(replica_reads_follow_the_primary);
/// Reads on a replica answer from the replicated data, also after earlier reads there:
/// every write of the primary (an HSET of an existing slot field, field count unchanged)
/// shows up in the replica's next SUM / RANGE.
fn replica_reads_follow_the_primary(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    let k = &kind.name;
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    assert_eq!(
        primary.cmd_value(&["TSCOUNTER.CREATE", "c", "RESOLUTIONS", "1m:60", "1h:24"]),
        v_ok()
    );
    let t = server_ms(&primary);
    // 40 minute slots: large enough for reads to cache the counter.
    for i in 0..40 {
        let ts = (t - i * 60_000).to_string();
        assert_eq!(
            primary.cmd_value(&["TSCOUNTER.INCRBY", "c", "1", "AT", &ts]),
            v_int(1)
        );
    }
    let mut rng = Rng(5);
    for step in 0..20 {
        // Into slots that exist: the replica sees HSETs of existing fields.
        let ts = (t - rng.below(40) * 60_000).to_string();
        let by = (1 + rng.below(9)).to_string();
        let v = primary.cmd_value(&["TSCOUNTER.INCRBY", "c", &by, "AT", &ts]);
        assert!(matches!(v, Value::Int(_)), "{k}: {v:?}");
        wait_replica_synced(&primary, &replica);
        let at = t.to_string();
        for cmd in [
            &["TSCOUNTER.SUM", "c", "1h", "10m", "1m", "AT", &at][..],
            &["TSCOUNTER.RANGE", "c", "1m", "FROM", "0", "TO", &at],
            &["TSCOUNTER.RANGE", "c", "1h", "TO", &at],
        ] {
            assert_eq!(
                replica.cmd_value(cmd),
                primary.cmd_value(cmd),
                "{k}: step {step}: {cmd:?} on the replica"
            );
        }
    }
}
