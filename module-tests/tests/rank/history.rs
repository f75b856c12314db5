//! Integration tests of TSRANK.HISTORY against real servers (every `server_kinds()`).
//!
//! * a seeded random workload (members, increments, `AT` across the window) checked against
//!   a reference model: the whole window and `WINDOW` sub-windows, for every member and
//!   for one that never appeared, in RESP2 and RESP3;
//! * errors with exact texts (they write nothing), a missing key or member, `WINDOW`
//!   following TOP's rules, ACL on the derived keys, cluster hash tags, `COMMAND GETKEYS`;
//! * real-time 1 s slots: a slot that has left the window is never listed, even while
//!   its expiry (a big slot, a tiny expiry budget) is still running;
//! * a replica answers what the primary answers.
//!
//! Determinism: model tests use a 1h SLOT and `AT` timestamps well inside the window;
//! every read is bracketed between two `TIME` calls and only checked when both fall in
//! the same slot.

use module_tests::*;

use super::{cluster_node, seeded_board, NO_HASH_TAG};
use std::time::Duration;

const HOUR: i64 = 3_600_000;
const WINDOW_ERR: &str = "ERR WINDOW must be a multiple of the slot (1h) of at most 24 slots (1d)";

/// A HISTORY reply as `(slot_start, count)` rows (nested arrays in RESP2 and RESP3).
fn rows(v: &Value) -> Vec<(i64, i64)> {
    let Value::Array(items) = v else {
        panic!("not an array: {v:?}")
    };
    items
        .iter()
        .map(|row| match row {
            Value::Array(pair) => match pair.as_slice() {
                [Value::Int(start), Value::Int(count)] => (*start, *count),
                _ => panic!("not a [slot_start, count] pair: {row:?}"),
            },
            _ => panic!("not a pair: {row:?}"),
        })
        .collect()
}

fn history_cmd(board: &str, member: &str, window: Option<&str>) -> Vec<String> {
    let mut cmd = strings(&["TSRANK.HISTORY", board, member]);
    if let Some(w) = window {
        cmd.extend(strings(&["WINDOW", w]));
    }
    cmd
}

// ================================================================= model test

per_server!(history_matches_the_model_on_random_traffic);
fn history_matches_the_model_on_random_traffic(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let mut conn = srv.conn();
    let mut conn3 = srv.conn_resp3();
    for (seed, board) in [(3u64, "h:a"), (2024, "h:b")] {
        let (mut rng, t0, cur) = seeded_board(&srv, seed, board);
        let mut model = RankModel::default();
        for round in 0..4 {
            // Members m0..m11, increments 1..4, AT up to 22 h back (inside the window).
            let mut cmds = Vec::new();
            for _ in 0..50 {
                let ts = ((cur - rng.below(23)) * HOUR + rng.below(HOUR)).min(t0);
                let mut cmd = strings(&["TSRANK.INCRBY", board]);
                for _ in 0..1 + rng.below(3) {
                    let m = format!("m{}", rng.below(12));
                    let n = 1 + rng.below(4);
                    model.add(ts / HOUR, &m, n);
                    cmd.push(n.to_string());
                    cmd.push(m);
                }
                cmd.push("AT".into());
                cmd.push(ts.to_string());
                cmds.push(cmd);
            }
            for reply in pipeline(&mut conn, &cmds) {
                assert!(error_text(&reply).is_none(), "{k}: {reply:?}");
            }
            let members: Vec<String> = (0..12)
                .map(|i| format!("m{i}"))
                .chain(["nobody".to_string()])
                .collect();
            for window in [None, Some("1h"), Some("2h"), Some("5h"), Some("24h")] {
                let hours = window.map_or(24, |w| w.trim_end_matches('h').parse().unwrap());
                let cmds: Vec<Vec<String>> = members
                    .iter()
                    .map(|m| history_cmd(board, m, window))
                    .collect();
                let before = server_ms(&srv) / HOUR;
                let replies = pipeline(&mut conn, &cmds);
                let replies3 = pipeline(&mut conn3, &cmds);
                if server_ms(&srv) / HOUR != before {
                    continue; // an hour boundary passed during the reads
                }
                for ((m, reply), reply3) in members.iter().zip(&replies).zip(&replies3) {
                    let want = model.history(m, before - hours + 1, before, HOUR);
                    assert_eq!(
                        rows(reply),
                        want,
                        "{k} {board} round {round} {m} {window:?}"
                    );
                    assert_eq!(reply, reply3, "{k}: RESP2 and RESP3 replies differ");
                    if m == "nobody" {
                        assert_eq!(*reply, v_arr(vec![]), "{k}");
                    }
                }
            }
        }
    }
    srv.assert_alive();
}

// ================================================================= shapes, errors

per_server!(history_reply_shape_in_resp2_and_resp3);
fn history_reply_shape_in_resp2_and_resp3(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    srv.cmd(&["TSRANK.CREATE", "lb", "WINDOW", "3h", "SLOT", "1h"])
        .expect("create");
    let now = server_ms(&srv);
    let (older, newer) = ((now / HOUR - 2) * HOUR, (now / HOUR) * HOUR);
    srv.cmd(&[
        "TSRANK.INCRBY",
        "lb",
        "4",
        "a",
        "AT",
        &(older + 5).to_string(),
    ])
    .expect("incr");
    srv.cmd(&[
        "TSRANK.INCRBY",
        "lb",
        "7",
        "a",
        "1",
        "b",
        "AT",
        &newer.to_string(),
    ])
    .expect("incr");
    let want = v_arr(vec![
        v_arr(vec![v_int(older), v_int(4)]),
        v_arr(vec![v_int(newer), v_int(7)]),
    ]);
    if server_ms(&srv) / HOUR == now / HOUR {
        assert_eq!(srv.cmd_value(&["TSRANK.HISTORY", "lb", "a"]), want, "{k}");
        assert_eq!(
            srv.cmd_value_resp3(&["TSRANK.HISTORY", "lb", "a"]),
            want,
            "{k}"
        );
        assert_eq!(
            srv.cmd_value_resp3(&["TSRANK.HISTORY", "lb", "b", "WINDOW", "1h"]),
            v_arr(vec![v_arr(vec![v_int(newer), v_int(1)])]),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value(&["TSRANK.HISTORY", "lb", "a", "window", "2h"]),
            v_arr(vec![v_arr(vec![v_int(newer), v_int(7)])]),
            "{k}: keywords are case-insensitive"
        );
    }
    // Missing key, missing member: an empty array, in both protocols.
    for cmd in [
        &["TSRANK.HISTORY", "nokey", "a"][..],
        &["TSRANK.HISTORY", "nokey", "a", "WINDOW", "7m"][..],
        &["TSRANK.HISTORY", "lb", "nobody"][..],
        &["TSRANK.HISTORY", "lb", ""][..],
    ] {
        assert_eq!(srv.cmd_value(cmd), v_arr(vec![]), "{k} {cmd:?}");
        assert_eq!(srv.cmd_value_resp3(cmd), v_arr(vec![]), "{k} {cmd:?}");
    }
    assert!(!exists(&srv, "nokey"), "{k}: a read created the key");
    // A user's non-integer or non-positive value in a slot hash counts as nothing.
    let slot_hash = format!("lb|slot|{}", newer / HOUR);
    srv.cmd(&["HSET", &slot_hash, "junk", "x", "neg", "-3"])
        .expect("hset");
    assert_eq!(
        srv.cmd_value(&["TSRANK.HISTORY", "lb", "junk"]),
        v_arr(vec![])
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.HISTORY", "lb", "neg"]),
        v_arr(vec![])
    );
    srv.assert_alive();
}

per_server!(history_errors_have_exact_texts_and_write_nothing);
fn history_errors_have_exact_texts_and_write_nothing(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    srv.cmd(&["TSRANK.CREATE", "b", "WINDOW", "24h", "SLOT", "1h"])
        .expect("create");
    srv.cmd(&["TSRANK.INCRBY", "b", "1", "a"]).expect("incr");
    srv.cmd(&["SET", "str", "x"]).expect("set");
    srv.cmd(&["ZADD", "plainz", "1", "a"]).expect("zadd");
    let before = srv.dump_keyspace();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            strings(&["TSRANK.HISTORY", "b"]),
            "ERR wrong number of arguments for 'tsrank.history' command",
        ),
        (
            strings(&["TSRANK.HISTORY", "b", "a", "WINDOW"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.HISTORY", "b", "a", "BOGUS"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.HISTORY", "b", "a", "WINDOW", "1h", "WINDOW", "2h"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.HISTORY", "b", "a", "WINDOW", "1x"]),
            "ERR invalid duration '1x': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)",
        ),
        (
            strings(&["TSRANK.HISTORY", "b", "a", "WINDOW", "90m"]),
            WINDOW_ERR,
        ),
        (
            strings(&["TSRANK.HISTORY", "b", "a", "WINDOW", "48h"]),
            WINDOW_ERR,
        ),
        (strings(&["TSRANK.HISTORY", "str", "a"]), WRONGTYPE),
        (strings(&["TSRANK.HISTORY", "plainz", "a"]), WRONGTYPE),
    ];
    for (cmd, want) in &cases {
        assert_eq!(srv.cmd_value(cmd), v_err(want), "{k}: {cmd:?}");
        // TOP answers the same WINDOW errors.
        if cmd.len() == 5 && cmd[3] == "WINDOW" {
            let top = strings(&["TSRANK.TOP", &cmd[1], "1", "WINDOW", &cmd[4]]);
            assert_eq!(srv.cmd_value(&top), v_err(want), "{k}: {top:?}");
        }
    }
    assert_eq!(srv.dump_keyspace(), before, "{k}: an error wrote something");
    srv.assert_alive();
}

per_server!(history_keys_acl_and_cluster);
fn history_keys_acl_and_cluster(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["COMMAND", "GETKEYS", "TSRANK.HISTORY", "lb", "a"]),
        v_arr(vec![v_bulk("lb")]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&[
            "COMMAND",
            "GETKEYS",
            "TSRANK.HISTORY",
            "lb",
            "a",
            "WINDOW",
            "1h"
        ]),
        v_arr(vec![v_bulk("lb")]),
        "{k}"
    );
    srv.cmd(&["TSRANK.INCRBY", "lb", "2", "a"]).expect("incr");
    // u may not read lb|meta; v may not read the slot hashes; w may read every key.
    let mut users = [
        ("u", conn_as_user(&srv, "u", &["~lb", "~lb|slot|*"])),
        ("v", conn_as_user(&srv, "v", &["~lb", "~lb|meta"])),
        ("w", conn_as_user(&srv, "w", &["~lb*"])),
    ];
    for (user, conn) in &mut users[..2] {
        let v = conn_value(conn, &["TSRANK.HISTORY", "lb", "a"]);
        let text = error_text(&v).unwrap_or_default();
        assert!(text.starts_with("NOPERM"), "{k} {user}: {v:?}");
    }
    let v = conn_value(&mut users[2].1, &["TSRANK.HISTORY", "lb", "a"]);
    assert_eq!(rows(&v).len(), 1, "{k}: {v:?}");
    assert_eq!(rows(&v)[0].1, 2, "{k}: {v:?}");

    // Cluster mode: a key without a hash tag is refused, like every other command.
    let node = cluster_node(kind);
    let err = NO_HASH_TAG;
    assert_eq!(
        node.cmd_value(&["TSRANK.HISTORY", "lb", "a"]),
        v_err(err),
        "{k}"
    );
    node.cmd(&["TSRANK.INCRBY", "{lb}", "3", "a"])
        .expect("incr");
    let v = node.cmd_value(&["TSRANK.HISTORY", "{lb}", "a"]);
    assert_eq!(rows(&v).iter().map(|r| r.1).collect::<Vec<_>>(), [3], "{k}");
}

// ================================================================= real time

per_server!(history_never_lists_a_slot_that_left_the_window);
/// 1 s slots, a 2 s window. The first slot holds 30000 members and the expiry budget is
/// tiny, so after it leaves the window its hash is still being drained for a while:
/// HISTORY must already leave it out.
fn history_never_lists_a_slot_that_left_the_window(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    srv.cmd(&["CONFIG", "SET", "tally.expire-budget-us", "10"])
        .expect("config");
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "{h}", "WINDOW", "2s", "SLOT", "1s"]),
        v_ok()
    );
    // Start early in a slot so the big load lands in one slot.
    while server_ms(&srv) % 1000 > 300 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let t0 = server_ms(&srv);
    let slot0 = t0 / 1000;
    let mut conn = srv.conn();
    let mut cmds = Vec::new();
    for c in 0..30 {
        let mut cmd = strings(&["TSRANK.INCRBY", "{h}"]);
        for i in 0..1000 {
            cmd.push(((i % 5) + 1).to_string());
            cmd.push(format!("m{}", c * 1000 + i));
        }
        cmd.extend(strings(&["1", "a", "AT", &t0.to_string()]));
        cmds.push(cmd);
    }
    for reply in pipeline(&mut conn, &cmds) {
        assert!(error_text(&reply).is_none(), "{k}: {reply:?}");
    }
    // a: 30 in slot0, then 2 in slot0 + 1 (written once that slot has begun).
    while server_ms(&srv) / 1000 == slot0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let t1 = (slot0 + 1) * 1000;
    srv.cmd(&["TSRANK.INCRBY", "{h}", "2", "a", "AT", &t1.to_string()])
        .expect("incr");
    let slot0_hash = format!("{{h}}|slot|{slot0}");
    let (leaves, next_leaves) = ((slot0 + 2) * 1000, (slot0 + 3) * 1000);
    let (mut checked, mut seen_pending) = (0, false);
    loop {
        let before = server_ms(&srv);
        let whole = srv.cmd_value(&["TSRANK.HISTORY", "{h}", "a"]);
        let latest = srv.cmd_value(&["TSRANK.HISTORY", "{h}", "a", "WINDOW", "1s"]);
        let slot0_left = exists(&srv, &slot0_hash);
        let after = server_ms(&srv);
        if after >= next_leaves {
            break;
        }
        if before / 1000 == after / 1000 {
            checked += 1;
            if before >= leaves {
                // slot0 has left: only slot0 + 1, which is also the older slot now.
                assert_eq!(rows(&whole), vec![((slot0 + 1) * 1000, 2)], "{k}");
                assert_eq!(rows(&latest), vec![], "{k}");
                seen_pending |= slot0_left;
            } else {
                let both = vec![(slot0 * 1000, 30), ((slot0 + 1) * 1000, 2)];
                assert_eq!(rows(&whole), both, "{k}");
                assert_eq!(rows(&latest), vec![((slot0 + 1) * 1000, 2)], "{k}");
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(checked > 10, "{k}: only {checked} unambiguous reads");
    assert!(
        seen_pending,
        "{k}: the expiry finished before any read could see it in progress"
    );
    srv.cmd(&["CONFIG", "SET", "tally.expire-budget-us", "1000"])
        .expect("config");
    assert!(
        wait_until(Duration::from_secs(30), || srv.cmd_value(&[
            "TSRANK.HISTORY",
            "{h}",
            "a"
        ]) == v_arr(vec![])),
        "{k}"
    );
    srv.assert_alive();
}

// ================================================================= replica

per_server!(replica_answers_history_like_the_primary);
fn replica_answers_history_like_the_primary(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    let k = &kind.name;
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    let mut rng = Rng(0xABCD_EF01);
    let mut model = RankModel::default();
    let t0 = server_ms(&primary);
    let cur = t0 / HOUR;
    let mut conn = primary.conn();
    let mut cmds = Vec::new();
    for _ in 0..120 {
        let ts = ((cur - rng.below(24)) * HOUR + rng.below(HOUR)).min(t0);
        let m = format!("m{}", rng.below(8));
        let n = 1 + rng.below(5);
        model.add(ts / HOUR, &m, n);
        cmds.push(vec![
            "TSRANK.INCRBY".to_string(),
            "rep".into(),
            n.to_string(),
            m,
            "AT".into(),
            ts.to_string(),
        ]);
    }
    for reply in pipeline(&mut conn, &cmds) {
        assert!(error_text(&reply).is_none(), "{k}: {reply:?}");
    }
    wait_replica_synced(&primary, &replica);
    assert_replica_equal(&primary, &replica, "after INCRBY with AT");
    for i in 0..8 {
        let m = format!("m{i}");
        for window in [None, Some("3h")] {
            let cmd = history_cmd("rep", &m, window);
            let before = server_ms(&primary) / HOUR;
            let on_primary = primary.cmd_value(&cmd);
            let on_replica = replica.cmd_value(&cmd);
            if server_ms(&primary) / HOUR != before {
                continue;
            }
            let hours = if window.is_some() { 3 } else { 24 };
            let want = model.history(&m, before - hours + 1, before, HOUR);
            assert_eq!(rows(&on_primary), want, "{k} {m} {window:?}");
            assert_eq!(on_replica, on_primary, "{k} {m} {window:?}");
        }
    }
}
