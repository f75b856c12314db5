//! Leaderboard meta layout: `key|meta` holds `_tally` = `rank <window> <slot>` (never
//! changed after CREATE) and `_slots` = `<lo> <hi>`. Boards written in the first layout
//! (all four numbers in `_tally`, no `_slots`) still load, answer as before, and are
//! rewritten in the current layout by the next write of their range, on the primary and
//! identically on a replica.
//!
//! The old boards are built as the old module wrote them. Their keys arrive by RESTORE
//! (as from an RDB or a MIGRATE), so that building them is not a native edit that
//! quarantines the board; one test builds a board with plain HSET/ZADD, which does.

use module_tests::*;
use std::collections::BTreeMap;
use std::time::Duration;

const WINDOW: i64 = 7_200_000;
const SLOT: i64 = 1_800_000;

/// Creates `key` holding what the `build` commands put into a scratch key, by
/// DUMP/RESTORE (each command names the scratch key `$`).
fn restore(srv: &Server, key: &str, build: &[&[&str]]) {
    for command in build {
        let args: Vec<&str> = command
            .iter()
            .map(|a| if *a == "$" { "scratch" } else { a })
            .collect();
        srv.cmd_value(&args);
    }
    let Value::BulkString(payload) = srv.cmd_value(&["DUMP", "scratch"]) else {
        panic!("DUMP scratch failed");
    };
    srv.cmd_value(&["DEL", "scratch"]);
    assert_eq!(
        srv.cmd_value(&[&b"RESTORE"[..], key.as_bytes(), b"0", &payload]),
        v_ok(),
        "RESTORE {key}"
    );
}

/// The board `key` as the first layout stored it: `a 5`, `c 2` in slot `index`, and
/// `expired` (members and counts) in slot `lo` if it is older.
fn old_board(srv: &Server, key: &str, index: i64, lo: i64, expired: &[(&str, i64)]) {
    let marker = format!("rank {WINDOW} {SLOT} {lo} {index}");
    let mut totals: BTreeMap<&str, i64> = [("a", 5), ("c", 2)].into_iter().collect();
    if lo < index {
        let mut slot = vec!["HSET".to_string(), "$".into()];
        for (member, count) in expired {
            slot.extend([member.to_string(), count.to_string()]);
            *totals.entry(member).or_insert(0) += count;
        }
        let slot: Vec<&str> = slot.iter().map(String::as_str).collect();
        restore(srv, &format!("{key}|slot|{lo}"), &[&slot]);
    }
    restore(
        srv,
        &format!("{key}|slot|{index}"),
        &[&["HSET", "$", "a", "5", "c", "2"]],
    );
    let mut zadd = vec!["ZADD".to_string(), "$".into()];
    for (member, total) in &totals {
        zadd.extend([total.to_string(), member.to_string()]);
    }
    let zadd: Vec<&str> = zadd.iter().map(String::as_str).collect();
    restore(srv, key, &[&zadd]);
    restore(
        srv,
        &format!("{key}|meta"),
        &[&["HSET", "$", "_tally", &marker]],
    );
}

fn fields(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(f, v)| (f.to_string(), v.clone()))
        .collect()
}

fn current_layout(lo: i64, hi: i64) -> BTreeMap<String, String> {
    fields(&[
        ("_tally", format!("rank {WINDOW} {SLOT}")),
        ("_slots", format!("{lo} {hi}")),
    ])
}

#[test]
fn an_old_board_answers_and_the_next_write_migrates_it() {
    for kind in server_kinds() {
        let k = kind.name.clone();
        let srv = Server::start(&kind);
        let index = server_ms(&srv) / SLOT;
        old_board(&srv, "b", index, index, &[]);
        let old_meta = fields(&[("_tally", format!("rank {WINDOW} {SLOT} {index} {index}"))]);
        assert_eq!(hgetall(&srv, "b|meta"), old_meta, "{k}");

        // Reads answer from the old layout and change nothing.
        assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "b", "a"]), v_int(5), "{k}");
        assert_eq!(srv.cmd_value(&["TSRANK.RANK", "b", "c"]), v_int(1), "{k}");
        assert_eq!(
            srv.cmd_value(&["TSRANK.TOP", "b", "10", "WITHSCORES"]),
            v_arr(vec![v_bulk("a"), v_int(5), v_bulk("c"), v_int(2)]),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value(&["TSRANK.INFO", "b"]),
            v_arr(vec![
                v_bulk("window"),
                v_int(WINDOW),
                v_bulk("slot"),
                v_int(SLOT),
                v_bulk("members"),
                v_int(2),
                v_bulk("slots"),
                v_int(1),
                v_bulk("oldest"),
                v_int(index * SLOT),
                v_bulk("capacity"),
                v_int(0),
                v_bulk("error"),
                v_int(0),
            ]),
            "{k}"
        );
        assert_eq!(
            hgetall(&srv, "b|meta"),
            old_meta,
            "{k}: a read wrote the meta"
        );

        // A write to the same slot leaves the range as it is, and still migrates.
        assert_eq!(
            srv.cmd_value(&["TSRANK.INCRBY", "b", "3", "c"]),
            v_int(5),
            "{k}"
        );
        assert_eq!(hgetall(&srv, "b|meta"), current_layout(index, index), "{k}");
        assert_eq!(
            srv.cmd_value(&["TSRANK.TOP", "b", "10", "WITHSCORES"]),
            v_arr(vec![v_bulk("c"), v_int(5), v_bulk("a"), v_int(5)]),
            "{k}"
        );
        // From now on only `_slots` moves (a write to the previous slot, still in the
        // window, widens the range).
        let t = ((index - 1) * SLOT).to_string();
        assert_eq!(
            srv.cmd_value(&["TSRANK.INCRBY", "b", "1", "a", "AT", &t]),
            v_int(6),
            "{k}"
        );
        assert_eq!(
            hgetall(&srv, "b|meta"),
            current_layout(index - 1, index),
            "{k}"
        );
        assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "b", "a"]), v_int(6), "{k}");
        srv.assert_alive();
    }
}

/// A board built with native commands is quarantined (the edits may be a forgery); its
/// first write rebuilds it from the slot hashes, clears `_edited` and migrates the meta.
#[test]
fn an_old_board_built_by_hand_is_rebuilt_and_migrated() {
    for kind in server_kinds() {
        let k = kind.name.clone();
        let srv = Server::start(&kind);
        let index = server_ms(&srv) / SLOT;
        let marker = format!("rank {WINDOW} {SLOT} {index} {index}");
        // Meta first: the job that records the quarantine needs it.
        srv.cmd_value(&["HSET", "q|meta", "_tally", &marker]);
        srv.cmd_value(&["HSET", &format!("q|slot|{index}"), "a", "5", "c", "2"]);
        srv.cmd_value(&["ZADD", "q", "5", "a", "2", "c"]);
        assert!(
            wait_until(Duration::from_secs(5), || hgetall(&srv, "q|meta")
                .contains_key("_edited")),
            "{k}: the quarantine was not recorded"
        );
        assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "q", "a"]), v_int(5), "{k}");
        assert_eq!(
            srv.cmd_value(&["TSRANK.INCRBY", "q", "1", "c"]),
            v_int(3),
            "{k}"
        );
        assert_eq!(hgetall(&srv, "q|meta"), current_layout(index, index), "{k}");
        assert_eq!(
            srv.cmd_value(&["ZREVRANGE", "q", "0", "-1", "WITHSCORES"]),
            v_bulks(&["a", "5", "c", "3"]),
            "{k}"
        );
        srv.assert_alive();
    }
}

/// The expiry timer's write of the range migrates an old meta too; a replica ends up
/// with exactly the primary's keys, through the reads, the timer and the writes.
#[test]
fn migration_replicates_and_the_timer_migrates_too() {
    for kind in server_kinds() {
        let k = kind.name.clone();
        let primary = Server::start(&kind);
        let replica = Server::start(&kind);
        replica.replicate_from(&primary);
        wait_replica_synced(&primary, &replica);

        let index = server_ms(&primary) / SLOT;
        old_board(&primary, "b", index, index, &[]);
        wait_replica_synced(&primary, &replica);
        assert_eq!(
            replica.cmd_value(&["TSRANK.SCORE", "b", "a"]),
            v_int(5),
            "{k}"
        );
        assert_eq!(
            primary.cmd_value(&["TSRANK.INCRBY", "b", "3", "c"]),
            v_int(5),
            "{k}"
        );
        assert_eq!(
            hgetall(&primary, "b|meta"),
            current_layout(index, index),
            "{k}"
        );
        assert_replica_equal(&primary, &replica, "after the migrating INCRBY");
        assert_eq!(
            hgetall(&replica, "b|meta"),
            current_layout(index, index),
            "{k}"
        );

        // An old board with a slot that left the window: the timer subtracts it and
        // writes the range in the current layout.
        let old = index - 6;
        old_board(&primary, "e", index, old, &[("a", 3), ("z", 1)]);
        assert!(
            wait_until(Duration::from_secs(10), || hgetall(&primary, "e|meta")
                == current_layout(index - 3, index)),
            "{k}: meta {:?}",
            hgetall(&primary, "e|meta")
        );
        assert!(!exists(&primary, format!("e|slot|{old}")), "{k}");
        assert_eq!(
            primary.cmd_value(&["ZREVRANGE", "e", "0", "-1", "WITHSCORES"]),
            v_bulks(&["a", "5", "c", "2"]),
            "{k}"
        );
        assert_replica_equal(&primary, &replica, "after the timer's migration");
        primary.assert_alive();
        replica.assert_alive();
    }
}
