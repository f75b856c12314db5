//! Keyspace operations carry the counter (RENAME, DUMP/RESTORE, COPY, MOVE, SWAPDB, DEL,
//! FLUSHALL) and the timer follows counters that move.

use super::*;

/// Runs `cmds` in one MULTI/EXEC (no timer can run in between); returns EXEC's replies.
fn transaction(srv: &Server, cmds: &[&[&str]]) -> Vec<Value> {
    let mut all = vec![args(&["MULTI"])];
    all.extend(cmds.iter().map(|c| args(c)));
    all.push(args(&["EXEC"]));
    let mut conn = srv.conn();
    let got = pipeline(&mut conn, &all);
    match got.last() {
        Some(Value::Array(replies)) => replies.clone(),
        other => panic!("{}: EXEC gave {other:?} ({got:?})", srv.kind().name),
    }
}

fn exists_in(srv: &Server, db: i64, key: &str) -> bool {
    let mut c = srv.conn();
    redis::cmd("SELECT").arg(db).query::<()>(&mut c).unwrap();
    redis::cmd("EXISTS").arg(key).query::<i64>(&mut c).unwrap() == 1
}

fn hkeys_in(srv: &Server, db: i64, key: &str) -> Vec<String> {
    let mut c = srv.conn();
    redis::cmd("SELECT").arg(db).query::<()>(&mut c).unwrap();
    redis::cmd("HKEYS")
        .arg(key)
        .query::<Vec<String>>(&mut c)
        .unwrap()
}

per_server!(keyspace_operations_carry_the_counter);
/// The counter lives in its hash: RENAME, DUMP/RESTORE, COPY, MOVE, SWAPDB, DEL and
/// FLUSHALL carry or remove it whole, and reads never answer from stale state.
fn keyspace_operations_carry_the_counter(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let t = server_ms(&srv).to_string();
    let sum = |key: &str| srv.cmd_value(&["TSCOUNTER.SUM", key, "1h", "AT", &t]);
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "a", "RESOLUTIONS", "1m:60", "1h:24"]),
        v_ok()
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "a", "5", "AT", &t]),
        v_int(5)
    );
    assert_eq!(sum("a"), v_int(5), "{k}");
    assert_eq!(srv.cmd_value(&["RENAME", "a", "b"]), v_ok());
    assert_eq!(sum("a"), v_int(0), "{k}");
    assert_eq!(sum("b"), v_int(5), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "b", "2", "AT", &t]),
        v_int(7)
    );
    assert_eq!(sum("b"), v_int(7), "{k}");
    let payload = srv.cmd_value(&["DUMP", "b"]);
    let Value::BulkString(payload) = payload else {
        panic!("{k}: {payload:?}")
    };
    assert_eq!(
        srv.cmd_value(&[&b"RESTORE"[..], b"c", b"0", &payload]),
        v_ok()
    );
    assert_eq!(sum("c"), v_int(7), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "c", "1", "AT", &t]),
        v_int(8)
    );
    assert_eq!((sum("b"), sum("c")), (v_int(7), v_int(8)), "{k}");
    assert_eq!(srv.cmd_value(&["COPY", "c", "d"]), v_int(1));
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "d", "10", "AT", &t]),
        v_int(18)
    );
    assert_eq!((sum("c"), sum("d")), (v_int(8), v_int(18)), "{k}");
    assert_eq!(srv.cmd_value(&["DEL", "b"]), v_int(1));
    assert_eq!(sum("b"), v_int(0), "{k}");
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INFO", "b"]), v_nil(), "{k}");
    assert_eq!(srv.cmd_value(&["MOVE", "c", "1"]), v_int(1));
    assert_eq!(sum("c"), v_int(0), "{k}");
    assert_eq!(srv.cmd_value(&["SWAPDB", "0", "1"]), v_ok());
    assert_eq!(sum("c"), v_int(8), "{k}: moved then swapped back into db 0");
    assert_eq!(sum("d"), v_int(0), "{k}");
    assert_eq!(srv.cmd_value(&["FLUSHALL"]), v_ok());
    assert_eq!(sum("c"), v_int(0), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "c", "4", "AT", &t]),
        v_int(4)
    );
    assert_eq!(sum("c"), v_int(4), "{k}");
    assert_eq!(
        info_resolutions(&srv, "c"),
        v_pairs(
            &res_list(DEFAULT_RES)
                .iter()
                .map(|r| (r.ms, r.samples))
                .collect::<Vec<_>>()
        ),
        "{k}: recreated with the defaults"
    );
    // A user's own edits of the hash are what reads see, also for a counter large
    // enough to be cached by reads (31 minute slots), edited after a read.
    let t_ms: i64 = t.parse().unwrap();
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "u", "RESOLUTIONS", "1m:60", "1h:24"]),
        v_ok()
    );
    for i in 1..=30 {
        let ts = (t_ms - i * 60_000).to_string();
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.INCRBY", "u", "1", "AT", &ts]),
            v_int(1)
        );
    }
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "u", "18", "AT", &t]),
        v_int(18)
    );
    assert_eq!(sum("u"), v_int(48), "{k}");
    let minute = format!("1m:{}", slot(t_ms, 60_000));
    let hour = format!("1h:{}", slot(t_ms, 3_600_000));
    assert_eq!(srv.cmd_value(&["HSET", "u", &minute, "100"]), v_int(0));
    assert_eq!(
        sum("u"),
        v_int(130),
        "{k}: SUM after a user's HSET of a slot field"
    );
    assert_eq!(srv.cmd_value(&["HSET", "u", &hour, "7"]), v_int(0));
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "u", "1h", "1d", "AT", &t]),
        {
            let Value::Int(day) = srv.cmd_value(&["TSCOUNTER.SUM", "u", "1d", "AT", &t]) else {
                panic!("{k}")
            };
            v_ints(&[130, day])
        }
    );
    assert_eq!(srv.cmd_value(&["HDEL", "u", &minute]), v_int(1));
    assert_eq!(sum("u"), v_int(30), "{k}: after HDEL");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "u", "2", "AT", &t]),
        v_int(2),
        "{k}"
    );
    assert_eq!(sum("u"), v_int(32), "{k}");
}

per_server!(the_timer_follows_counters_that_move);
/// Counters that arrive under a new name or in another database are still trimmed by the
/// timer. Each arrives in a MULTI/EXEC with its write, so its short slot is still there.
fn the_timer_follows_counters_that_move(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let create = |key: &'static str| -> Vec<&'static str> {
        vec!["TSCOUNTER.CREATE", key, "RESOLUTIONS", "100ms:2", "1h:2"]
    };
    let ok = |v: &[Value]| v.iter().all(|x| error_text(x).is_none());
    let r = transaction(
        &srv,
        &[
            &create("a"),
            &["TSCOUNTER.INCR", "a"],
            &["RENAME", "a", "renamed"],
        ],
    );
    assert!(ok(&r), "{k}: {r:?}");
    let r = transaction(
        &srv,
        &[
            &create("b"),
            &["TSCOUNTER.INCR", "b"],
            &["COPY", "b", "copied"],
        ],
    );
    assert!(ok(&r), "{k}: {r:?}");
    let r = transaction(
        &srv,
        &[&create("c"), &["TSCOUNTER.INCR", "c"], &["MOVE", "c", "3"]],
    );
    assert!(ok(&r), "{k}: {r:?}");
    let r = transaction(
        &srv,
        &[
            &create("e"),
            &["TSCOUNTER.INCR", "e"],
            &["SWAPDB", "0", "4"],
            &["SWAPDB", "0", "4"],
            &["MOVE", "e", "5"],
            &["SWAPDB", "5", "6"],
        ],
    );
    assert!(ok(&r), "{k}: {r:?}");
    let r = transaction(
        &srv,
        &[&create("d"), &["TSCOUNTER.INCR", "d"], &["DUMP", "d"]],
    );
    let Value::BulkString(payload) = &r[2] else {
        panic!("{k}: {r:?}")
    };
    // RESTORE of a payload whose 100ms slot has long expired.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        srv.cmd_value(&[&b"RESTORE"[..], b"restored", b"0", payload]),
        v_ok(),
        "{k}"
    );
    let short = |db: i64, key: &str| {
        hkeys_in(&srv, db, key)
            .iter()
            .any(|f| f.starts_with("100ms:"))
    };
    let places = [
        (0, "renamed"),
        (0, "copied"),
        (0, "b"),
        (3, "c"),
        (6, "e"),
        (0, "restored"),
    ];
    assert!(
        wait_until(Duration::from_secs(10), || places
            .iter()
            .all(|&(db, key)| !short(db, key))),
        "{k}: not trimmed: {:?}",
        places
            .iter()
            .map(|&(db, key)| (db, key, hkeys_in(&srv, db, key)))
            .collect::<Vec<_>>()
    );
    for (db, key) in places {
        assert!(
            exists_in(&srv, db, key),
            "{k}: {key} in db {db} keeps its hour slot"
        );
        assert_eq!(
            hkeys_in(&srv, db, key).len(),
            3,
            "{k}: {key}: _tally, _state, 1h"
        );
    }
}

per_server!(a_transaction_counts_at_its_servers_command_time);
/// A command without `AT` counts at the command's now. Servers that give modules their
/// cached command time (Redis 7.2+, every Valkey) give the time the outermost command
/// started: every increment of one MULTI/EXEC lands at EXEC's time, as every key expiry in
/// it is judged at that time, however long the transaction runs. Redis 7.0 has no cached
/// time for modules: each command reads the clock.
fn a_transaction_counts_at_its_servers_command_time(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "c", "RESOLUTIONS", "1s:60"]),
        v_ok(),
        "{k}"
    );
    let before = server_ms(&srv);
    let replies = transaction(
        &srv,
        &[
            &["TSCOUNTER.INCR", "c"],
            &["DEBUG", "SLEEP", "1.2"],
            &["TSCOUNTER.INCR", "c"],
        ],
    );
    let after = server_ms(&srv);
    assert_eq!(replies.len(), 3, "{k}: {replies:?}");
    assert!(
        matches!(replies[0], Value::Int(_)) && matches!(replies[2], Value::Int(_)),
        "{k}: {replies:?}"
    );
    let slots: Vec<(i64, i64)> = srv.query(&["TSCOUNTER.RANGE", "c", "1s"]);
    let second_of = |ms: i64| ms.div_euclid(1000) * 1000;
    let cached_clock = kind.is_valkey() || kind.version() >= (7, 2, 0);
    if cached_clock {
        // One slot, the second EXEC started in (after `before`, 1.2 s before `after`).
        assert_eq!(slots.len(), 1, "{k}: {slots:?}");
        let (start, count) = slots[0];
        assert_eq!(count, 2, "{k}: {slots:?}");
        assert!(
            start >= second_of(before) && start <= second_of(after - 1200),
            "{k}: {slots:?} ({before}..{after})"
        );
    } else {
        // Two slots at least a second apart, one increment each.
        assert_eq!(slots.len(), 2, "{k}: {slots:?}");
        assert_eq!((slots[0].1, slots[1].1), (1, 1), "{k}: {slots:?}");
        assert!(slots[1].0 - slots[0].0 >= 1000, "{k}: {slots:?}");
    }
    srv.assert_alive();
}
