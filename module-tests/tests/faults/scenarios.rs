//! The fault scenarios, one test per scenario and family: partial resync, full resync,
//! AOF reload, `DEBUG RELOAD`, and OOM refusing writes while serving reads.

use super::*;

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
    // Read before the reload: the timer may expire the new slots right after it (INFO's
    // counters live in the module, which a reload keeps).
    let expired = info_i64(&srv, "tally", "tally_slots_expired");
    assert_eq!(srv.cmd_value(&["DEBUG", "RELOAD"]), v_ok(), "{k}");
    assert_eq!(
        srv.dump_keyspace(),
        before,
        "{k} {}: DEBUG RELOAD changed data",
        fam.name
    );
    // Expiry goes on after the reload (the schedule is rebuilt by a scan).
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
