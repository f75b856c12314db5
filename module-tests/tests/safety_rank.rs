//! Safety of leaderboards against what happens around them: a client pause
//! while a lifecycle job is queued, lazy expiry in the middle of a write, parts lost to
//! expiry or eviction, native edits and forgeries of the derived keys, SWAPDB and FLUSHALL
//! with the schedule. Each test reproduces a failure found at an earlier main.

use module_tests::*;
use std::time::Duration;

fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// A server whose keys expire only lazily (when a command opens them).
fn start_without_active_expiry(kind: &ServerKind) -> Server {
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
fn slot_sum(srv: &Server, key: &str, member: &str) -> i64 {
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

per_server!(native_edits_of_parts_keep_the_board_consistent);
/// A user who deletes a board's meta gets it back (the board answers, never WRONGTYPE);
/// a user's HSET into a slot hash quarantines the board: reads agree with the slots and
/// the next write rebuilds the totals.
fn native_edits_of_parts_keep_the_board_consistent(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start(kind);
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "b", "4", "m", "2", "n"]),
        v_arr(vec![v_int(4), v_int(2)]),
        "{k}"
    );
    srv.cmd_value(&["DEL", "b|meta"]);
    sleep_ms(50);
    assert!(exists(&srv, "b|meta"), "{k}: meta not put back");
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "b", "m"]), v_int(4), "{k}");
    // A meta stripped of its settings (the hash stays, with its other fields) is mended
    // the same way.
    assert_eq!(
        srv.cmd_value(&["HDEL", "b|meta", "_tally"]),
        v_int(1),
        "{k}"
    );
    sleep_ms(50);
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "b", "m"]), v_int(4), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "b", "2", "WITHSCORES"]),
        v_arr(vec![v_bulk("m"), v_int(4), v_bulk("n"), v_int(2)]),
        "{k}"
    );
    let mut c = srv.conn();
    let slots: Vec<String> = redis::cmd("KEYS").arg("b|slot|*").query(&mut c).unwrap();
    let slot = slots.first().cloned().unwrap_or_default();
    srv.cmd_value(&["HSET", &slot, "m", "10", "n", "garbage", "o", "7"]);
    sleep_ms(20);
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "b", "m"]), v_int(10), "{k}");
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "b", "n"]), v_nil(), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "b", "5", "WITHSCORES"]),
        v_arr(vec![v_bulk("m"), v_int(10), v_bulk("o"), v_int(7)]),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["TSRANK.RANK", "b", "o"]), v_int(1), "{k}");
    // The write rebuilds the totals from the slots, then applies itself.
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "b", "1", "o"]),
        v_int(8),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["ZREVRANGE", "b", "0", "-1", "WITHSCORES"]),
        v_arr(vec![v_bulk("m"), v_bulk("10"), v_bulk("o"), v_bulk("8")]),
        "{k}: totals rebuilt"
    );
    assert_eq!(
        srv.cmd_value(&["HEXISTS", "b|meta", "_edited"]),
        v_int(0),
        "{k}"
    );
    srv.assert_alive();
}

per_server!(the_timer_never_acts_on_keys_a_forger_could_not_write);
/// Item 8: a user allowed only `~x|*` forged `x|meta` and `x|slot|<n>` next to a sorted
/// set `x` they may not touch, and the timer then removed members from `x`; a RENAME made
/// the job overwrite a `c|meta` that was not a leaderboard's.
fn the_timer_never_acts_on_keys_a_forger_could_not_write(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start(kind);
    srv.cmd_value(&["ZADD", "x", "5", "victim", "3", "other"]);
    let mut forger = conn_as_user(&srv, "forger", &["~x|*"]);
    // A slot of 100 ms, two windows old: due for expiry at once.
    let index = (server_ms(&srv) / 100) - 20;
    let marker = format!("rank 1000 100 {index} {index}");
    assert_eq!(
        conn_value(&mut forger, &["HSET", "x|meta", "_tally", &marker]),
        v_int(1),
        "{k}"
    );
    let slot = format!("x|slot|{index}");
    assert_eq!(
        conn_value(&mut forger, &["HSET", &slot, "victim", "5", "other", "3"]),
        v_int(2),
        "{k}"
    );
    assert!(
        error_text(&conn_value(&mut forger, &["ZREM", "x", "victim"]))
            .is_some_and(|e| e.starts_with("NOPERM")),
        "{k}: the forger cannot touch x"
    );
    // Everything that makes the timer look: a visit after a reload finds the meta.
    sleep_ms(300);
    srv.cmd_value(&["DEBUG", "RELOAD"]);
    sleep_ms(500);
    assert_eq!(
        srv.cmd_value(&["ZRANGE", "x", "0", "-1", "WITHSCORES"]),
        v_arr(vec![
            v_bulk("other"),
            v_bulk("3"),
            v_bulk("victim"),
            v_bulk("5")
        ]),
        "{k}: the timer acted on x for the forger"
    );

    // RENAME b c must not overwrite a c|meta that is not a leaderboard's.
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "b", "1", "m"]),
        v_int(1),
        "{k}"
    );
    srv.cmd_value(&["HSET", "c|meta", "owner", "someone else"]);
    srv.cmd_value(&["RENAME", "b", "c"]);
    sleep_ms(100);
    assert_eq!(
        srv.cmd_value(&["HGETALL", "c|meta"]),
        v_arr(vec![v_bulk("owner"), v_bulk("someone else")]),
        "{k}: c|meta overwritten"
    );
    assert!(
        !exists(&srv, "b|meta"),
        "{k}: the renamed board is removed whole"
    );
    assert!(!exists(&srv, "c"), "{k}");
    srv.assert_alive();
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
    for _ in 0..5 {
        // Not a leaderboard: a hash by that name is in the way (WRONGTYPE).
        let reply = srv.cmd_value(&["TSRANK.TOP", "x", "10"]);
        assert_eq!(error_text(&reply).as_deref(), Some(WRONGTYPE), "{k}");
    }
    let usec = usec_per_call(&srv, "tsrank.top");
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

per_server!(rebuilding_quarantined_boards_with_expired_slots_keeps_the_server_alive);
/// The rebuild of a quarantined board deleted its expired slot hashes while the write
/// still held read handles on them (opened to subtract what they still counted); closing
/// those handles then read freed values. 300 boards, each edited natively (quarantined,
/// so the timer leaves their slots), then written again after their slot left the window.
fn rebuilding_quarantined_boards_with_expired_slots_keeps_the_server_alive(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start(kind);
    let mut conn = srv.conn();
    let boards = 300;
    let mut cmds = Vec::new();
    for i in 0..boards {
        let b = format!("q:{i}");
        cmds.push(strings(&[
            "TSRANK.CREATE",
            &b,
            "WINDOW",
            "300ms",
            "SLOT",
            "100ms",
        ]));
        cmds.push(strings(&["TSRANK.INCRBY", &b, "3", "m", "2", "n"]));
    }
    for r in pipeline(&mut conn, &cmds) {
        assert!(error_text(&r).is_none(), "{k}: {r:?}");
    }
    let slots: Vec<String> = redis::cmd("KEYS")
        .arg("q:*|slot|*")
        .query(&mut conn)
        .unwrap_or_default();
    assert_eq!(slots.len(), boards, "{k}: one slot hash per board");
    let edits: Vec<Vec<String>> = slots
        .iter()
        .map(|s| strings(&["HSET", s, "o", "1.0"]))
        .collect();
    pipeline(&mut conn, &edits);
    sleep_ms(500);
    let writes: Vec<Vec<String>> = (0..boards)
        .map(|i| strings(&["TSRANK.INCRBY", &format!("q:{i}"), "1", "m"]))
        .collect();
    for r in pipeline(&mut conn, &writes) {
        assert_eq!(r, v_int(1), "{k}: the expired slot no longer counts");
    }
    srv.assert_alive();
    let left: Vec<String> = redis::cmd("KEYS")
        .arg("q:*|slot|*")
        .query(&mut conn)
        .unwrap_or_default();
    assert_eq!(left.len(), boards, "{k}: only the new slots are left");
    assert!(
        !left.iter().any(|s| slots.contains(s)),
        "{k}: old slots deleted"
    );
}

per_server!(renaming_a_board_right_after_its_meta_keeps_it_whole);
/// `RENAME b|meta c|meta` then at once `RENAME b d`: on Redis 7.0 the job putting back
/// b's meta ran after the board had moved, found no `b` and did nothing; the move then
/// carried the slots but no meta, so `d` answered from memory only and became a plain
/// sorted set with an orphan slot hash after a reload. Now the move puts the meta back at
/// the new name.
fn renaming_a_board_right_after_its_meta_keeps_it_whole(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start(kind);
    let mut conn = srv.conn();
    srv.cmd_value(&["TSRANK.INCRBY", "b", "3", "m1", "2", "m2"]);
    srv.cmd_value(&["TSRANK.INCRBY", "c", "1", "zz"]);
    let renames = [
        strings(&["RENAME", "b|meta", "c|meta"]),
        strings(&["RENAME", "b", "d"]),
    ];
    for r in pipeline(&mut conn, &renames) {
        assert_eq!(r, v_ok(), "{k}");
    }
    sleep_ms(50);
    let top = v_arr(vec![v_bulk("m1"), v_int(3), v_bulk("m2"), v_int(2)]);
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "d", "10", "WITHSCORES"]),
        top,
        "{k}"
    );
    assert!(exists(&srv, "d|meta"), "{k}: the moved board has no meta");
    assert!(!exists(&srv, "b|meta"), "{k}");
    srv.cmd_value(&["DEBUG", "RELOAD"]);
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "d", "10", "WITHSCORES"]),
        top,
        "{k}: after a reload"
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "c", "10", "WITHSCORES"]),
        v_arr(vec![v_bulk("zz"), v_int(1)]),
        "{k}"
    );
    // The same with the meta garbled right after the board moved: on Redis 7.0 the move
    // carried the garbled meta along.
    let garble = [
        strings(&["RENAME", "d", "e"]),
        strings(&["HSET", "d|meta", "_tally", "garbage"]),
    ];
    pipeline(&mut conn, &garble);
    sleep_ms(50);
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "e", "10", "WITHSCORES"]),
        top,
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["HGET", "e|meta", "_tally"]),
        v_bulk("rank 86400000 3600000"),
        "{k}: the moved board's meta"
    );
    srv.cmd_value(&["DEBUG", "RELOAD"]);
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "e", "10", "WITHSCORES"]),
        top,
        "{k}: after a reload"
    );
    srv.assert_alive();
}

per_server!(a_garbled_meta_answers_from_memory_while_a_pause_holds_its_repair);
/// Fault fuzz seed 139235889 (Redis 7.0): `EVAL` inside `MULTI` set `_slots` of a known
/// board's meta to garbage, then `CLIENT PAUSE WRITE`. The job putting the meta back waits
/// out the pause (it replicates), and until it ran every read of the board answered
/// WRONGTYPE, although a meta *deleted* the same way answered from what tally last saw.
/// Reads now answer from the meta the queued job is about to write; after the pause the
/// meta is back and the next write lifts the quarantine.
fn a_garbled_meta_answers_from_memory_while_a_pause_holds_its_repair(kind: &ServerKind) {
    let k = kind.name.clone();
    let (srv, replica) = start_with_replica(kind);
    let mut conn = srv.conn();
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "b", "WINDOW", "1h", "SLOT", "1m"]),
        v_ok(),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "b", "3", "m1", "2", "m2"]),
        v_arr(vec![v_int(3), v_int(2)]),
        "{k}"
    );
    let reads = [
        strings(&["TSRANK.TOP", "b", "10", "WITHSCORES"]),
        strings(&["TSRANK.SCORE", "b", "m1"]),
        strings(&["TSRANK.RANK", "b", "m2"]),
        strings(&["TSRANK.INFO", "b"]),
        strings(&["TSRANK.HISTORY", "b", "m1"]),
    ];
    let before = pipeline(&mut conn, &reads);
    assert_eq!(
        before[..3],
        [
            v_arr(vec![v_bulk("m1"), v_int(3), v_bulk("m2"), v_int(2)]),
            v_int(3),
            v_int(1)
        ],
        "{k}"
    );
    assert!(
        before.iter().all(|r| error_text(r).is_none()),
        "{k}: {before:?}"
    );
    let Value::BulkString(slots) = srv.cmd_value(&["HGET", "b|meta", "_slots"]) else {
        panic!("{k}: b|meta has no _slots")
    };
    let garble = [
        strings(&["MULTI"]),
        strings(&[
            "EVAL",
            "return redis.call('HSET', KEYS[1], '_slots', ARGV[1])",
            "1",
            "b|meta",
            "counter 1s:zz",
        ]),
        strings(&["CLIENT", "PAUSE", "500", "WRITE"]),
        strings(&["EXEC"]),
    ];
    let replies = pipeline(&mut conn, &garble);
    assert_eq!(
        replies.last(),
        Some(&v_arr(vec![v_int(0), v_ok()])),
        "{k}: {replies:?}"
    );
    // Still paused: the meta is still garbled, and the board answers as before.
    assert_eq!(
        srv.cmd_value(&["HGET", "b|meta", "_slots"]),
        v_bulk("counter 1s:zz"),
        "{k}: the meta was repaired during the pause"
    );
    assert_eq!(pipeline(&mut conn, &reads), before, "{k}: during the pause");
    // After the pause the job puts the meta back (and records the quarantine).
    sleep_ms(700);
    assert_eq!(
        srv.cmd_value(&["HGET", "b|meta", "_slots"]),
        Value::BulkString(slots),
        "{k}: the meta after the pause"
    );
    assert_eq!(
        srv.cmd_value(&["HGET", "b|meta", "_edited"]),
        v_bulk("1"),
        "{k}"
    );
    assert_eq!(pipeline(&mut conn, &reads), before, "{k}: after the pause");
    // The next write rebuilds the board and lifts the quarantine.
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "b", "1", "m2"]),
        v_int(3),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "b", "10", "WITHSCORES"]),
        v_arr(vec![v_bulk("m2"), v_int(3), v_bulk("m1"), v_int(3)]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["HEXISTS", "b|meta", "_edited"]),
        v_int(0),
        "{k}"
    );
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, "replica");
    srv.assert_alive();
    replica.assert_alive();
}

// Soak seed 1026889450 (fault fuzz, rank, Redis 7.0): a board created but never
// incremented is its meta alone (no sorted set yet). A user garbling that meta left it
// garbled for good (the repair only ran when the sorted set was there), so the board
// answered WRONGTYPE from then on.
per_server!(a_garbled_meta_of_an_empty_board_is_put_back);

fn a_garbled_meta_of_an_empty_board_is_put_back(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start(kind);
    let mut conn = srv.conn();
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "e", "WINDOW", "1h", "SLOT", "1m"]),
        v_ok(),
        "{k}"
    );
    let reads = [
        strings(&["TSRANK.TOP", "e", "10", "WITHSCORES"]),
        strings(&["TSRANK.SCORE", "e", "m1"]),
        strings(&["TSRANK.RANK", "e", "m1"]),
    ];
    let before = pipeline(&mut conn, &reads);
    assert_eq!(before, vec![v_arr(vec![]), Value::Nil, Value::Nil], "{k}");
    let Value::BulkString(slots) = srv.cmd_value(&["HGET", "e|meta", "_slots"]) else {
        panic!("{k}: e|meta has no _slots")
    };
    assert_eq!(
        srv.cmd_value(&[
            "EVAL",
            "return redis.call('HSET', KEYS[1], '_slots', ARGV[1])",
            "1",
            "e|meta",
            "-1",
        ]),
        v_int(0),
        "{k}"
    );
    // The meta is put back (at once, or from the next timer tick on Redis 7.0), and the
    // board answers as before.
    sleep_ms(200);
    assert_eq!(
        srv.cmd_value(&["HGET", "e|meta", "_slots"]),
        Value::BulkString(slots),
        "{k}: the meta after the repair"
    );
    assert_eq!(pipeline(&mut conn, &reads), before, "{k}: after the repair");
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "e", "2", "m1"]),
        v_int(2),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "e", "10", "WITHSCORES"]),
        v_arr(vec![v_bulk("m1"), v_int(2)]),
        "{k}"
    );
}

per_server!(a_new_slot_never_counts_a_leftover_hash_of_an_edited_board);
/// Soak seed 370649695 (fault fuzz, Redis 7.0): a user renamed another board's meta
/// (other settings) onto a board's `|meta`, so the board's hour slot hash was no longer in
/// its range; after the board was renamed away, a new board at the old name wrote into
/// that leftover hash and answered totals below its slot counts for good. A slot hash a
/// write brings into the range (a new board, or an index outside `lo..=hi`) is not a part
/// of the board: it is replaced, on the primary and the replica alike.
fn a_new_slot_never_counts_a_leftover_hash_of_an_edited_board(kind: &ServerKind) {
    let k = kind.name.clone();
    let (srv, replica) = start_with_replica(kind);
    let now = server_ms(&srv);
    let (at, slot) = (now.to_string(), format!("b|slot|{}", now / 3_600_000));
    let ok = srv.cmd_value(&["TSRANK.CREATE", "other", "WINDOW", "10s", "SLOT", "1s"]);
    assert_eq!(ok, v_ok(), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "other", "1", "x"]),
        v_int(1),
        "{k}"
    );
    // b: the default settings (24h of hour slots).
    let two = srv.cmd_value(&["TSRANK.INCRBY", "b", "5", "m1", "3", "m2", "AT", &at]);
    assert_eq!(two, v_arr(vec![v_int(5), v_int(3)]), "{k}");
    assert_eq!(
        srv.cmd_value(&["RENAME", "other|meta", "b|meta"]),
        v_ok(),
        "{k}"
    );
    // b now has other's settings: its next write rebuilds it from the 1 s slots.
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "b", "1", "m3"]),
        v_int(1),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["RENAME", "b", "c"]), v_ok(), "{k}");
    sleep_ms(100);
    assert!(
        exists(&srv, &slot),
        "{k}: the leftover hour slot of b is still there"
    );
    // A new board at b writes the same hour slot: it starts from nothing.
    let one = srv.cmd_value(&["TSRANK.INCRBY", "b", "1", "m1", "AT", &at]);
    assert_eq!(one, v_int(1), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "b", "10", "WITHSCORES"]),
        v_arr(vec![v_bulk("m1"), v_int(1)]),
        "{k}"
    );
    assert_eq!(
        slot_sum(&srv, "b", "m1"),
        1,
        "{k}: the slot counts of the new b"
    );
    assert_eq!(
        slot_sum(&srv, "b", "m2"),
        0,
        "{k}: the slot counts of the new b"
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "b", "1", "m2", "AT", &at]),
        v_int(1),
        "{k}"
    );
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, "replica");
}

per_server!(a_board_renamed_while_its_removal_is_queued_is_removed_at_its_new_name);
/// Soak seed 706989721 (fault fuzz, Redis 7.0): eviction took a part of board `b:9`, and
/// its sorted set was renamed onto an edited board `b:13` before the job removing `b:9`
/// whole had run (a client pause held it). The job then found nothing at `b:9`, `b:13`'s
/// old parts went, and `b:13` stayed a sorted set without meta: `WRONGTYPE` for good. The
/// sorted set of a board being removed whole is removed at whatever name it is renamed to
/// (here by a lazy expiry and two renames inside one transaction, before any job runs).
fn a_board_renamed_while_its_removal_is_queued_is_removed_at_its_new_name(kind: &ServerKind) {
    let k = kind.name.clone();
    let (srv, replica) = start_with_replica(kind);
    let mut conn = srv.conn();
    assert_eq!(
        srv.cmd_value(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
        v_ok(),
        "{k}"
    );
    for (target, renames) in [("c", vec!["c"]), ("e", vec!["d", "e"])] {
        let writes = [
            strings(&["TSRANK.INCRBY", "a", "4", "m1"]),
            strings(&["TSRANK.INCRBY", target, "2", "m2"]),
            // The target board is edited (quarantined) too, as in the soak run.
            strings(&["ZADD", target, "9", "m9"]),
            // Long enough for the jobs this edit queues to run first (on Redis 7.0 from
            // a 1 ms timer, which opens the meta).
            strings(&["PEXPIRE", "a|meta", "10"]),
        ];
        assert_eq!(
            pipeline(&mut conn, &writes),
            vec![v_int(4), v_int(2), v_int(1), v_int(1)],
            "{k}"
        );
        sleep_ms(30);
        let mut from = "a";
        let mut tx = vec![strings(&["MULTI"]), strings(&["EXISTS", "a|meta"])];
        for to in &renames {
            tx.push(strings(&["RENAME", from, to]));
            from = to;
        }
        tx.push(strings(&["EXEC"]));
        let replies = pipeline(&mut conn, &tx);
        let mut expected = vec![v_int(0)];
        expected.extend(renames.iter().map(|_| v_ok()));
        assert_eq!(replies.last(), Some(&v_arr(expected)), "{k}: {tx:?}");
        // Whatever the jobs' timing, every name answers (at most empty), and once the
        // jobs ran, nothing is left of either board.
        for name in ["a", "c", "d", "e"] {
            let top = srv.cmd_value(&["TSRANK.TOP", name, "10", "WITHSCORES"]);
            assert_eq!(top, v_arr(vec![]), "{k}: TOP {name} right after {tx:?}");
        }
        sleep_ms(100);
        for name in ["a", "c", "d", "e"] {
            let top = srv.cmd_value(&["TSRANK.TOP", name, "10", "WITHSCORES"]);
            assert_eq!(top, v_arr(vec![]), "{k}: TOP {name} after {tx:?}");
        }
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
        assert_eq!(keys, Vec::<String>::new(), "{k}: after {tx:?}");
        // The names work as new boards.
        assert_eq!(
            srv.cmd_value(&["TSRANK.INCRBY", target, "1", "m1"]),
            v_int(1),
            "{k}"
        );
        assert_eq!(srv.cmd_value(&["FLUSHALL"]), v_ok(), "{k}");
    }
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, "replica");
}

per_server!(a_board_moved_or_deleted_right_after_its_meta_was_garbled_leaves_nothing_behind);
/// Written for soak seed 1033986287 (fault fuzz, Valkey, not reproduced on replay): after
/// `RENAME b:29 b:22`, the free name `b:29` answered `WRONGTYPE` to every read, as if a
/// garbled `b:29|meta` had stayed behind. A meta garbled and its board renamed or deleted
/// in one transaction (before any job runs) leaves nothing behind: the meta is put back
/// first, then moves or goes with the board. (This passed before any change: the soak
/// failure was the fuzzer's model, which took a junk `b:29|meta` tally never knew as a
/// meta for a part that moves with the main key; fixed in `fuzz_faults/faults.rs`.)
fn a_board_moved_or_deleted_right_after_its_meta_was_garbled_leaves_nothing_behind(
    kind: &ServerKind,
) {
    let k = kind.name.clone();
    let (srv, replica) = start_with_replica(kind);
    let mut conn = srv.conn();
    for (what, then) in [
        ("RENAME", vec!["RENAME", "b", "c"]),
        ("DEL", vec!["DEL", "b"]),
    ] {
        assert_eq!(
            srv.cmd_value(&["TSRANK.INCRBY", "b", "4", "m1", "2", "m2"]),
            v_arr(vec![v_int(4), v_int(2)]),
            "{k}"
        );
        let Value::BulkString(slots) = srv.cmd_value(&["HGET", "b|meta", "_slots"]) else {
            panic!("{k}: b|meta has no _slots")
        };
        let tx = vec![
            strings(&["MULTI"]),
            strings(&["HSET", "b|meta", "_slots", "garbage"]),
            then.iter().map(|s| s.to_string()).collect(),
            strings(&["EXEC"]),
        ];
        let replies = pipeline(&mut conn, &tx);
        assert!(
            matches!(replies.last(), Some(Value::Array(r)) if r.len() == 2),
            "{k}: {what}: {replies:?}"
        );
        sleep_ms(200);
        for read in [
            strings(&["TSRANK.TOP", "b", "10", "WITHSCORES"]),
            strings(&["TSRANK.SCORE", "b", "m1"]),
        ] {
            let answer = conn_value(&mut conn, &read);
            assert!(
                matches!(answer, Value::Array(ref a) if a.is_empty()) || answer == Value::Nil,
                "{k}: {what}: {read:?} on the free name -> {answer:?}"
            );
        }
        assert!(!exists(&srv, "b|meta"), "{k}: {what}: b|meta left behind");
        if what == "RENAME" {
            assert_eq!(
                srv.cmd_value(&["TSRANK.TOP", "c", "10", "WITHSCORES"]),
                v_arr(vec![v_bulk("m1"), v_int(4), v_bulk("m2"), v_int(2)]),
                "{k}: the board at its new name"
            );
            assert_eq!(
                srv.cmd_value(&["HGET", "c|meta", "_slots"]),
                Value::BulkString(slots),
                "{k}: the meta repaired at the new name"
            );
        }
        // The free name takes a new board.
        assert_eq!(
            srv.cmd_value(&["TSRANK.INCRBY", "b", "1", "m1"]),
            v_int(1),
            "{k}: {what}"
        );
        assert_eq!(srv.cmd_value(&["FLUSHALL"]), v_ok(), "{k}");
    }
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, "replica");
}

per_server!(a_garbled_meta_goes_with_its_board);
/// Fault fuzz seed 767908158 (Redis 7.0): a board's meta garbled (`_slots` deleted) in
/// the transaction that deleted or renamed the board. The job removing (or moving) the
/// board ran first and took only its valid parts: the garbled meta stayed behind at the
/// old name, tally forgot the board, and every read of that name answered WRONGTYPE from
/// then on. A garbled meta of a board tally knows now goes (or moves) with the board.
fn a_garbled_meta_goes_with_its_board(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start(kind);
    let mut conn = srv.conn();
    let top_of =
        |srv: &Server, name: &str| srv.cmd_value(&["TSRANK.TOP", name, "10", "WITHSCORES"]);
    // Deleted: nothing is left of the board, the name answers as an empty board.
    srv.cmd_value(&["TSRANK.INCRBY", "a", "3", "m1"]);
    let delete = [
        strings(&["MULTI"]),
        strings(&["DEL", "a"]),
        strings(&["HDEL", "a|meta", "_slots"]),
        strings(&["EXEC"]),
    ];
    assert_eq!(
        pipeline(&mut conn, &delete).last(),
        Some(&v_arr(vec![v_int(1), v_int(1)])),
        "{k}"
    );
    sleep_ms(50);
    assert_eq!(top_of(&srv, "a"), v_arr(vec![]), "{k}: the deleted board");
    assert!(!exists(&srv, "a|meta"), "{k}: its garbled meta stayed");
    // Renamed: the board answers at its new name, the old name as empty.
    srv.cmd_value(&["TSRANK.INCRBY", "b", "3", "m1"]);
    let rename = [
        strings(&["MULTI"]),
        strings(&["RENAME", "b", "c"]),
        strings(&["HDEL", "b|meta", "_slots"]),
        strings(&["EXEC"]),
    ];
    assert_eq!(
        pipeline(&mut conn, &rename).last(),
        Some(&v_arr(vec![v_ok(), v_int(1)])),
        "{k}"
    );
    sleep_ms(50);
    assert_eq!(top_of(&srv, "b"), v_arr(vec![]), "{k}: the old name");
    assert!(
        !exists(&srv, "b|meta"),
        "{k}: the garbled meta stayed behind"
    );
    assert_eq!(
        top_of(&srv, "c"),
        v_arr(vec![v_bulk("m1"), v_int(3)]),
        "{k}: the moved board"
    );
    assert_eq!(
        srv.cmd_value(&["HGET", "c|meta", "_tally"]),
        v_bulk("rank 86400000 3600000"),
        "{k}: the moved board's meta"
    );
    srv.cmd_value(&["DEBUG", "RELOAD"]);
    assert_eq!(
        top_of(&srv, "c"),
        v_arr(vec![v_bulk("m1"), v_int(3)]),
        "{k}: after a reload"
    );
    srv.assert_alive();
}
