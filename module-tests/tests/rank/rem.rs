//! TSRANK.REM and negative TSRANK.INCRBY against real servers (every `server_kinds()`).
//!
//! * seeded random traffic (positive and negative INCRBY, REM, SCORE, RANK; `AT` on slot
//!   edges and across the window's edge) compared reply by reply with the reference model,
//!   then TOP, HISTORY and INFO; no slot hash keeps a count of 0 and no member a total of
//!   0; a replica and an AOF reload equal the primary;
//! * the error texts, whole refusal (nothing written, nothing propagated), missing board and
//!   WRONGTYPE;
//! * `tsrank.rem` notifications, ACL on the derived keys, hash tags in cluster mode;
//! * REM and negative increments while a large slot is being subtracted stay exact.

use module_tests::*;

use super::{cluster_node, NO_HASH_TAG};
use std::collections::BTreeMap;
use std::time::Duration;

const DAY: i64 = 86_400_000;
const BELOW_ZERO: &str = "ERR count would go below zero";
const OUTSIDE: &str = "ERR timestamp is outside the kept range";

/// Keys matching `pattern`, sorted.
fn keys(srv: &Server, pattern: &str) -> Vec<String> {
    let Value::Array(items) = srv.cmd_value(&["KEYS", pattern]) else {
        panic!("KEYS")
    };
    let mut k: Vec<String> = items.iter().filter_map(value_text).collect();
    k.sort();
    k
}

/// A HISTORY reply as `(slot_start, count)` rows.
fn history_rows(v: &Value) -> Vec<(i64, i64)> {
    let Value::Array(rows) = v else {
        panic!("not an array: {v:?}")
    };
    rows.iter()
        .map(|row| match row {
            Value::Array(r) => match (&r[0], &r[1]) {
                (Value::Int(a), Value::Int(b)) => (*a, *b),
                _ => panic!("{row:?}"),
            },
            _ => panic!("{row:?}"),
        })
        .collect()
}

/// Every count in the board's slot hashes and every total is positive, and the board is
/// not quarantined (tally's own removals are not native edits).
fn assert_no_zeros(srv: &Server, board: &str, what: &str) {
    assert_eq!(
        srv.cmd_value(&["HGET", &format!("{board}|meta"), "_edited"]),
        v_nil(),
        "{what}: quarantined"
    );
    for key in keys(srv, &format!("{board}|slot|*")) {
        for (m, c) in hgetall(srv, &key) {
            assert!(
                c.parse::<i64>().expect("count") > 0,
                "{what}: {key} {m}={c}"
            );
        }
    }
    if exists(srv, board) {
        for (m, t) in member_totals(&srv.cmd_value(&["ZRANGE", board, "0", "-1", "WITHSCORES"])) {
            assert!(t > 0, "{what}: {board} {m}={t}");
        }
    }
}

/// The expected reply of a list of integers (one: the integer).
fn ints(replies: &[i64]) -> Value {
    match replies {
        [one] => v_int(*one),
        _ => v_arr(replies.iter().map(|r| v_int(*r)).collect()),
    }
}

per_server!(model_random_traffic_with_unlikes_and_removals);
fn model_random_traffic_with_unlikes_and_removals(kind: &ServerKind) {
    let k = &kind.name;
    let primary = Server::start_with(kind, ServerOptions::new().config("appendonly", "yes"));
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    let mut conn = primary.conn();
    // Day slots: the test never runs across a slot edge of the server's clock (unless
    // started within seconds of midnight UTC, checked below).
    let t0 = server_ms(&primary);
    let cur = t0 / DAY;
    let window = (cur - 9, cur);
    for (seed, board) in [(3u64, "rb:a"), (77, "rb:b"), (2024, "rb:c")] {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        assert_eq!(
            primary.cmd_value(&["TSRANK.CREATE", board, "WINDOW", "10d", "SLOT", "1d"]),
            v_ok()
        );
        let mut model = RankModel::default();
        for round in 0..5 {
            let mut cmds = Vec::new();
            let mut expected = Vec::new();
            for _ in 0..80 {
                let member = |rng: &mut Rng| format!("m{}", rng.below(12));
                let roll = rng.below(100);
                if roll < 60 {
                    // INCRBY, 1 to 3 pairs, increments -4..=4 (not 0), AT on a slot's
                    // first or last millisecond or inside it, up to 2 slots before the
                    // window.
                    let back = rng.below(12);
                    let slot = cur - back;
                    let ts = match rng.below(3) {
                        0 => slot * DAY,
                        1 => slot * DAY + DAY - 1,
                        _ => slot * DAY + rng.below(DAY),
                    }
                    .min(t0);
                    let npairs = 1 + rng.below(3);
                    let mut cmd = vec!["TSRANK.INCRBY".to_string(), board.to_string()];
                    let mut pairs = Vec::new();
                    for _ in 0..npairs {
                        let mut n = rng.below(9) - 4;
                        if n == 0 {
                            n = 1;
                        }
                        let m = member(&mut rng);
                        cmd.push(n.to_string());
                        cmd.push(m.clone());
                        pairs.push((n, m));
                    }
                    cmd.push("AT".into());
                    cmd.push(ts.to_string());
                    cmds.push(cmd);
                    expected.push(if slot < window.0 {
                        v_err(OUTSIDE)
                    } else {
                        match model.incrby(slot, &pairs, window) {
                            Some(replies) => ints(&replies),
                            None => v_err(BELOW_ZERO),
                        }
                    });
                } else if roll < 75 {
                    let n = 1 + rng.below(3);
                    let ms: Vec<String> = (0..n).map(|_| member(&mut rng)).collect();
                    let mut cmd = vec!["TSRANK.REM".to_string(), board.to_string()];
                    cmd.extend(ms.iter().cloned());
                    cmds.push(cmd);
                    expected.push(v_int(model.rem(&ms, window)));
                } else {
                    let m = member(&mut rng);
                    let ranked = RankModel::ranked(&model.totals(window.0, window.1));
                    let at = ranked.iter().position(|(name, _)| *name == m);
                    if rng.chance(50) {
                        cmds.push(strings(&["TSRANK.SCORE", board, &m]));
                        expected.push(at.map_or(v_nil(), |at| v_int(ranked[at].1)));
                    } else {
                        cmds.push(strings(&["TSRANK.RANK", board, &m]));
                        expected.push(at.map_or(v_nil(), |at| v_int(at as i64)));
                    }
                }
            }
            let got = pipeline(&mut conn, &cmds);
            for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
                assert_eq!(g, e, "{k} {board} round {round}: {:?}", cmds[i]);
            }
            assert_eq!(server_ms(&primary) / DAY, cur, "ran across a day edge");
            let ranked = RankModel::ranked(&model.totals(window.0, window.1));
            let top = primary.cmd_value(&["TSRANK.TOP", board, "100", "WITHSCORES"]);
            assert_eq!(member_totals(&top), ranked, "{k} {board} round {round} TOP");
            for days in [1i64, 3, 10] {
                let v = primary.cmd_value(&[
                    "TSRANK.TOP",
                    board,
                    "100",
                    "WITHSCORES",
                    "WINDOW",
                    &format!("{days}d"),
                ]);
                let want = RankModel::ranked(&model.totals(cur - days + 1, cur));
                assert_eq!(member_totals(&v), want, "{k} {board} WINDOW {days}d");
            }
            for i in 0..12 {
                let m = format!("m{i}");
                let v = primary.cmd_value(&["TSRANK.HISTORY", board, &m]);
                let want = model.history(&m, window.0, window.1, DAY);
                assert_eq!(history_rows(&v), want, "{k} {board} HISTORY {m}");
            }
            let info = map_pairs(&primary.cmd_value_resp3(&["TSRANK.INFO", board]));
            let info: BTreeMap<String, Value> = info.into_iter().collect();
            assert_eq!(info["members"], v_int(ranked.len() as i64), "{k} members");
            assert_eq!(
                info["slots"],
                v_int(model.live_slots(window.0, window.1) as i64),
                "{k} slots"
            );
            assert_no_zeros(&primary, board, &format!("{k} {board} round {round}"));
        }
    }
    wait_replica_synced(&primary, &replica);
    let before = assert_replica_equal(&primary, &replica, "after unlikes and removals");
    assert!(!before.is_empty());
    let mut primary = primary;
    primary.restart();
    assert_eq!(primary.dump_keyspace(), before, "{k}: AOF reload");
    replica.assert_alive();
}

per_server!(errors_refuse_whole_and_write_nothing);
fn errors_refuse_whole_and_write_nothing(kind: &ServerKind) {
    let k = &kind.name;
    let (primary, replica) = start_with_replica(kind);
    let srv = &primary;
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "lb", "3", "a", "2", "b"]),
        v_arr(vec![v_int(3), v_int(2)])
    );
    let before = srv.dump_keyspace();
    let offset = repl_offset(srv);
    for (cmd, err) in [
        (&["TSRANK.INCRBY", "lb", "-4", "a"][..], BELOW_ZERO),
        // The second pair would take b below 0: the first is not applied either.
        (
            &["TSRANK.INCRBY", "lb", "-1", "a", "-3", "b"][..],
            BELOW_ZERO,
        ),
        // Running order counts: a goes below 0 before it comes back.
        (
            &["TSRANK.INCRBY", "lb", "-5", "a", "5", "a"][..],
            BELOW_ZERO,
        ),
        (&["TSRANK.INCRBY", "lb", "-1", "new"][..], BELOW_ZERO),
        (&["TSRANK.INCRBY", "fresh", "-1", "a"][..], BELOW_ZERO),
        (
            &["TSRANK.INCRBY", "lb", "0", "a"][..],
            "ERR increment must be a non-zero integer",
        ),
        (
            &["TSRANK.INCRBY", "lb", "-9223372036854775808", "a"][..],
            "ERR increment or decrement would overflow",
        ),
        (
            &["TSRANK.REM", "lb"][..],
            "ERR wrong number of arguments for 'tsrank.rem' command",
        ),
    ] {
        assert_eq!(srv.cmd_value(cmd), v_err(err), "{k} {cmd:?}");
    }
    assert_eq!(srv.dump_keyspace(), before, "{k}: a refused call wrote");
    assert_eq!(repl_offset(srv), offset, "{k}: a refused call propagated");
    // Missing board: 0; WRONGTYPE for other types and plain sorted sets.
    assert_eq!(srv.cmd_value(&["TSRANK.REM", "missing", "a"]), v_int(0));
    assert!(!exists(srv, "missing|meta"), "{k}");
    srv.cmd(&["SET", "str", "x"]).expect("set");
    srv.cmd(&["ZADD", "plainz", "1", "a"]).expect("zadd");
    assert!(
        is_wrongtype(&srv.cmd_value(&["TSRANK.REM", "str", "a"])),
        "{k}"
    );
    assert!(
        is_wrongtype(&srv.cmd_value(&["TSRANK.REM", "plainz", "a"])),
        "{k}"
    );
    // Down to 0: the member leaves the ranking and its slot hash; the board's keys stay
    // exact.
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "lb", "-1", "a", "-2", "a"]),
        v_arr(vec![v_int(2), v_int(0)])
    );
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "lb", "a"]), v_nil());
    assert_eq!(srv.cmd_value(&["TSRANK.RANK", "lb", "b"]), v_int(0));
    assert_eq!(srv.cmd_value(&["TSRANK.HISTORY", "lb", "a"]), v_arr(vec![]));
    assert_no_zeros(srv, "lb", k);
    // REM counts each member with a non-zero total once.
    assert_eq!(srv.cmd_value(&["TSRANK.INCRBY", "lb", "4", "c"]), v_int(4));
    assert_eq!(
        srv.cmd_value(&["TSRANK.REM", "lb", "a", "b", "b", "zz"]),
        v_int(1)
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "lb", "10", "WITHSCORES"]),
        v_arr(vec![v_bulk("c"), v_int(4)])
    );
    assert_eq!(srv.cmd_value(&["TSRANK.REM", "lb", "c"]), v_int(1));
    assert_eq!(keys(srv, "lb*"), vec!["lb|meta".to_string()], "{k}");
    assert_eq!(srv.cmd_value(&["TSRANK.REM", "lb", "c"]), v_int(0));
    // A removed member comes back through a later INCRBY only.
    assert_eq!(srv.cmd_value(&["TSRANK.INCRBY", "lb", "2", "c"]), v_int(2));
    wait_replica_synced(&primary, &replica);
    assert_replica_equal(&primary, &replica, "after errors and removals");
}

per_server!(rem_fires_tsrank_rem_only_when_it_removed_something);
fn rem_fires_tsrank_rem_only_when_it_removed_something(kind: &ServerKind) {
    let k = &kind.name;
    let srv = Server::start(kind);
    srv.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Kz"])
        .expect("config");
    srv.cmd(&["TSRANK.INCRBY", "lb", "2", "a"]).expect("incr");
    let mut sub_conn = srv.conn();
    let mut pubsub = sub_conn.as_pubsub();
    pubsub.psubscribe("__keyspace@0__:*").expect("psubscribe");
    pubsub
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    assert_eq!(srv.cmd_value(&["TSRANK.REM", "lb", "nobody"]), v_int(0));
    assert_eq!(srv.cmd_value(&["TSRANK.REM", "missing", "a"]), v_int(0));
    let _ = srv.cmd_value(&["TSRANK.INCRBY", "lb", "-3", "a"]);
    assert_eq!(srv.cmd_value(&["TSRANK.INCRBY", "lb", "-1", "a"]), v_int(1));
    assert_eq!(srv.cmd_value(&["TSRANK.REM", "lb", "a"]), v_int(1));
    srv.cmd(&["ZADD", "sentinel", "1", "x"]).expect("zadd");
    let mut seen = Vec::new();
    let began = std::time::Instant::now();
    while began.elapsed() < Duration::from_secs(5) {
        let Ok(msg) = pubsub.get_message() else {
            continue;
        };
        let channel: String = msg.get_channel_name().to_string();
        let event: String = msg.get_payload().expect("payload");
        let key = channel.trim_start_matches("__keyspace@0__:").to_string();
        if key == "sentinel" {
            break;
        }
        seen.push((key, event));
    }
    assert_eq!(
        seen,
        vec![
            ("lb".to_string(), "tsrank.incrby".to_string()),
            ("lb".to_string(), "tsrank.rem".to_string())
        ],
        "{k}"
    );
}

per_server!(acl_on_slot_keys_and_hash_tags_in_cluster);
fn acl_on_slot_keys_and_hash_tags_in_cluster(kind: &ServerKind) {
    let k = &kind.name;
    let srv = Server::start(kind);
    srv.cmd(&["TSRANK.INCRBY", "lb", "3", "a"]).expect("incr");
    let mut no_slots = conn_as_user(&srv, "u", &["~lb", "~lb|meta"]);
    let mut no_meta = conn_as_user(&srv, "v", &["~lb", "~lb|slot|*"]);
    let mut all = conn_as_user(&srv, "w", &["~lb*"]);
    let before = srv.dump_keyspace();
    for conn in [&mut no_slots, &mut no_meta] {
        for cmd in [
            &["TSRANK.REM", "lb", "a"][..],
            &["TSRANK.INCRBY", "lb", "-1", "a"][..],
        ] {
            let v = conn_value(conn, cmd);
            assert!(
                error_text(&v).unwrap_or_default().starts_with("NOPERM"),
                "{k} {cmd:?}: {v:?}"
            );
        }
    }
    assert_eq!(srv.dump_keyspace(), before, "{k}: NOPERM wrote something");
    assert_eq!(
        conn_value(&mut all, &["TSRANK.INCRBY", "lb", "-1", "a"]),
        v_int(2)
    );
    assert_eq!(conn_value(&mut all, &["TSRANK.REM", "lb", "a"]), v_int(1));

    let node = cluster_node(kind);
    let err = NO_HASH_TAG;
    assert_eq!(
        node.cmd_value(&["TSRANK.REM", "lb", "a"]),
        v_err(err),
        "{k}"
    );
    assert_eq!(
        node.cmd_value(&["TSRANK.INCRBY", "{lb}", "2", "a", "1", "b"]),
        v_arr(vec![v_int(2), v_int(1)])
    );
    assert_eq!(
        node.cmd_value(&["TSRANK.INCRBY", "{lb}", "-2", "a"]),
        v_int(0)
    );
    assert_eq!(node.cmd_value(&["TSRANK.REM", "{lb}", "b"]), v_int(1));
    assert_eq!(node.cmd_value(&["TSRANK.TOP", "{lb}", "10"]), v_arr(vec![]));
    // GETKEYS names only the board's key.
    assert_eq!(
        node.cmd_value(&["COMMAND", "GETKEYS", "TSRANK.REM", "{lb}", "a", "b"]),
        v_bulks(&["{lb}"])
    );
}

per_server!(rem_and_unlikes_while_a_large_slot_is_subtracted_stay_exact);
fn rem_and_unlikes_while_a_large_slot_is_subtracted_stay_exact(kind: &ServerKind) {
    let k = &kind.name;
    let (srv, replica) = start_with_replica(kind);
    let mut conn = srv.conn();
    // A 2 s window of 1 s slots: a large slot (30000 members) written now leaves the window
    // within 3 s and is subtracted in steps; a few members also count in the next slot.
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "big", "WINDOW", "2s", "SLOT", "1s"]),
        v_ok()
    );
    let t = server_ms(&srv);
    let old = t / 1000;
    let mut cmds = Vec::new();
    for chunk in 0..30 {
        let mut cmd = strings(&["TSRANK.INCRBY", "big"]);
        for i in 0..1000 {
            cmd.push("2".into());
            cmd.push(format!("m{}", chunk * 1000 + i));
        }
        cmd.push("AT".into());
        cmd.push((old * 1000).to_string());
        cmds.push(cmd);
    }
    pipeline(&mut conn, &cmds);
    // Later slot: m0..m99 get 5 more (written once the old slot is the oldest of the two).
    assert!(wait_until(Duration::from_secs(3), || server_ms(&srv)
        / 1000
        > old));
    let later = server_ms(&srv);
    let mut cmd = strings(&["TSRANK.INCRBY", "big"]);
    for i in 0..100 {
        cmd.push("5".into());
        cmd.push(format!("m{i}"));
    }
    cmd.push("AT".into());
    cmd.push(later.to_string());
    srv.cmd(&cmd).expect("later");
    // Wait until the old slot has left the window, then act at once, while it is still
    // being subtracted (or just after: either way the replies are exact).
    assert!(wait_until(Duration::from_secs(4), || server_ms(&srv)
        / 1000
        >= old + 2));
    let replies = pipeline(
        &mut conn,
        &[
            strings(&["TSRANK.REM", "big", "m0", "m200"]),
            strings(&["TSRANK.INCRBY", "big", "-5", "m1", "AT", &later.to_string()]),
            strings(&["TSRANK.SCORE", "big", "m2"]),
            strings(&["TSRANK.SCORE", "big", "m1"]),
            strings(&["TSRANK.SCORE", "big", "m0"]),
            strings(&["TSRANK.SCORE", "big", "m300"]),
        ],
    );
    let now_slot = server_ms(&srv) / 1000;
    if now_slot <= later / 1000 + 1 {
        // m0 counts 5 in the later slot (still in the window); m200 only in the old one.
        assert_eq!(
            replies,
            vec![v_int(1), v_int(0), v_int(5), v_nil(), v_nil(), v_nil()],
            "{k}"
        );
    }
    // Once the old slot is subtracted: only the later slot's members remain, m0 and m1
    // gone.
    assert!(
        wait_until(Duration::from_secs(5), || !exists(
            &srv,
            format!("big|slot|{old}")
        )),
        "{k}"
    );
    if server_ms(&srv) / 1000 <= later / 1000 + 1 {
        let top = member_totals(&srv.cmd_value(&["TSRANK.TOP", "big", "1000", "WITHSCORES"]));
        assert_eq!(top.len(), 98, "{k}");
        assert!(
            top.iter().all(|(m, t)| *t == 5 && m != "m0" && m != "m1"),
            "{k}"
        );
    }
    assert_no_zeros(&srv, "big", k);
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, "after REM during a large expiry");
}

per_server!(rem_rebuilds_a_quarantined_board_and_the_member_stays_out);
/// A native `ZREM` only quarantines the board (the slots still count the member); REM
/// rebuilds it and removes the member everywhere, so the next INCRBY does not bring it
/// back.
fn rem_rebuilds_a_quarantined_board_and_the_member_stays_out(kind: &ServerKind) {
    let k = &kind.name;
    let (srv, replica) = start_with_replica(kind);
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "lb", "5", "a", "3", "b"]),
        v_arr(vec![v_int(5), v_int(3)])
    );
    assert_eq!(srv.cmd_value(&["ZREM", "lb", "a"]), v_int(1));
    assert!(
        wait_until(Duration::from_secs(2), || srv
            .cmd_value(&["HGET", "lb|meta", "_edited"])
            != v_nil()),
        "{k}: not quarantined"
    );
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "lb", "a"]), v_int(5), "{k}");
    assert_eq!(srv.cmd_value(&["TSRANK.REM", "lb", "a"]), v_int(1), "{k}");
    assert_no_zeros(&srv, "lb", k);
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "lb", "a"]), v_nil(), "{k}");
    assert_eq!(srv.cmd_value(&["TSRANK.INCRBY", "lb", "1", "b"]), v_int(4));
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "lb", "10", "WITHSCORES"]),
        v_arr(vec![v_bulk("b"), v_int(4)]),
        "{k}"
    );
    // Negative increments on a quarantined board rebuild it first too.
    assert_eq!(srv.cmd_value(&["ZADD", "lb", "100", "b"]), v_int(0));
    assert!(wait_until(Duration::from_secs(2), || srv
        .cmd_value(&["HGET", "lb|meta", "_edited"])
        != v_nil()));
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "lb", "-4", "b"]),
        v_int(0),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "lb", "10"]),
        v_arr(vec![]),
        "{k}"
    );
    assert_no_zeros(&srv, "lb", k);
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, "after REM on a quarantined board");
}
