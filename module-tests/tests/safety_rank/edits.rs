//! Native edits and forgeries of a leaderboard's parts: quarantine, repair, leftovers.

use super::*;

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

per_server!(a_value_of_another_type_at_a_slot_name_is_replaced);
/// A string (or a list) left at a board's slot-key name is no part of the board: reads
/// count it as an empty slot and the next write replaces it, as a leftover hash is
/// replaced, on the primary and the replica alike; before, every write there answered
/// WRONGTYPE while reads answered empty. The slot of the current hour at a new board, then
/// an older slot inside the range of a board that has other slots.
fn a_value_of_another_type_at_a_slot_name_is_replaced(kind: &ServerKind) {
    let k = kind.name.clone();
    let (srv, replica) = start_with_replica(kind);
    let now = server_ms(&srv);
    let hour = now / 3_600_000;
    let (at, slot) = (now.to_string(), format!("b|slot|{hour}"));
    assert_eq!(srv.cmd_value(&["SET", &slot, "leftover"]), v_ok(), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "b", "10"]),
        v_arr(vec![]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "b", "5", "m1", "AT", &at]),
        v_int(5),
        "{k}: a write over a string at the slot's name"
    );
    assert_eq!(slot_sum(&srv, "b", "m1"), 5, "{k}: the new slot counts");
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "b", "10", "WITHSCORES"]),
        v_arr(vec![v_bulk("m1"), v_int(5)]),
        "{k}"
    );
    // An older slot of the same board, inside its range: written, then overwritten by a
    // list; the board is recounted without it, and a write there replaces the list.
    let older = (hour - 2) * 3_600_000;
    let older_at = older.to_string();
    let older_slot = format!("b|slot|{}", hour - 2);
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "b", "3", "m2", "AT", &older_at]),
        v_int(3),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["DEL", &older_slot]), v_int(1), "{k}");
    assert_eq!(
        srv.cmd_value(&["RPUSH", &older_slot, "x", "y"]),
        v_int(2),
        "{k}"
    );
    sleep_ms(50);
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "b", "2", "m2", "AT", &older_at]),
        v_int(2),
        "{k}: a write over a list at an older slot's name"
    );
    assert_eq!(
        srv.cmd_value(&["TYPE", &older_slot]),
        redis::Value::SimpleString("hash".into()),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "b", "10", "WITHSCORES"]),
        v_arr(vec![v_bulk("m1"), v_int(5), v_bulk("m2"), v_int(2)]),
        "{k}"
    );
    assert_eq!(slot_sum(&srv, "b", "m2"), 2, "{k}");
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, "replica");
}
