//! tally hears the keyspace events of the keys it tracks only (every other key of the
//! server is turned away by one lookup of its name): a key that left and came back, by a
//! user's DEL, by an expiry found inside tally's own write, or under a new name, is
//! tracked again, so a user's edit of it still drops tally's read copy.

use module_tests::*;

/// `how` removes the counter `c` (whose writes made a read mirror of it); then writes
/// recreate it and make a mirror again, and a user's HSET of a slot must show in the next
/// SUM.
fn edit_after_removal_shows(kind: &ServerKind, how: &str) {
    let k = format!("{} ({how})", kind.name);
    let srv = Server::start(kind);
    let t = server_ms(&srv);
    let at = t.to_string();
    let slot = format!("1m:{}", t.div_euclid(60_000));
    let create = ["TSCOUNTER.CREATE", "c", "RESOLUTIONS", "1m:60"];
    let write = ["TSCOUNTER.INCRBY", "c", "2", "AT", &at];
    let sum = ["TSCOUNTER.SUM", "c", "1m", "AT", &at];
    assert_eq!(srv.cmd_value(&create), v_ok(), "{k}");
    // Hot: from the third write on, the counter is read from its mirror.
    for i in 1..=4 {
        assert_eq!(srv.cmd_value(&write), v_int(2 * i), "{k}");
    }
    assert_eq!(srv.cmd_value(&sum), v_int(8), "{k}");
    match how {
        "DEL" => assert_eq!(srv.cmd_value(&["DEL", "c"]), v_int(1), "{k}"),
        // Gone under its old name, back under it from another key.
        "RENAME away and back" => {
            assert_eq!(srv.cmd_value(&["RENAME", "c", "elsewhere"]), v_ok(), "{k}");
            assert_eq!(srv.cmd_value(&["RENAME", "elsewhere", "c"]), v_ok(), "{k}");
            assert_eq!(srv.cmd_value(&["DEL", "c"]), v_int(1), "{k}");
        }
        other => panic!("unknown removal {other}"),
    }
    assert_eq!(srv.cmd_value(&create), v_ok(), "{k}");
    // Hot again.
    for i in 1..=4 {
        assert_eq!(srv.cmd_value(&write), v_int(2 * i), "{k}");
    }
    assert_eq!(srv.cmd_value(&sum), v_int(8), "{k}");
    assert_eq!(srv.cmd_value(&["HSET", "c", &slot, "100"]), v_int(0), "{k}");
    assert_eq!(
        srv.cmd_value(&sum),
        v_int(100),
        "{k}: the user's HSET is seen"
    );
    assert_eq!(srv.cmd_value(&write), v_int(102), "{k}");
}

per_server!(an_edit_after_a_del_and_a_new_counter_shows);
fn an_edit_after_a_del_and_a_new_counter_shows(kind: &ServerKind) {
    edit_after_removal_shows(kind, "DEL");
}

per_server!(an_edit_after_an_expiry_found_by_a_write_shows);
/// A write finds its counter expired (active expiry off): its own open removes the key (the
/// `expired` event fires inside tally's command) and it writes a new one, which the next
/// writes mirror. That key is tracked, so the user's HSET that follows drops the mirror.
fn an_edit_after_an_expiry_found_by_a_write_shows(kind: &ServerKind) {
    let k = &kind.name;
    let srv = Server::start(kind);
    let t = server_ms(&srv);
    let at = t.to_string();
    let write = ["TSCOUNTER.INCRBY", "c", "2", "AT", &at];
    for i in 1..=4 {
        assert_eq!(srv.cmd_value(&write), v_int(2 * i), "{k}");
    }
    assert_eq!(
        srv.cmd_value(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
        v_ok(),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["PEXPIRE", "c", "1"]), v_int(1), "{k}");
    std::thread::sleep(std::time::Duration::from_millis(20));
    for i in 1..=4 {
        assert_eq!(srv.cmd_value(&write), v_int(2 * i), "{k}: a new counter");
    }
    let mirrored = info_i64(&srv, "tally", "tally_mirrored_slots");
    assert!(mirrored > 0, "{k}: the writes make a mirror");
    let slot = format!("1s:{}", t.div_euclid(1_000));
    assert_eq!(srv.cmd_value(&["HSET", "c", &slot, "100"]), v_int(0), "{k}");
    let sum = ["TSCOUNTER.SUM", "c", "1s", "AT", &at];
    assert_eq!(
        srv.cmd_value(&sum),
        v_int(100),
        "{k}: the user's HSET is seen"
    );
}

per_server!(an_edit_after_a_rename_away_and_back_shows);
fn an_edit_after_a_rename_away_and_back_shows(kind: &ServerKind) {
    edit_after_removal_shows(kind, "RENAME away and back");
}

per_server!(a_counter_renamed_in_follows_the_users_edits);
/// A counter that arrives under a name tally never opened: its events are heard at once.
fn a_counter_renamed_in_follows_the_users_edits(kind: &ServerKind) {
    let k = &kind.name;
    let srv = Server::start(kind);
    let t = server_ms(&srv);
    let at = t.to_string();
    let slot = format!("1m:{}", t.div_euclid(60_000));
    let create = ["TSCOUNTER.CREATE", "src", "RESOLUTIONS", "1m:60"];
    assert_eq!(srv.cmd_value(&create), v_ok(), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "src", "1", "AT", &at]),
        v_int(1),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["RENAME", "src", "dst"]), v_ok(), "{k}");
    let write = ["TSCOUNTER.INCRBY", "dst", "2", "AT", &at];
    for i in 1..=4 {
        assert_eq!(srv.cmd_value(&write), v_int(1 + 2 * i), "{k}");
    }
    assert_eq!(
        srv.cmd_value(&["HSET", "dst", &slot, "50"]),
        v_int(0),
        "{k}"
    );
    let sum = ["TSCOUNTER.SUM", "dst", "1m", "AT", &at];
    assert_eq!(srv.cmd_value(&sum), v_int(50), "{k}");
}

per_server!(events_on_other_keys_leave_tally_untouched);
/// Native writes of every subscribed class on keys that are not tally's, next to tally
/// objects: tally tracks only its own keys (`INFO tally`), and its objects answer as before.
fn events_on_other_keys_leave_tally_untouched(kind: &ServerKind) {
    let k = &kind.name;
    let srv = Server::start(kind);
    let t = server_ms(&srv);
    let at = t.to_string();
    let create = ["TSCOUNTER.CREATE", "c", "RESOLUTIONS", "1m:60"];
    assert_eq!(srv.cmd_value(&create), v_ok(), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "c", "3", "AT", &at]),
        v_int(3),
        "{k}"
    );
    let tracked = info_i64(&srv, "tally", "tally_event_filter_keys");
    assert!(tracked >= 1, "{k}: event_filter_keys {tracked}");
    let mut conn = srv.conn();
    let cmds: Vec<Vec<String>> = (0..200)
        .flat_map(|i| {
            [
                strings(&["HSET", &format!("h{i}"), "f", "v"]),
                strings(&["SET", &format!("s{i}"), "v"]),
                strings(&["ZADD", &format!("z{i}"), "1", "m"]),
                strings(&["SADD", &format!("t{i}"), "m"]),
                strings(&["LPUSH", &format!("l{i}"), "m"]),
                strings(&["DEL", &format!("h{i}")]),
            ]
        })
        .collect();
    for reply in pipeline(&mut conn, &cmds) {
        assert!(error_text(&reply).is_none(), "{k}: {reply:?}");
    }
    assert_eq!(
        info_i64(&srv, "tally", "tally_event_filter_keys"),
        tracked,
        "{k}: other keys are not tracked"
    );
    let sum = ["TSCOUNTER.SUM", "c", "1m", "AT", &at];
    assert_eq!(srv.cmd_value(&sum), v_int(3), "{k}");
}

per_server!(a_counter_overwritten_by_another_type_is_no_longer_tracked);
/// A counter overwritten by `SET` (a string) or `SUNIONSTORE` (a set) is not tally's any
/// more: its name leaves the tracked keys, so the events of what it holds now are turned
/// away at once; a counter created again under the name is tracked again.
fn a_counter_overwritten_by_another_type_is_no_longer_tracked(kind: &ServerKind) {
    let k = &kind.name;
    let srv = Server::start(kind);
    assert_eq!(srv.cmd_value(&["SADD", "members", "m"]), v_int(1), "{k}");
    for name in ["c1", "c2"] {
        assert_eq!(srv.cmd_value(&["TSCOUNTER.INCR", name]), v_int(1), "{k}");
    }
    assert_eq!(info_i64(&srv, "tally", "tally_event_filter_keys"), 2, "{k}");
    assert_eq!(srv.cmd_value(&["SET", "c1", "v"]), v_ok(), "{k}");
    assert_eq!(
        srv.cmd_value(&["SUNIONSTORE", "c2", "members"]),
        v_int(1),
        "{k}"
    );
    assert_eq!(
        info_i64(&srv, "tally", "tally_event_filter_keys"),
        0,
        "{k}: overwritten counters are not tracked"
    );
    assert_eq!(srv.cmd_value(&["DEL", "c1"]), v_int(1), "{k}");
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCR", "c1"]), v_int(1), "{k}");
    assert_eq!(info_i64(&srv, "tally", "tally_event_filter_keys"), 1, "{k}");
    srv.assert_alive();
}
