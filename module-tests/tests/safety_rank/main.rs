//! Safety of leaderboards against what happens around them: a client pause
//! while a lifecycle job is queued, lazy expiry in the middle of a write, parts lost to
//! expiry or eviction, native edits and forgeries of the derived keys, SWAPDB and FLUSHALL
//! with the schedule. Each test reproduces a failure found at an earlier main.
//!
//! Files: `edits.rs` (native edits and forgeries of the parts, quarantine and its repair),
//! `rebuild.rs` (a large quarantined board rebuilt in steps), `meta.rs` (garbled metas and
//! renames), `meta_cache.rs` (every native edit of a verified meta is seen by the next
//! write), `eviction.rs` (parts evicted under `maxmemory` between two reads); this file
//! holds lifecycle, expiry, eviction and schedule cases and the shared helpers.

mod edits;
mod eviction;
mod meta;
mod meta_cache;
mod rebuild;

use module_tests::*;
use std::time::Duration;

pub(crate) fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// A server whose keys expire only lazily (when a command opens them).
pub(crate) fn start_without_active_expiry(kind: &ServerKind) -> Server {
    let srv = Server::start(kind);
    assert_eq!(
        srv.cmd_value(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
        v_ok(),
        "{}",
        kind.name
    );
    srv
}

/// Sum of `member`'s counts over the slot hashes of board `key` (garbage counts nothing).
pub(crate) fn slot_sum(srv: &Server, key: &str, member: &str) -> i64 {
    let mut conn = srv.conn();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{key}|slot|*"))
        .query(&mut conn)
        .unwrap_or_default();
    keys.iter()
        .map(|k| {
            let v: Option<String> = redis::cmd("HGET")
                .arg(k)
                .arg(member)
                .query(&mut conn)
                .unwrap_or(None);
            v.and_then(|s| s.parse::<i64>().ok()).unwrap_or(0)
        })
        .sum()
}

per_server!(a_client_pause_after_deleting_a_board_in_a_transaction_does_not_abort);
/// Item 1: `MULTI` / `DEL board` / `CLIENT PAUSE WRITE` / `EXEC` aborted every server kind
/// (the lifecycle job replicated during the pause), with AOF on and with a replica.
fn a_client_pause_after_deleting_a_board_in_a_transaction_does_not_abort(kind: &ServerKind) {
    let k = kind.name.clone();
    let primary = Server::start_with(kind, ServerOptions::new().config("appendonly", "yes"));
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    for (verb, target) in [("DEL", None), ("RENAME", Some("b3"))] {
        assert_eq!(
            primary.cmd_value(&["TSRANK.INCRBY", "b2", "1", "m"]),
            v_int(1),
            "{k}"
        );
        let mut c = primary.conn();
        let mut tx = vec![vec!["MULTI".to_string()]];
        let mut op = vec![verb.to_string(), "b2".to_string()];
        op.extend(target.map(str::to_string));
        tx.push(op);
        tx.push(vec![
            "CLIENT".into(),
            "PAUSE".into(),
            "400".into(),
            "WRITE".into(),
        ]);
        tx.push(vec!["EXEC".into()]);
        let replies = pipeline(&mut c, &tx);
        assert!(
            matches!(replies.last(), Some(Value::Array(_))),
            "{k}: {verb}: EXEC answered {replies:?}"
        );
        sleep_ms(50);
        primary.assert_alive();
        replica.assert_alive();
        // After the pause the job runs: DEL takes the parts along, RENAME moves them.
        sleep_ms(600);
        primary.assert_alive();
        assert!(
            !exists(&primary, "b2|meta"),
            "{k}: {verb}: b2|meta left behind"
        );
        match target {
            Some(to) => {
                assert_eq!(
                    primary.cmd_value(&["TSRANK.SCORE", to, "m"]),
                    v_int(1),
                    "{k}"
                );
                assert!(
                    exists(&primary, format!("{to}|meta")),
                    "{k}: meta not moved"
                );
                primary.cmd_value(&["DEL", to]);
            }
            None => assert!(!exists(&primary, "b2"), "{k}"),
        }
        sleep_ms(100);
    }
    assert_replica_equal(&primary, &replica, "replica");
    primary.assert_alive();
}

per_server!(a_write_that_lazily_expires_the_board_starts_a_new_one_whole);
/// Item 2: a write that lazily expired the board's key went on with the old parts, and the
/// queued delete job then removed what the write had just used: WRONGTYPE forever.
fn a_write_that_lazily_expires_the_board_starts_a_new_one_whole(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = start_without_active_expiry(kind);
    // The main key, the meta, then a slot hash expire lazily inside the write.
    for part in ["b", "b|meta", "slot"] {
        assert_eq!(
            srv.cmd_value(&["TSRANK.INCRBY", "b", "5", "m"]),
            v_int(5),
            "{k}"
        );
        let target = if part == "slot" {
            let mut c = srv.conn();
            let keys: Vec<String> = redis::cmd("KEYS").arg("b|slot|*").query(&mut c).unwrap();
            keys.first().cloned().unwrap_or_default()
        } else {
            part.to_string()
        };
        assert_eq!(
            srv.cmd_value(&["PEXPIRE", &target, "10"]),
            v_int(1),
            "{k}: {part}"
        );
        sleep_ms(50);
        assert_eq!(
            srv.cmd_value(&["TSRANK.INCRBY", "b", "1", "m"]),
            v_int(1),
            "{k}: {part} expired lazily: the write starts a new board"
        );
        sleep_ms(50);
        assert_eq!(
            srv.cmd_value(&["TSRANK.SCORE", "b", "m"]),
            v_int(1),
            "{k}: {part}"
        );
        assert_eq!(
            srv.cmd_value(&["TSRANK.TOP", "b", "10", "WITHSCORES"]),
            v_arr(vec![v_bulk("m"), v_int(1)]),
            "{k}: {part}"
        );
        assert!(exists(&srv, "b|meta"), "{k}: {part}: meta lost");
        assert_eq!(slot_sum(&srv, "b", "m"), 1, "{k}: {part}: slots");
        srv.cmd_value(&["DEL", "b"]);
        sleep_ms(50);
    }
    srv.assert_alive();
}

per_server!(a_read_that_lazily_expires_a_part_answers_as_the_removed_board);
/// A read that expired the board's meta lazily (active expiry off, a TTL run out) answered
/// from the meta tally last saw, as for a meta a user deleted, while the expiry had queued
/// the removal of the whole board: TOP listed members of a board on its way out, and
/// whether a read saw the board depended on whether active expiry had come first. A part
/// that expires takes the whole board with it, so from that read on it answers as the
/// removed board, and the removal runs.
fn a_read_that_lazily_expires_a_part_answers_as_the_removed_board(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = start_without_active_expiry(kind);
    for (part, writes) in [("b", 1), ("b", 3), ("b|meta", 1), ("b|meta", 3)] {
        let what = format!("{k}: {part} expired after {writes} writes");
        for _ in 0..writes {
            srv.cmd(&["TSRANK.INCRBY", "b", "1", "m"]).expect("write");
        }
        assert_eq!(srv.cmd_value(&["PEXPIRE", part, "10"]), v_int(1), "{what}");
        sleep_ms(50);
        // Each read on its own: the first one expires the part.
        for read in [
            vec!["TSRANK.TOP", "b", "10", "WITHSCORES"],
            vec!["TSRANK.SCORE", "b", "m"],
            vec!["TSRANK.RANK", "b", "m"],
            vec!["TSRANK.INFO", "b"],
        ] {
            let expected = if read[0] == "TSRANK.TOP" {
                v_arr(vec![])
            } else {
                v_nil()
            };
            assert_eq!(srv.cmd_value(&read), expected, "{what}: {read:?}");
        }
        sleep_ms(50);
        let mut c = srv.conn();
        let left: Vec<String> = redis::cmd("KEYS").arg("b*").query(&mut c).unwrap();
        assert!(left.is_empty(), "{what}: left {left:?}");
    }
    srv.assert_alive();
}

per_server!(eviction_leaves_every_board_whole_or_gone);
/// Item 7: a part lost to eviction left totals that never come down, or a board without
/// meta answering WRONGTYPE. Now: whole or consistent.
fn eviction_leaves_every_board_whole_or_gone(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start(kind);
    let now = server_ms(&srv);
    let mut c = srv.conn();
    let boards = 150;
    let mut cmds = Vec::new();
    for i in 0..boards {
        let key = format!("e:{i}");
        cmds.push(vec![
            "TSRANK.CREATE".to_string(),
            key.clone(),
            "WINDOW".into(),
            "1h".into(),
            "SLOT".into(),
            "1m".into(),
        ]);
        for back in [0, 120_000] {
            cmds.push(vec![
                "TSRANK.INCRBY".into(),
                key.clone(),
                "3".into(),
                "m".into(),
                "2".into(),
                format!("n{i}"),
                "AT".into(),
                (now - back).to_string(),
            ]);
        }
    }
    pipeline(&mut c, &cmds);
    let used: i64 = srv.info("memory")["used_memory"].parse().unwrap();
    srv.cmd_value(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
    srv.cmd_value(&["CONFIG", "SET", "maxmemory", &(used + 300_000).to_string()]);
    let filler = "x".repeat(2000);
    for i in 0..400 {
        let _ = srv.cmd(&["SET", &format!("fill:{i}"), &filler]);
    }
    srv.cmd_value(&["CONFIG", "SET", "maxmemory", "0"]);
    sleep_ms(300);
    let (mut whole, mut gone) = (0, 0);
    for i in 0..boards {
        let key = format!("e:{i}");
        let parts = [
            exists(&srv, &key),
            exists(&srv, format!("{key}|meta")),
            slot_sum(&srv, &key, "m") > 0,
        ];
        if parts == [false, false, false] {
            gone += 1;
            continue;
        }
        let score = srv.cmd_value(&["TSRANK.SCORE", &key, "m"]);
        assert_eq!(
            score,
            v_int(slot_sum(&srv, &key, "m")),
            "{k}: {key}: parts {parts:?}: total must equal its slots"
        );
        assert!(
            parts.iter().all(|p| *p),
            "{k}: {key}: partial board {parts:?}"
        );
        whole += 1;
    }
    assert!(gone > 0, "{k}: eviction took no board part (whole {whole})");
    srv.assert_alive();
}

per_server!(an_expired_part_removes_the_board_whole);
/// Item 7, expiry: a TTL on a part removes the board whole when it fires.
fn an_expired_part_removes_the_board_whole(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start(kind);
    for part in ["b|meta", "slot"] {
        assert_eq!(
            srv.cmd_value(&["TSRANK.INCRBY", "b", "4", "m"]),
            v_int(4),
            "{k}"
        );
        let target = if part == "slot" {
            let mut c = srv.conn();
            let keys: Vec<String> = redis::cmd("KEYS").arg("b|slot|*").query(&mut c).unwrap();
            keys.first().cloned().unwrap_or_default()
        } else {
            part.to_string()
        };
        srv.cmd_value(&["PEXPIRE", &target, "20"]);
        assert!(
            wait_until(Duration::from_secs(3), || !exists(&srv, "b")
                && !exists(&srv, "b|meta")),
            "{k}: {part} expired: board not removed whole"
        );
        assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "b", "m"]), v_nil(), "{k}");
        assert_eq!(slot_sum(&srv, "b", "m"), 0, "{k}: {part}");
    }
}

per_server!(the_schedule_follows_deletes_flushes_and_swapdb);
/// Item 5 (leaderboards and every family): deleting objects gives the schedule back, also
/// through FLUSHALL, and SWAPDB moves the schedule with the data.
fn the_schedule_follows_deletes_flushes_and_swapdb(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start(kind);
    let mut c = srv.conn();
    let mut cmds = Vec::new();
    for i in 0..2000 {
        cmds.push(vec!["STATS.ADD".to_string(), format!("s:{i}"), "1".into()]);
        cmds.push(vec!["DEL".to_string(), format!("s:{i}")]);
        cmds.push(vec![
            "TSRANK.INCRBY".to_string(),
            format!("r:{i}"),
            "1".into(),
            "m".into(),
        ]);
        cmds.push(vec!["UNLINK".to_string(), format!("r:{i}")]);
        cmds.push(vec!["TSCOUNTER.INCR".to_string(), format!("c:{i}")]);
        cmds.push(vec![
            "SET".to_string(),
            format!("c:{i}"),
            "overwritten".into(),
        ]);
    }
    for chunk in cmds.chunks(600) {
        pipeline(&mut c, chunk);
    }
    sleep_ms(200);
    assert_eq!(
        info_i64(&srv, "tally", "tally_tracked_objects"),
        0,
        "{k}: schedule leaks"
    );
    assert_eq!(
        srv.cmd_value(&["DBSIZE"]),
        v_int(2000),
        "{k}: only the strings remain"
    );
    for i in 0..100 {
        srv.cmd_value(&["STATS.ADD", &format!("s:{i}"), "1"]);
    }
    assert_eq!(info_i64(&srv, "tally", "tally_tracked_objects"), 100, "{k}");
    srv.cmd_value(&["SWAPDB", "0", "1"]);
    sleep_ms(100);
    assert_eq!(
        info_i64(&srv, "tally", "tally_tracked_objects"),
        100,
        "{k}: after SWAPDB"
    );
    srv.cmd_value(&["FLUSHALL"]);
    sleep_ms(100);
    assert_eq!(
        info_i64(&srv, "tally", "tally_tracked_objects"),
        0,
        "{k}: after FLUSHALL"
    );
    srv.assert_alive();
}

per_server!(a_failed_module_load_leaves_the_server_working);
/// `MODULE LOAD` with a bad argument fails cleanly: it leaves no keyspace subscription
/// behind (the next hash write would call into an unloaded library).
fn a_failed_module_load_leaves_the_server_working(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start_without_module(kind);
    let module = module_path().display().to_string();
    for bad in [["stats-keep", "0"], ["rank-window", "nonsense"]] {
        let reply = srv.cmd_value(&["MODULE", "LOAD", &module, bad[0], bad[1]]);
        assert!(
            error_text(&reply).is_some(),
            "{k}: {bad:?} loaded: {reply:?}"
        );
    }
    assert_eq!(srv.cmd_value(&["HSET", "h", "f", "v"]), v_int(1), "{k}");
    assert_eq!(srv.cmd_value(&["DEL", "h"]), v_int(1), "{k}");
    srv.assert_alive();
    assert_eq!(srv.cmd_value(&["MODULE", "LOAD", &module]), v_ok(), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "b", "1", "m"]),
        v_int(1),
        "{k}"
    );
}

per_server!(a_forged_span_is_not_a_leaderboard);
/// A forged meta whose span does not fit its window is not a leaderboard: TOP does not
/// walk a million slot names.
fn a_forged_span_is_not_a_leaderboard(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start(kind);
    srv.cmd_value(&["HSET", "x|meta", "_tally", "rank 10000 1 0 1000000"]);
    srv.cmd_value(&["CONFIG", "RESETSTAT"]);
    let lost = Lost::start(&srv);
    for _ in 0..5 {
        // Not a leaderboard: a hash by that name is in the way (WRONGTYPE).
        let reply = srv.cmd_value(&["TSRANK.TOP", "x", "10"]);
        assert_eq!(error_text(&reply).as_deref(), Some(WRONGTYPE), "{k}");
    }
    let usec = usec_per_call_held(&srv, "tsrank.top", &lost);
    assert!(usec < 2000.0, "{k}: TOP on a forged meta took {usec} us");
}

per_server!(background_visits_do_not_make_idle_keys_look_used);
/// The start-up scan (here after SWAPDB, which restarts it) and the timer's visits read
/// keys without refreshing their LRU clock: idle keys stay idle for eviction.
fn background_visits_do_not_make_idle_keys_look_used(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start(kind);
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "b", "1", "m"]),
        v_int(1),
        "{k}"
    );
    sleep_ms(2500);
    srv.cmd_value(&["SWAPDB", "0", "1"]);
    sleep_ms(100);
    srv.cmd_value(&["SWAPDB", "0", "1"]);
    sleep_ms(300);
    for key in ["b", "b|meta"] {
        let idle = srv.cmd_value(&["OBJECT", "IDLETIME", key]);
        assert!(
            matches!(idle, Value::Int(n) if n >= 2),
            "{k}: {key} idle time {idle:?} after the scan"
        );
    }
}

per_server!(a_board_renamed_onto_one_being_removed_whole_stays_whole);
/// A slot hash of board `x` expires (the job that removes `x` whole is queued) and, before
/// that job runs, `RENAME y x` in the same transaction: `x` is `y`'s board, whole. (The job
/// took the sorted set now at `x`, `y`'s, and left `y`'s meta and slots there without
/// totals: a fault-fuzz run found it after an eviction.)
fn a_board_renamed_onto_one_being_removed_whole_stays_whole(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = start_without_active_expiry(kind);
    assert_eq!(srv.cmd_value(&["TSRANK.INCRBY", "x", "4", "a"]), v_int(4));
    assert_eq!(srv.cmd_value(&["TSRANK.INCRBY", "y", "7", "b"]), v_int(7));
    let mut c = srv.conn();
    let slots: Vec<String> = redis::cmd("KEYS").arg("x|slot|*").query(&mut c).unwrap();
    let slot = slots.first().cloned().unwrap_or_default();
    assert_eq!(srv.cmd_value(&["PEXPIRE", &slot, "1"]), v_int(1), "{k}");
    std::thread::sleep(Duration::from_millis(20));
    let replies = pipeline(
        &mut c,
        &[
            vec!["MULTI".to_string()],
            vec!["EXISTS".to_string(), slot.clone()],
            vec!["RENAME".to_string(), "y".into(), "x".into()],
            vec!["EXEC".to_string()],
        ],
    );
    assert_eq!(replies.last(), Some(&v_arr(vec![v_int(0), v_ok()])), "{k}");
    assert!(
        wait_until(Duration::from_secs(3), || !exists(&srv, "y|meta")),
        "{k}: y's meta did not move"
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "x", "10", "WITHSCORES"]),
        v_arr(vec![v_bulk("b"), v_int(7)]),
        "{k}: x is y's board"
    );
    assert!(exists(&srv, "x|meta"), "{k}: x keeps y's meta");
    assert_eq!(slot_sum(&srv, "x", "b"), 7, "{k}: x keeps y's slots");
    assert_eq!(slot_sum(&srv, "x", "a"), 0, "{k}: x's own slots are gone");
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "x", "1", "b"]),
        v_int(8),
        "{k}"
    );
    srv.assert_alive();
}
