//! TSCOUNTER safety: a counter stays safe whatever a user does to its hash.
//!
//! * a user's `HDEL` of a slot field never leaves the timer busy: visits are bounded by
//!   `tally.expire-budget-us`, their progress is saved, and the timer goes idle;
//! * a user's `HSET`/`HDEL` of slot fields or of `_state` never makes a counter answer
//!   `WRONGTYPE`, and the key still expires when its slots leave;
//! * `SUM` with thousands of windows costs its input plus one walk of the stored slots;
//!   a counter too large for the read cache is not cached and evicts nothing;
//! * counters tally deletes itself leave no read cache and no schedule entry behind;
//! * timer visits that change nothing do not open the key for writing (`WATCH` survives).

use module_tests::*;
use std::time::Duration;

/// The one slot field of `key` whose name starts with `prefix` (e.g. `1ms:`).
fn field_with_prefix(srv: &Server, key: &str, prefix: &str) -> String {
    let fields: Vec<String> = slot_fields(srv, key)
        .into_keys()
        .filter(|f| f.starts_with(prefix))
        .collect();
    assert_eq!(fields.len(), 1, "{key}: fields {prefix}*: {fields:?}");
    fields[0].clone()
}

per_server!(timer_goes_idle_after_a_slot_field_is_deleted);
/// Item 3 of the issue: `HDEL` of a counter's only 1ms slot. Once that slot has left, the
/// timer must heal the bookkeeping in bounded ticks and go idle, instead of visiting the
/// key every millisecond with a probe run that grows without end. Two shapes: a tiny hash,
/// and one with thousands of daily slots (hashtable encoding).
fn timer_goes_idle_after_a_slot_field_is_deleted(kind: &ServerKind) {
    let srv = Server::start(kind);
    let since_start = Lost::start(&srv);
    let k = &kind.name;
    for daily_slots in [0i64, 3000] {
        let key = format!("c{daily_slots}");
        assert_eq!(
            srv.cmd_value(&[
                "TSCOUNTER.CREATE",
                &key,
                "RESOLUTIONS",
                "1ms:5000",
                "1d:5000"
            ]),
            v_ok()
        );
        let t0 = server_ms(&srv);
        let mut conn = srv.conn();
        let fill: Vec<Vec<String>> = (1..=daily_slots)
            .map(|d| {
                let at = (t0 - d * 86_400_000).to_string();
                vec!["TSCOUNTER.INCR".into(), key.clone(), "AT".into(), at]
            })
            .collect();
        if !fill.is_empty() {
            for reply in pipeline(&mut conn, &fill) {
                assert_eq!(reply, v_int(1), "{k}");
            }
        }
        // Kept by 1ms:5000 for 1.5 s more.
        let ts = t0 - 5_000 + 1_500;
        let at = ts.to_string();
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.INCR", &key, "AT", &at]),
            v_int(1),
            "{k}"
        );
        let fine = field_with_prefix(&srv, &key, "1ms:");
        assert_eq!(srv.cmd_value(&["HDEL", &key, &fine]), v_int(1));
    }
    // The 1ms slots left at t0 + 1.5 s; give the timer 2.5 s more.
    std::thread::sleep(Duration::from_millis(4_000));
    let visited = info_i64(&srv, "tally", "tally_keys_visited");
    let lost = Lost::start(&srv);
    let mut worst_tick = 0;
    for _ in 0..50 {
        worst_tick = worst_tick.max(info_i64(&srv, "tally", "tally_last_tick_us"));
        std::thread::sleep(Duration::from_millis(20));
    }
    let visits = info_i64(&srv, "tally", "tally_keys_visited") - visited;
    assert!(
        visits < 20,
        "{k}: {visits} visits in 1 s: the timer is not idle"
    );
    // Tick times are wall time: the time the server lost to other work is allowed on top.
    assert!(
        worst_tick < STALL_LIMIT_US + lost.server_us(),
        "{k}: a tick took {worst_tick} us (the server lost {} us)",
        lost.server_us()
    );
    assert_ticks_below(&srv, STALL_LIMIT_US, &since_start, k);
    let ping = max_ping_held(&srv, 200);
    assert!(ping < Duration::from_millis(10), "{k}: PING held {ping:?}");
    // The daily slots are intact and still counted.
    for daily_slots in [0i64, 3000] {
        let key = format!("c{daily_slots}");
        let window = format!("{}d", daily_slots + 1);
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.SUM", &key, &window]),
            v_int(daily_slots + 1),
            "{k}"
        );
    }
    srv.assert_alive();
}

per_server!(user_edits_never_make_a_counter_wrongtype);
/// Item 4 of the issue and its relatives: a user's `HSET`/`HDEL` on slot fields and on
/// `_state`. Every command keeps answering (never `WRONGTYPE`), and the key still expires
/// when its slots leave. A replica follows exactly.
fn user_edits_never_make_a_counter_wrongtype(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    let k = &kind.name;
    let srv = &primary;

    // The reproduction, verbatim.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "c1", "RESOLUTIONS", "1m:1"]),
        v_ok()
    );
    let t0 = server_ms(srv);
    let at = t0.to_string();
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCR", "c1", "AT", &at]),
        v_int(1)
    );
    let slot = field_with_prefix(srv, "c1", "1m:");
    assert_eq!(srv.cmd_value(&["HSET", "c1", &slot, "garbage"]), v_int(0));
    // A garbage count is an existing slot holding nothing: overwritten, counted once.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCR", "c1", "AT", &at]),
        v_int(1),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCR", "c1", "AT", &at]),
        v_int(2),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "c1", "1m", "AT", &at]),
        v_int(2)
    );
    let info = map_pairs(&srv.cmd_value(&["TSCOUNTER.INFO", "c1"]));
    assert!(
        info.contains(&("slots".to_string(), v_int(1))),
        "{k}: {info:?}"
    );

    // Short counters (1s:3), each edited one way, all AT the same second.
    let t0 = server_ms(srv);
    let at = t0.to_string();
    let start = (t0 / 1000) * 1000;
    let cases: [(&str, &[&str]); 5] = [
        ("slot-garbage", &["HSET", "FIELD", "x1"]),
        ("state-deleted", &["HDEL", "_state"]),
        ("state-garbage", &["HSET", "_state", "garbage"]),
        ("state-out-of-range", &["HSET", "_state", "0 5:999999"]),
        ("state-wrong-shape", &["HSET", "_state", "1 2 3 4 5"]),
    ];
    for (name, edit) in cases {
        let key = format!("e:{name}");
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.CREATE", &key, "RESOLUTIONS", "1s:3"]),
            v_ok()
        );
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.INCRBY", &key, "3", "AT", &at]),
            v_int(3)
        );
        let slot = field_with_prefix(srv, &key, "1s:");
        let mut cmd: Vec<String> = vec![edit[0].to_string(), key.clone()];
        cmd.extend(edit[1..].iter().map(|a| {
            if *a == "FIELD" {
                slot.clone()
            } else {
                a.to_string()
            }
        }));
        assert!(error_text(&srv.cmd_value(&cmd)).is_none(), "{k} {name}");
        // Reads first (nothing written yet since the edit), then a write, then reads.
        let garbage_slot = name == "slot-garbage";
        let count = if garbage_slot { 0 } else { 3 };
        let sum = srv.cmd_value(&["TSCOUNTER.SUM", &key, "3s", "AT", &at]);
        assert_eq!(sum, v_int(count), "{k} {name}: SUM");
        let range = srv.cmd_value(&["TSCOUNTER.RANGE", &key, "1s", "FROM", &at, "TO", &at]);
        let want = if garbage_slot {
            v_arr(vec![])
        } else {
            v_arr(vec![v_arr(vec![v_int(start), v_int(3)])])
        };
        assert_eq!(range, want, "{k} {name}: RANGE");
        let info = srv.cmd_value(&["TSCOUNTER.INFO", &key]);
        assert!(
            !is_wrongtype(&info) && info != v_nil(),
            "{k} {name}: {info:?}"
        );
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.INCR", &key, "AT", &at]),
            v_int(count + 1),
            "{k} {name}: INCR"
        );
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.SUM", &key, "3s", "AT", &at]),
            v_int(count + 1),
            "{k} {name}: SUM after INCR"
        );
        let limit = srv.cmd_value(&["TSCOUNTER.LIMIT", &key, "0", "3s", "100", "AT", &at]);
        assert!(!is_wrongtype(&limit), "{k} {name}: {limit:?}");
    }
    // Edited after the last write too: the timer alone must still clear the key.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "late", "RESOLUTIONS", "1s:3"]),
        v_ok()
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCR", "late", "AT", &at]),
        v_int(1)
    );
    assert_eq!(srv.cmd_value(&["HSET", "late", "_state", "junk"]), v_int(0));
    assert_replica_equal(&primary, &replica, "after the edits");
    // Every slot leaves within 3 s of t0: every key goes (c1 keeps its minute).
    let gone = wait_until(Duration::from_secs(8), || {
        cases
            .iter()
            .all(|(name, _)| !exists(srv, format!("e:{name}")))
            && !exists(srv, "late")
    });
    let left: Vec<_> = cases
        .iter()
        .map(|(name, _)| format!("e:{name}"))
        .chain(["late".to_string()])
        .filter(|key| exists(srv, key))
        .map(|key| (key.clone(), hgetall(srv, &key)))
        .collect();
    assert!(gone, "{k}: never expired: {left:?}");
    let v = srv.cmd_value(&["TSCOUNTER.SUM", "c1", "1m"]);
    assert!(!is_wrongtype(&v), "{k}: {v:?}");
    assert_ne!(v, v_err(WRONGTYPE));
    assert_replica_equal(&primary, &replica, "after expiry");
    primary.assert_alive();
    replica.assert_alive();
}

per_server!(sum_of_many_windows_is_bounded);
/// Item 6 of the issue: `SUM` with 5000 windows over a full fine counter costs the input
/// plus one walk of the stored slots (was 520 ms), and its answers are exact.
fn sum_of_many_windows_is_bounded(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "big", "RESOLUTIONS", "10ms:10000"]),
        v_ok()
    );
    let t0 = server_ms(&srv);
    // One count in each of the latest 8000 slots of 10 ms.
    let filled = 8_000i64;
    let mut conn = srv.conn();
    let cmds: Vec<Vec<String>> = (0..filled)
        .map(|i| {
            let at = (t0 - i * 10).to_string();
            vec![
                "TSCOUNTER.INCRBY".into(),
                "big".into(),
                "1".into(),
                "AT".into(),
                at,
            ]
        })
        .collect();
    for chunk in cmds.chunks(10_000) {
        for reply in pipeline(&mut conn, chunk) {
            assert_eq!(reply, v_int(1), "{k}");
        }
    }
    let windows: Vec<i64> = (0..5000).map(|i| 1 + (i * 7919) % 99_000).collect();
    let mut cmd: Vec<String> = vec!["TSCOUNTER.SUM".into(), "big".into()];
    cmd.extend(windows.iter().map(|w| w.to_string()));
    cmd.extend(["AT".to_string(), t0.to_string()]);
    let want = v_arr(
        windows
            .iter()
            .map(|&w| v_int(((w + 9) / 10).min(filled)))
            .collect(),
    );
    let check = |got: Value| {
        let (Value::Array(got), Value::Array(want)) = (&got, &want) else {
            panic!("{k}: SUM gave {got:?}");
        };
        let wrong = got.iter().zip(want).position(|(g, w)| g != w);
        assert_eq!(got.len(), want.len(), "{k}");
        assert!(wrong.is_none(), "{k}: window #{wrong:?} differs");
    };
    // The first read may build the read cache (one walk of the hash).
    check(srv.cmd_value(&cmd));
    assert_eq!(srv.cmd_value(&["CONFIG", "RESETSTAT"]), v_ok());
    let lost = Lost::start(&srv);
    for _ in 0..3 {
        check(srv.cmd_value(&cmd));
    }
    assert!(
        server_ms(&srv) - t0 < 19_000,
        "{k}: too slow to stay inside the kept range"
    );
    let (ran, usec) = (
        usec_per_call(&srv, "tscounter.sum"),
        usec_per_call_held(&srv, "tscounter.sum", &lost),
    );
    assert!(
        ran > 0.0 && usec < 50_000.0,
        "{k}: SUM took {usec} us ({ran} us with waits)"
    );
    srv.assert_alive();
}

per_server!(a_counter_too_large_to_cache_evicts_nothing);
/// A counter too large for the read cache is read without it, and does not evict the
/// cached counters (it used to wipe the whole cache on every read).
fn a_counter_too_large_to_cache_evicts_nothing(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "small", "RESOLUTIONS", "1s:1000"]),
        v_ok()
    );
    let t0 = server_ms(&srv);
    let mut conn = srv.conn();
    let cmds: Vec<Vec<String>> = (0..100)
        .map(|i| {
            let at = (t0 - i * 1000).to_string();
            vec!["TSCOUNTER.INCR".into(), "small".into(), "AT".into(), at]
        })
        .collect();
    pipeline(&mut conn, &cmds);
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "small", "1000s"]),
        v_int(100)
    );
    assert_eq!(info_i64(&srv, "tally", "tally_mirrored_slots"), 100, "{k}");
    // 1,100,000 slot fields (written natively, most beyond what the resolutions keep):
    // more than the whole cache holds.
    let res: Vec<String> = (1..=11).map(|i| format!("{i}s:900")).collect();
    let mut create = vec![
        "TSCOUNTER.CREATE".to_string(),
        "huge".into(),
        "RESOLUTIONS".into(),
    ];
    create.extend(res.iter().cloned());
    assert_eq!(srv.cmd_value(&create), v_ok());
    let t1 = server_ms(&srv);
    let mut cmds: Vec<Vec<String>> = Vec::new();
    for r in 1..=11i64 {
        let last = t1 / (r * 1000);
        for chunk_start in (0..100_000i64).step_by(1000) {
            let mut cmd = vec!["HSET".to_string(), "huge".into()];
            for i in chunk_start..chunk_start + 1000 {
                cmd.push(format!("{r}s:{}", last - i));
                cmd.push("1".into());
            }
            cmds.push(cmd);
        }
    }
    for chunk in cmds.chunks(100) {
        pipeline(&mut conn, chunk);
    }
    assert_eq!(srv.cmd_value(&["HLEN", "huge"]), v_int(1_100_002));
    let at = t1.to_string();
    for _ in 0..2 {
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.SUM", "huge", "10s", "AT", &at]),
            v_int(10),
            "{k}"
        );
        assert_eq!(info_i64(&srv, "tally", "tally_mirrored_slots"), 100, "{k}");
    }
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "small", "1000s"]),
        v_int(100)
    );
    assert_eq!(info_i64(&srv, "tally", "tally_mirrored_slots"), 100, "{k}");
    srv.assert_alive();
}

per_server!(a_user_hash_is_never_mirrored);
/// A user's hash whose fields look like slots is not a counter: counter commands on it
/// answer WRONGTYPE, again and again (enough to make a key "hot"), without walking it into
/// the read cache first.
fn a_user_hash_is_never_mirrored(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let t0 = server_ms(&srv);
    let mut hset = vec!["HSET".to_string(), "user".into()];
    for i in 0..50 {
        hset.push(format!("1s:{}", t0 / 1000 - i));
        hset.push("1".into());
    }
    assert_eq!(srv.cmd_value(&hset), v_int(50));
    for _ in 0..5 {
        for cmd in [
            vec!["TSCOUNTER.INCR", "user"],
            vec!["TSCOUNTER.SUM", "user", "10s"],
            vec!["TSCOUNTER.RANGE", "user", "1s"],
        ] {
            let reply = srv.cmd_value(&cmd);
            assert_eq!(
                error_text(&reply),
                Some(WRONGTYPE.to_string()),
                "{k}: {cmd:?}"
            );
        }
    }
    assert_eq!(info_i64(&srv, "tally", "tally_mirrored_slots"), 0, "{k}");
    assert_eq!(srv.cmd_value(&["HLEN", "user"]), v_int(50));
    srv.assert_alive();
}

per_server!(emptied_counters_leave_no_cache_or_schedule);
/// Item 5 of the issue (counters): keys tally deletes itself (last slot gone, by the
/// timer or by a decrement) leave neither a read cache nor a schedule entry.
fn emptied_counters_leave_no_cache_or_schedule(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let mut conn = srv.conn();
    let t0 = server_ms(&srv);
    // Emptied by the timer: 20 slots of 100 ms in a 4 s window (2 s of margin on a busy
    // machine before the first one leaves), all gone 4 s after t0.
    for key in ["t1", "t2"] {
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.CREATE", key, "RESOLUTIONS", "100ms:40"]),
            v_ok()
        );
        let cmds: Vec<Vec<String>> = (0..20)
            .map(|i| {
                let at = (t0 - i * 100).to_string();
                vec!["TSCOUNTER.INCR".into(), key.into(), "AT".into(), at]
            })
            .collect();
        pipeline(&mut conn, &cmds);
        let v = srv.cmd_value(&["TSCOUNTER.SUM", key, "4s", "AT", &t0.to_string()]);
        assert_eq!(v, v_int(20), "{k}");
    }
    assert_eq!(info_i64(&srv, "tally", "tally_mirrored_slots"), 40, "{k}");
    // Emptied by decrements: daily slots that would stay scheduled for centuries.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "d", "RESOLUTIONS", "1d:10000"]),
        v_ok()
    );
    let days: Vec<String> = (0..20).map(|d| (t0 - d * 86_400_000).to_string()).collect();
    for at in &days {
        assert_eq!(srv.cmd_value(&["TSCOUNTER.INCR", "d", "AT", at]), v_int(1));
    }
    assert_eq!(srv.cmd_value(&["TSCOUNTER.SUM", "d", "20d"]), v_int(20));
    assert_eq!(info_i64(&srv, "tally", "tally_mirrored_slots"), 60, "{k}");
    for at in &days {
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.INCRBY", "d", "-1", "AT", at]),
            v_int(0)
        );
    }
    assert!(!exists(&srv, "d"));
    assert!(
        wait_until(Duration::from_secs(8), || !exists(&srv, "t1")
            && !exists(&srv, "t2")),
        "{k}"
    );
    assert_eq!(info_i64(&srv, "tally", "tally_mirrored_slots"), 0, "{k}");
    assert_eq!(info_i64(&srv, "tally", "tally_tracked_objects"), 0, "{k}");
    srv.assert_alive();
}

per_server!(idle_timer_visits_keep_watch);
/// Timer visits that have nothing to remove must not open the key for writing: that
/// would invalidate `WATCH` (and client-side caching) of a key that did not change.
/// `SWAPDB` of two other databases makes the timer rescan and visit every tally key.
fn idle_timer_visits_keep_watch(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "w", "RESOLUTIONS", "1h:100"]),
        v_ok()
    );
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCR", "w"]), v_int(1));
    let mut watcher = srv.conn();
    let _: () = redis::cmd("WATCH").arg("w").query(&mut watcher).unwrap();
    for _ in 0..3 {
        let visited = info_i64(&srv, "tally", "tally_keys_visited");
        assert_eq!(srv.cmd_value(&["SWAPDB", "1", "2"]), v_ok());
        assert!(
            wait_until(Duration::from_secs(5), || info_i64(
                &srv,
                "tally",
                "tally_keys_visited"
            ) > visited),
            "{k}: no visit"
        );
    }
    let _: () = redis::cmd("MULTI").query(&mut watcher).unwrap();
    let _: String = redis::cmd("TSCOUNTER.INCR")
        .arg("w")
        .query(&mut watcher)
        .unwrap();
    let exec: Value = redis::cmd("EXEC").query(&mut watcher).unwrap();
    assert_eq!(exec, v_arr(vec![v_int(2)]), "{k}: WATCH was invalidated");
    srv.assert_alive();
}
