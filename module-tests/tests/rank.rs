//! Integration tests of the TSRANK family against real servers (every `server_kinds()`).
//!
//! * a seeded model-based workload (members, increments, `AT` across the window) checked
//!   against a reference model: TOP (count, OFFSET, WITHSCORES, WINDOW), SCORE, RANK, ties
//!   ordered as `ZREVRANGE` orders them, and `ZREVRANGE key 0 -1` equal to TOP;
//! * real-time expiry with tiny slots, exact at every moment;
//! * a million-member slot expiring while another client PINGs (latency measured);
//! * replica equality, AOF/RDB reload equality, expiry resuming after restart and after
//!   promotion; DEL/UNLINK/EXPIRE/RENAME of the main key; errors with exact texts; RESP2
//!   and RESP3 shapes; ACL on derived keys; hash tags in cluster mode.
//!
//! Determinism: model tests use a 1h SLOT and `AT` timestamps well inside the window, so
//! they do not depend on the wall clock; real-time tests bracket each read between two
//! `TIME` calls and only assert when both give the same window.

use module_tests::*;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const OUTSIDE: &str = "ERR timestamp is outside the kept range";
const FUTURE: &str = "ERR timestamp is too far in the future";
const HOUR: i64 = 3_600_000;

// ================================================================= helpers

/// Flat `[member, total, ...]` reply (RESP2 WITHSCORES) or ZREVRANGE WITHSCORES as pairs.
fn pairs(v: &Value) -> Vec<(String, i64)> {
    let Value::Array(items) = v else {
        panic!("not an array: {v:?}")
    };
    items
        .chunks(2)
        .map(|c| {
            let total = value_text(&c[1]).expect("score");
            let total: f64 = total.parse().expect("number");
            (value_text(&c[0]).expect("member"), total as i64)
        })
        .collect()
}

fn members(v: &Value) -> Vec<String> {
    let Value::Array(items) = v else {
        panic!("not an array: {v:?}")
    };
    items
        .iter()
        .map(|m| value_text(m).expect("member"))
        .collect()
}

/// Keys matching `pattern`, sorted.
fn keys(srv: &Server, pattern: &str) -> Vec<String> {
    let mut k = members(&srv.cmd_value(&["KEYS", pattern]));
    k.sort();
    k
}

/// Reference model: slot index -> member -> count.
#[derive(Default)]
struct Model {
    slots: BTreeMap<i64, BTreeMap<String, i64>>,
}

impl Model {
    fn add(&mut self, slot: i64, member: &str, n: i64) {
        *self
            .slots
            .entry(slot)
            .or_default()
            .entry(member.to_string())
            .or_default() += n;
    }

    /// Totals over slots `from ..= to`.
    fn totals(&self, from: i64, to: i64) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for (_, counts) in self.slots.range(from..=to) {
            for (m, c) in counts {
                *out.entry(m.clone()).or_default() += c;
            }
        }
        out
    }

    /// Leaderboard order: total descending, ties by member descending (ZREVRANGE).
    fn ranked(totals: &BTreeMap<String, i64>) -> Vec<(String, i64)> {
        let mut v: Vec<(String, i64)> = totals
            .iter()
            .filter(|(_, t)| **t > 0)
            .map(|(m, t)| (m.clone(), *t))
            .collect();
        v.sort_by(|a, b| {
            b.1.cmp(&a.1)
                .then_with(|| b.0.as_bytes().cmp(a.0.as_bytes()))
        });
        v
    }
}

// ================================================================= model test

per_server!(model_random_workload_top_score_rank_window);
fn model_random_workload_top_score_rank_window(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let mut conn = srv.conn();
    for (seed, board) in [(7u64, "lb:a"), (99, "lb:b"), (12345, "lb:c")] {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        assert_eq!(
            srv.cmd_value(&["TSRANK.CREATE", board, "WINDOW", "24h", "SLOT", "1h"]),
            v_ok()
        );
        let t0 = server_ms(&srv);
        let cur = t0 / HOUR;
        let mut model = Model::default();
        for round in 0..6 {
            // A batch of writes: members m0..m29, increments 1..3, AT up to 20 h back.
            let mut cmds = Vec::new();
            let mut expected = Vec::new();
            for _ in 0..60 {
                let back = rng.below(21);
                let ts = (cur - back) * HOUR + rng.below(HOUR);
                let ts = ts.min(t0);
                let npairs = 1 + rng.below(3);
                let mut cmd = vec!["TSRANK.INCRBY".to_string(), board.to_string()];
                let mut replies = Vec::new();
                for _ in 0..npairs {
                    let m = format!("m{}", rng.below(30));
                    let n = 1 + rng.below(3);
                    model.add(ts / HOUR, &m, n);
                    replies.push(model.totals(cur - 23, cur)[&m]);
                    cmd.push(n.to_string());
                    cmd.push(m);
                }
                cmd.push("AT".into());
                cmd.push(ts.to_string());
                cmds.push(cmd);
                expected.push(match replies.as_slice() {
                    [one] => v_int(*one),
                    _ => v_arr(replies.iter().map(|r| v_int(*r)).collect()),
                });
            }
            assert_eq!(
                pipeline(&mut conn, &cmds),
                expected,
                "{k} {board} round {round}"
            );
            assert!(
                server_ms(&srv) / HOUR - 3 <= cur,
                "test ran across too many hours"
            );
            let now_slot = server_ms(&srv) / HOUR;
            let ranked = Model::ranked(&model.totals(now_slot - 23, now_slot));
            // Whole board.
            let top = srv.cmd_value(&["TSRANK.TOP", board, "1000", "WITHSCORES"]);
            assert_eq!(pairs(&top), ranked, "{k} {board} round {round}");
            let z = srv.cmd_value(&["ZREVRANGE", board, "0", "-1", "WITHSCORES"]);
            assert_eq!(pairs(&z), pairs(&top), "{k}: ZREVRANGE equals TOP");
            // Slices with OFFSET, with and without scores.
            for _ in 0..5 {
                let (count, offset) = (rng.below(12), rng.below(35));
                let want: Vec<(String, i64)> = ranked
                    .iter()
                    .skip(offset as usize)
                    .take(count as usize)
                    .cloned()
                    .collect();
                let v = srv.cmd_value(&[
                    "TSRANK.TOP",
                    board,
                    &count.to_string(),
                    "OFFSET",
                    &offset.to_string(),
                    "WITHSCORES",
                ]);
                assert_eq!(pairs(&v), want, "{k} {board} TOP {count} OFFSET {offset}");
                let v = srv.cmd_value(&[
                    "TSRANK.TOP",
                    board,
                    &count.to_string(),
                    "OFFSET",
                    &offset.to_string(),
                ]);
                assert_eq!(
                    members(&v),
                    want.iter().map(|p| p.0.clone()).collect::<Vec<_>>()
                );
            }
            // SCORE and RANK of every member (and of one that never appeared).
            for (pos, (m, total)) in ranked.iter().enumerate() {
                assert_eq!(
                    srv.cmd_value(&["TSRANK.SCORE", board, m]),
                    v_int(*total),
                    "{k} {m}"
                );
                assert_eq!(
                    srv.cmd_value(&["TSRANK.RANK", board, m]),
                    v_int(pos as i64),
                    "{k} {m}"
                );
            }
            assert_eq!(srv.cmd_value(&["TSRANK.SCORE", board, "nobody"]), v_nil());
            assert_eq!(srv.cmd_value(&["TSRANK.RANK", board, "nobody"]), v_nil());
            // Sub-windows from the slot hashes.
            for hours in [1i64, 2, 5, 12, 24] {
                let before = server_ms(&srv) / HOUR;
                let v = srv.cmd_value(&[
                    "TSRANK.TOP",
                    board,
                    "50",
                    "WITHSCORES",
                    "WINDOW",
                    &format!("{hours}h"),
                ]);
                let after = server_ms(&srv) / HOUR;
                if before != after {
                    continue; // an hour boundary passed during the query
                }
                let want = Model::ranked(&model.totals(before - hours + 1, before));
                let want: Vec<_> = want.into_iter().take(50).collect();
                assert_eq!(pairs(&v), want, "{k} {board} WINDOW {hours}h");
            }
            let info = srv.cmd_value(&["TSRANK.INFO", board]);
            let Value::Array(info) = info else {
                panic!("{info:?}")
            };
            assert_eq!(info[5], v_int(ranked.len() as i64), "{k} members");
        }
    }
    srv.assert_alive();
}

// ================================================================= real-time expiry

per_server!(realtime_expiry_with_tiny_slots);
/// Window of tiny slots: a member's total is exact at every moment, and it vanishes on
/// time from the sorted set and the derived keys.
fn realtime_expiry_with_tiny_slots(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "rt", "WINDOW", "1s", "SLOT", "200ms"]),
        v_ok()
    );
    // One event per slot for a while; the model knows when each slot leaves.
    let mut written: Vec<(i64, i64)> = Vec::new(); // (slot index, count)
    let start = Instant::now();
    let mut checked = 0;
    while start.elapsed() < Duration::from_millis(2600) {
        if start.elapsed() < Duration::from_millis(1400) {
            let t = server_ms(&srv);
            srv.cmd(&[
                "TSRANK.INCRBY",
                "rt",
                "2",
                "a",
                "1",
                "b",
                "AT",
                &t.to_string(),
            ])
            .expect("incrby");
            match written.last_mut() {
                Some((slot, n)) if *slot == t / 200 => *n += 1,
                _ => written.push((t / 200, 1)),
            }
        }
        let before = server_ms(&srv);
        let score = srv.cmd_value(&["TSRANK.SCORE", "rt", "a"]);
        let top = srv.cmd_value(&["TSRANK.TOP", "rt", "10", "WITHSCORES"]);
        let after = server_ms(&srv);
        let (sb, sa) = (before / 200, after / 200);
        if sb == sa {
            let n: i64 = written
                .iter()
                .filter(|(slot, _)| *slot > sb - 5)
                .map(|(_, n)| n)
                .sum();
            let want = if n > 0 { v_int(2 * n) } else { v_nil() };
            assert_eq!(score, want, "{k} at slot {sb}");
            let want_top = if n > 0 {
                vec![("a".to_string(), 2 * n), ("b".to_string(), n)]
            } else {
                vec![]
            };
            assert_eq!(pairs(&top), want_top, "{k} at slot {sb}");
            checked += 1;
        }
        std::thread::sleep(Duration::from_millis(15));
    }
    assert!(checked > 20, "{k}: only {checked} checks were unambiguous");
    // Everything left the window: all keys gone (no empty meta left behind).
    assert!(
        wait_until(Duration::from_secs(2), || keys(&srv, "rt*").is_empty()),
        "{k}: {:?}",
        keys(&srv, "rt*")
    );
    let stats = srv.info("tally");
    assert!(
        stats["tally_slots_expired"].parse::<i64>().unwrap() >= 5,
        "{k}: {stats:?}"
    );
}

// ================================================================= 1M-member slot

// Two million-member servers side by side would measure each other's load.
per_server!(one_kind_at_a_time: million_member_slot_expiry_keeps_ping_latency_low);
/// A slot with a million members expires in bounded steps: another client's PINGs keep
/// a low latency, and every member disappears.
fn million_member_slot_expiry_keeps_ping_latency_low(kind: &ServerKind) {
    const MEMBERS: usize = 1_000_000;
    let srv = Server::start(kind);
    let k = &kind.name;
    // 25 slots of 1 s: the populated slot leaves 25 s after its start (room for a slow,
    // busy machine to write the million members inside the window).
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "{big}", "WINDOW", "25s", "SLOT", "1s"]),
        v_ok()
    );
    let t0 = server_ms(&srv);
    let mut conn = srv.conn();
    let populate = Instant::now();
    let per_cmd = 1000;
    let mut cmds = Vec::new();
    for c in 0..MEMBERS / per_cmd {
        let mut cmd = vec!["TSRANK.INCRBY".to_string(), "{big}".to_string()];
        for i in 0..per_cmd {
            cmd.push("1".into());
            cmd.push(format!("member:{}", c * per_cmd + i));
        }
        cmd.push("AT".into());
        cmd.push(t0.to_string());
        cmds.push(cmd);
        if cmds.len() == 25 {
            for v in pipeline(&mut conn, &cmds) {
                assert!(matches!(v, Value::Array(_)), "{k}: {v:?}");
            }
            cmds.clear();
        }
    }
    let populated_in = populate.elapsed();
    assert_eq!(
        srv.query::<i64, _>(&["ZCARD", "{big}"]),
        MEMBERS as i64,
        "{k}"
    );
    let leaves = (t0 / 1000 + 15) * 1000;
    assert!(
        server_ms(&srv) < leaves,
        "{k}: populating took {populated_in:?}, too slow for the test"
    );
    // PING in a loop from before the slot leaves until every member is gone.
    let mut ping = srv.conn();
    let mut max_latency = Duration::ZERO;
    let mut pings = 0u64;
    let began = Instant::now();
    let mut gone_at = None;
    while began.elapsed() < Duration::from_secs(90) {
        let t = Instant::now();
        let _: String = redis::cmd("PING").query(&mut ping).expect("ping");
        let latency = t.elapsed();
        pings += 1;
        if server_ms(&srv) >= leaves {
            max_latency = max_latency.max(latency);
            if pings.is_multiple_of(50) && srv.query::<i64, _>(&["EXISTS", "{big}"]) == 0 {
                gone_at = Some(server_ms(&srv) - leaves);
                break;
            }
        }
    }
    let gone_at = gone_at.unwrap_or_else(|| panic!("{k}: the slot was not expired in 90 s"));
    let stats = srv.info("tally");
    println!(
            "{k}: 1M-member slot: populated in {populated_in:?}, expired within {gone_at} ms after leaving the window; \
             max PING latency during expiry {max_latency:?} over {pings} pings; tally_max_tick_us={}",
            stats["tally_max_tick_us"]
        );
    assert!(
        keys(&srv, "{big}*").is_empty(),
        "{k}: {:?}",
        keys(&srv, "{big}*")
    );
    assert!(
        max_latency < Duration::from_millis(100),
        "{k}: PING stalled {max_latency:?}"
    );
    srv.assert_alive();
}

// ================================================================= replication & persistence

fn write_mixed_workload(srv: &Server) {
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "long", "WINDOW", "24h", "SLOT", "1h"]),
        v_ok()
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "short", "WINDOW", "1s", "SLOT", "200ms"]),
        v_ok()
    );
    let t = server_ms(srv);
    for i in 0..40 {
        let m = format!("m{}", i % 13);
        srv.cmd(&[
            "TSRANK.INCRBY",
            "long",
            &(1 + i % 4).to_string(),
            &m,
            "AT",
            &(t - (i % 10) * HOUR).to_string(),
        ])
        .expect("incrby long");
        srv.cmd(&[
            "TSRANK.INCRBY",
            "short",
            &(1 + i % 3).to_string(),
            &m,
            "2",
            "x",
        ])
        .expect("incrby short");
    }
}

per_server!(replica_equals_primary_after_expiry);
fn replica_equals_primary_after_expiry(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    write_mixed_workload(&primary);
    assert_replica_equal(&primary, &replica, "after writes");
    // The short board expires on the primary only; the replica gets the effects.
    assert!(wait_until(Duration::from_secs(5), || keys(
        &primary, "short*"
    )
    .is_empty()));
    assert_replica_equal(&primary, &replica, "after expiry");
    assert!(keys(&replica, "short*").is_empty());
    assert_eq!(
        replica.cmd_value(&["TSRANK.TOP", "long", "100", "WITHSCORES"]),
        primary.cmd_value(&["TSRANK.TOP", "long", "100", "WITHSCORES"])
    );
}

per_server!(aof_and_rdb_reload_hold_the_same_data);
fn aof_and_rdb_reload_hold_the_same_data(kind: &ServerKind) {
    let mut srv = Server::start_with(kind, ServerOptions::new().config("appendonly", "yes"));
    write_mixed_workload(&srv);
    assert!(wait_until(Duration::from_secs(5), || keys(&srv, "short*").is_empty()));
    let before = srv.dump_keyspace();
    srv.restart();
    assert_eq!(srv.dump_keyspace(), before, "{}: AOF reload", kind.name);
    srv.restart_saving();
    assert_eq!(srv.dump_keyspace(), before, "{}: RDB reload", kind.name);
}

per_server!(expiry_resumes_after_restart_and_promotion);
fn expiry_resumes_after_restart_and_promotion(kind: &ServerKind) {
    let k = &kind.name;
    // Restart (RDB) before the slots leave: expiry picks up by itself.
    let mut srv = Server::start(kind);
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "r", "WINDOW", "2s", "SLOT", "1s"]),
        v_ok()
    );
    srv.cmd(&["TSRANK.INCRBY", "r", "5", "a", "3", "b"])
        .expect("incr");
    srv.restart_saving();
    assert_eq!(keys(&srv, "r*").len(), 3, "{k}: {:?}", keys(&srv, "r*"));
    assert!(
        wait_until(Duration::from_secs(5), || keys(&srv, "r*").is_empty()),
        "{k} after restart"
    );

    // A replica promoted with REPLICAOF NO ONE expires what it received.
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    assert_eq!(
        primary.cmd_value(&["TSRANK.CREATE", "p", "WINDOW", "2s", "SLOT", "1s"]),
        v_ok()
    );
    primary
        .cmd(&["TSRANK.INCRBY", "p", "5", "a"])
        .expect("incr");
    wait_replica_synced(&primary, &replica);
    assert_eq!(replica.cmd_value(&["REPLICAOF", "NO", "ONE"]), v_ok());
    drop(primary); // killed: nothing more comes from it
    assert_eq!(keys(&replica, "p*").len(), 3, "{k}");
    assert!(
        wait_until(Duration::from_secs(5), || keys(&replica, "p*").is_empty()),
        "{k} after promotion"
    );
}

// ================================================================= lifecycle of derived keys

per_server!(del_unlink_expire_rename_carry_derived_keys);
fn del_unlink_expire_rename_carry_derived_keys(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let fill = |name: &str| {
        let t = server_ms(&srv);
        srv.cmd(&[
            "TSRANK.INCRBY",
            name,
            "3",
            "a",
            "1",
            "b",
            "AT",
            &(t - HOUR).to_string(),
        ])
        .expect("incr");
        srv.cmd(&["TSRANK.INCRBY", name, "2", "b", "AT", &t.to_string()])
            .expect("incr");
    };
    let gone =
        |pattern: &str| wait_until(Duration::from_secs(1), || keys(&srv, pattern).is_empty());

    fill("d");
    assert_eq!(keys(&srv, "d*").len(), 4, "{k}: d, d|meta and two slots");
    assert_eq!(srv.cmd_value(&["DEL", "d"]), v_int(1));
    assert!(gone("d*"), "{k} DEL: {:?}", keys(&srv, "d*"));

    fill("u");
    assert_eq!(srv.cmd_value(&["UNLINK", "u"]), v_int(1));
    assert!(gone("u*"), "{k} UNLINK");

    fill("e");
    assert_eq!(srv.cmd_value(&["PEXPIRE", "e", "50"]), v_int(1));
    assert!(
        wait_until(Duration::from_secs(2), || keys(&srv, "e*").is_empty()),
        "{k} EXPIRE"
    );

    // RENAME: the whole board moves and reads on the new name are right at once.
    fill("r1");
    assert_eq!(srv.cmd_value(&["RENAME", "r1", "r2"]), v_ok());
    assert_eq!(
        pairs(&srv.cmd_value(&["TSRANK.TOP", "r2", "10", "WITHSCORES"])),
        vec![("b".into(), 3), ("a".into(), 3)]
    );
    assert!(gone("r1*"), "{k} RENAME source: {:?}", keys(&srv, "r1*"));
    assert_eq!(keys(&srv, "r2*").len(), 4, "{k}: {:?}", keys(&srv, "r2*"));
    assert_eq!(srv.cmd_value(&["TSRANK.INCRBY", "r2", "1", "a"]), v_int(4));

    // RENAME over an existing board replaces it entirely.
    srv.cmd(&["TSRANK.INCRBY", "r3", "7", "z"]).expect("incr");
    assert_eq!(srv.cmd_value(&["RENAME", "r2", "r3"]), v_ok());
    assert!(gone("r2*"));
    assert_eq!(
        srv.cmd_value(&["TSRANK.SCORE", "r3", "z"]),
        v_nil(),
        "{k}: old r3 data gone"
    );
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "r3", "a"]), v_int(4));
    assert!(
        wait_until(Duration::from_secs(1), || keys(&srv, "r3*").len() == 4),
        "{k}: {:?}",
        keys(&srv, "r3*")
    );

    // A plain key renamed over a board: the board's derived keys go.
    srv.cmd(&["TSRANK.INCRBY", "r4", "1", "z"]).expect("incr");
    srv.cmd(&["SET", "plain", "x"]).expect("set");
    assert_eq!(srv.cmd_value(&["RENAME", "plain", "r4"]), v_ok());
    assert!(
        wait_until(Duration::from_secs(1), || keys(&srv, "r4*")
            == vec!["r4".to_string()]),
        "{k}: {:?}",
        keys(&srv, "r4*")
    );

    // DEL then immediate re-creation never inherits old slots.
    fill("q");
    let _ = srv.cmd(&["DEL", "q"]);
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "q", "1", "a"]),
        v_int(1),
        "{k}"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "q", "a"]), v_int(1), "{k}");
    assert_eq!(keys(&srv, "q*").len(), 3, "{k}: {:?}", keys(&srv, "q*"));
    srv.assert_alive();
}

// ================================================================= errors

per_server!(errors_have_exact_texts_and_write_nothing);
fn errors_have_exact_texts_and_write_nothing(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    srv.cmd(&["TSRANK.INCRBY", "b", "1", "a"]).expect("incr");
    srv.cmd(&["SET", "str", "x"]).expect("set");
    srv.cmd(&["ZADD", "plainz", "1", "a"]).expect("zadd");
    srv.cmd(&["HSET", "notmeta", "f", "v"]).expect("hset");
    srv.cmd(&["SET", "badmeta|meta", "x"]).expect("set");
    let before = srv.dump_keyspace();
    let now = server_ms(&srv);
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            strings(&["TSRANK.CREATE"]),
            "ERR wrong number of arguments for 'tsrank.create' command",
        ),
        (
            strings(&["TSRANK.INCRBY", "b", "1"]),
            "ERR wrong number of arguments for 'tsrank.incrby' command",
        ),
        (
            strings(&["TSRANK.TOP", "b"]),
            "ERR wrong number of arguments for 'tsrank.top' command",
        ),
        (
            strings(&["TSRANK.SCORE", "b"]),
            "ERR wrong number of arguments for 'tsrank.score' command",
        ),
        (
            strings(&["TSRANK.SCORE", "b", "a", "c"]),
            "ERR wrong number of arguments for 'tsrank.score' command",
        ),
        (
            strings(&["TSRANK.RANK", "b"]),
            "ERR wrong number of arguments for 'tsrank.rank' command",
        ),
        (
            strings(&["TSRANK.INFO", "b", "x"]),
            "ERR wrong number of arguments for 'tsrank.info' command",
        ),
        (strings(&["TSRANK.CREATE", "b"]), "ERR key already exists"),
        (strings(&["TSRANK.CREATE", "str"]), "ERR key already exists"),
        (
            strings(&["TSRANK.CREATE", "n", "WINDOW"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "WINDOW", "1h", "WINDOW", "1h"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "FOO", "1h"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "WINDOW", "5x"]),
            "ERR invalid duration '5x'",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "SLOT", "0"]),
            "ERR invalid duration '0'",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "WINDOW", "1h", "SLOT", "7m"]),
            "ERR WINDOW must be a whole multiple of SLOT",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "WINDOW", "10001s", "SLOT", "1s"]),
            "ERR WINDOW can hold at most 10000 slots",
        ),
        (
            strings(&["TSRANK.INCRBY", "n", "x", "a"]),
            "ERR value is not an integer or out of range",
        ),
        (
            strings(&["TSRANK.INCRBY", "n", "0", "a"]),
            "ERR increment must be a positive integer",
        ),
        (
            strings(&["TSRANK.INCRBY", "n", "-3", "a"]),
            "ERR increment must be a positive integer",
        ),
        (
            strings(&["TSRANK.INCRBY", "n", "1", "a", "2"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.INCRBY", "n", "1", "a", "AT"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.INCRBY", "n", "1", "a", "AT", "x"]),
            "ERR value is not an integer or out of range",
        ),
        (
            strings(&["TSRANK.INCRBY", "n", "1", "a", "AT", "1", "2", "b"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.INCRBY", "b", "1", "a", "AT", "1"]),
            OUTSIDE,
        ),
        (
            strings(&[
                "TSRANK.INCRBY",
                "b",
                "1",
                "a",
                "AT",
                &(now - 25 * HOUR).to_string(),
            ]),
            OUTSIDE,
        ),
        (
            strings(&[
                "TSRANK.INCRBY",
                "b",
                "1",
                "a",
                "AT",
                &(now + 3_600_000).to_string(),
            ]),
            FUTURE,
        ),
        (
            strings(&["TSRANK.INCRBY", "b", "9007199254740993", "a"]),
            "ERR increment or decrement would overflow",
        ),
        (
            strings(&[
                "TSRANK.INCRBY",
                "b",
                "4503599627370496",
                "a",
                "4503599627370496",
                "a",
            ]),
            "ERR increment or decrement would overflow",
        ),
        (strings(&["TSRANK.INCRBY", "str", "1", "a"]), WRONGTYPE),
        (strings(&["TSRANK.INCRBY", "plainz", "1", "a"]), WRONGTYPE),
        (strings(&["TSRANK.INCRBY", "badmeta", "1", "a"]), WRONGTYPE),
        (strings(&["TSRANK.TOP", "str", "1"]), WRONGTYPE),
        (strings(&["TSRANK.TOP", "plainz", "1"]), WRONGTYPE),
        (strings(&["TSRANK.SCORE", "badmeta", "a"]), WRONGTYPE),
        (strings(&["TSRANK.INFO", "plainz"]), WRONGTYPE),
        (
            strings(&["TSRANK.TOP", "b", "x"]),
            "ERR value is not an integer or out of range",
        ),
        (
            strings(&["TSRANK.TOP", "b", "-1"]),
            "ERR value is not an integer or out of range",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "OFFSET", "-1"]),
            "ERR value is not an integer or out of range",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "OFFSET"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "WITHSCORES", "WITHSCORES"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "BOGUS"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "WINDOW", "1x"]),
            "ERR invalid duration '1x'",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "WINDOW", "90m"]),
            "ERR WINDOW must be a multiple of the leaderboard's SLOT, at most its WINDOW",
        ),
        (
            strings(&["TSRANK.TOP", "b", "1", "WINDOW", "48h"]),
            "ERR WINDOW must be a multiple of the leaderboard's SLOT, at most its WINDOW",
        ),
    ];
    for (cmd, want) in &cases {
        assert_eq!(srv.cmd_value(cmd), v_err(want), "{k}: {cmd:?}");
    }
    assert_eq!(srv.dump_keyspace(), before, "{k}: an error wrote something");
    // The configured defaults are checked too when a write auto-creates.
    srv.cmd(&["CONFIG", "SET", "tally.rank-slot", "7m"])
        .expect("config");
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "fresh", "1", "a"]),
        v_err("ERR WINDOW must be a whole multiple of SLOT")
    );
    assert_eq!(srv.dump_keyspace(), before, "{k}");
    srv.assert_alive();
}

// ================================================================= replies

per_server!(replies_in_resp2_and_resp3_and_config_defaults);
fn replies_in_resp2_and_resp3_and_config_defaults(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    // Auto-create takes tally.rank-window / tally.rank-slot.
    srv.cmd(&["CONFIG", "SET", "tally.rank-window", "2h"])
        .expect("config");
    srv.cmd(&["CONFIG", "SET", "tally.rank-slot", "30m"])
        .expect("config");
    let t = server_ms(&srv);
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "lb", "5", "a", "3", "b", "2", "a"]),
        v_arr(vec![v_int(5), v_int(3), v_int(7)])
    );
    assert_eq!(srv.cmd_value(&["TSRANK.INCRBY", "lb", "3", "c"]), v_int(3));
    let oldest = (t / 1_800_000) * 1_800_000;
    assert_eq!(
        srv.cmd_value(&["TSRANK.INFO", "lb"]),
        v_arr(vec![
            v_bulk("window"),
            v_int(7_200_000),
            v_bulk("slot"),
            v_int(1_800_000),
            v_bulk("members"),
            v_int(3),
            v_bulk("slots"),
            v_int(1),
            v_bulk("oldest"),
            v_int(oldest),
        ]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value_resp3(&["TSRANK.INFO", "lb"]),
        v_map(vec![
            (v_bulk("window"), v_int(7_200_000)),
            (v_bulk("slot"), v_int(1_800_000)),
            (v_bulk("members"), v_int(3)),
            (v_bulk("slots"), v_int(1)),
            (v_bulk("oldest"), v_int(oldest)),
        ])
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "lb", "2"]),
        v_bulks(&["a", "c"])
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "lb", "5", "WITHSCORES"]),
        v_arr(vec![
            v_bulk("a"),
            v_int(7),
            v_bulk("c"),
            v_int(3),
            v_bulk("b"),
            v_int(3)
        ])
    );
    assert_eq!(
        srv.cmd_value_resp3(&["TSRANK.TOP", "lb", "5", "WITHSCORES"]),
        v_arr(vec![
            v_arr(vec![v_bulk("a"), v_int(7)]),
            v_arr(vec![v_bulk("c"), v_int(3)]),
            v_arr(vec![v_bulk("b"), v_int(3)]),
        ])
    );
    assert_eq!(
        srv.cmd_value_resp3(&["TSRANK.TOP", "lb", "1", "OFFSET", "1"]),
        v_bulks(&["c"])
    );
    assert_eq!(srv.cmd_value(&["TSRANK.TOP", "lb", "0"]), v_arr(vec![]));
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "lb", "a"]), v_int(7));
    assert_eq!(srv.cmd_value_resp3(&["TSRANK.SCORE", "lb", "zz"]), v_nil());
    assert_eq!(srv.cmd_value(&["TSRANK.RANK", "lb", "b"]), v_int(2));
    // Missing keys: empty / nil.
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "none", "10", "WITHSCORES"]),
        v_arr(vec![])
    );
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "none", "a"]), v_nil());
    assert_eq!(srv.cmd_value(&["TSRANK.RANK", "none", "a"]), v_nil());
    assert_eq!(srv.cmd_value(&["TSRANK.INFO", "none"]), v_nil());
    assert_eq!(srv.cmd_value_resp3(&["TSRANK.INFO", "none"]), v_nil());
    // A created, empty board.
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "empty", "WINDOW", "1d", "SLOT", "1h"]),
        v_ok()
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.INFO", "empty"]),
        v_arr(vec![
            v_bulk("window"),
            v_int(86_400_000),
            v_bulk("slot"),
            v_int(3_600_000),
            v_bulk("members"),
            v_int(0),
            v_bulk("slots"),
            v_int(0),
            v_bulk("oldest"),
            v_nil(),
        ])
    );
    // Key layout: the sorted set of totals, the meta hash and one hash per slot.
    assert_eq!(
        keys(&srv, "lb*"),
        vec![
            "lb".to_string(),
            "lb|meta".into(),
            format!("lb|slot|{}", t / 1_800_000)
        ]
    );
    assert_eq!(
        srv.cmd_value(&["ZREVRANGE", "lb", "0", "9", "WITHSCORES"]),
        v_bulks(&["a", "7", "c", "3", "b", "3"])
    );
    assert_eq!(
        srv.cmd_value(&["HGET", &format!("lb|slot|{}", t / 1_800_000), "a"]),
        v_bulk("7")
    );
    let marker = value_text(&srv.cmd_value(&["HGET", "lb|meta", "_tally"])).unwrap();
    // `_tally` holds the settings only; the live slot range has its own field.
    assert_eq!(marker, "rank 7200000 1800000", "{k}");
    let i = t / 1_800_000;
    assert_eq!(
        srv.cmd_value(&["HGET", "lb|meta", "_slots"]),
        v_bulk(&format!("{i} {i}")),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["COMMAND", "GETKEYS", "TSRANK.INCRBY", "lb", "1", "a"]),
        v_bulks(&["lb"])
    );
}

// ================================================================= ACL and cluster

per_server!(acl_is_checked_on_derived_keys);
fn acl_is_checked_on_derived_keys(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    srv.cmd(&["TSRANK.INCRBY", "lb", "1", "a"]).expect("incr");
    // u may use lb and its slot hashes but not lb|meta; v may use lb and lb|meta only.
    let mut users = [
        ("u", conn_as_user(&srv, "u", &["~lb", "~lb|slot|*"])),
        ("v", conn_as_user(&srv, "v", &["~lb", "~lb|meta"])),
        ("w", conn_as_user(&srv, "w", &["~lb*"])),
    ];
    let before = srv.dump_keyspace();
    for (user, conn) in &mut users[..2] {
        let user = *user;
        for cmd in [
            &["TSRANK.INCRBY", "lb", "1", "a"][..],
            &["TSRANK.TOP", "lb", "10"][..],
            &["TSRANK.SCORE", "lb", "a"][..],
            &["TSRANK.INFO", "lb"][..],
        ] {
            let v = conn_value(conn, cmd);
            let text = error_text(&v).unwrap_or_default();
            if user == "v" && cmd[0] != "TSRANK.INCRBY" && cmd[0] != "TSRANK.INFO" {
                // Reads that need no slot hash are allowed for v.
                assert!(error_text(&v).is_none(), "{k} {user} {cmd:?}: {v:?}");
                continue;
            }
            assert!(text.starts_with("NOPERM"), "{k} {user} {cmd:?}: {v:?}");
        }
    }
    assert_eq!(srv.dump_keyspace(), before, "{k}: NOPERM wrote something");
    assert_eq!(
        conn_value(&mut users[2].1, &["TSRANK.INCRBY", "lb", "1", "a"]),
        v_int(2),
        "{k}"
    );
}

per_server!(cluster_mode_requires_a_hash_tag);
fn cluster_mode_requires_a_hash_tag(kind: &ServerKind) {
    let srv = Server::start_with(kind, ServerOptions::new().cluster(true));
    let slots: Vec<String> = (0..16384).map(|i| i.to_string()).collect();
    let mut cmd = vec!["CLUSTER".to_string(), "ADDSLOTS".to_string()];
    cmd.extend(slots);
    assert_eq!(srv.cmd_value(&cmd), v_ok());
    assert!(wait_until(Duration::from_secs(10), || {
        value_text(&srv.cmd_value(&["CLUSTER", "INFO"]))
            .unwrap_or_default()
            .contains("cluster_state:ok")
    }));
    let err = "ERR in cluster mode a leaderboard key must contain a hash tag, e.g. '{board}', so that its derived keys share its slot";
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "lb", "1", "a"]),
        v_err(err),
        "{}",
        kind.name
    );
    assert_eq!(srv.cmd_value(&["TSRANK.TOP", "lb", "1"]), v_err(err));
    assert_eq!(srv.cmd_value(&["TSRANK.CREATE", "lb{"]), v_err(err));
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "{lb}", "1", "a"]),
        v_int(1)
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "x{lb}y", "2", "a"]),
        v_int(2)
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "x{lb}y", "1", "WITHSCORES"]),
        v_arr(vec![v_bulk("a"), v_int(2)])
    );
    // Every key of a board is in one slot.
    let slot_of = |key: &str| srv.query::<i64, _>(&["CLUSTER", "KEYSLOT", key]);
    for key in keys(&srv, "x{lb}y*") {
        assert_eq!(slot_of(&key), slot_of("x{lb}y"), "{key}");
    }
}

// ================================================================= exactness mid-expiry

per_server!(replies_are_exact_while_an_expiry_is_in_progress);
/// While a big slot is still being subtracted (small expiry budget), replies are already
/// those of the new window: SCORE, TOP, RANK and INFO never count the departed slot.
fn replies_are_exact_while_an_expiry_is_in_progress(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    srv.cmd(&["CONFIG", "SET", "tally.expire-budget-us", "10"])
        .expect("config");
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "{x}", "WINDOW", "4s", "SLOT", "2s"]),
        v_ok()
    );
    let t0 = server_ms(&srv);
    let slot0 = t0 / 2000;
    // Old slot: 30000 members, a (150) and b (120); the next slot gets b 1, c 2.
    let mut conn = srv.conn();
    let mut cmds = Vec::new();
    for c in 0..30 {
        let mut cmd = strings(&["TSRANK.INCRBY", "{x}"]);
        for i in 0..1000 {
            cmd.push(((i % 7) + 1).to_string());
            cmd.push(format!("m{}", c * 1000 + i));
        }
        cmd.extend(strings(&["5", "a", "4", "b", "AT"]));
        cmd.push(t0.to_string());
        cmds.push(cmd);
    }
    pipeline(&mut conn, &cmds);
    // Wait for the next slot, then write to it.
    while server_ms(&srv) / 2000 == slot0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    srv.cmd(&["TSRANK.INCRBY", "{x}", "1", "b", "2", "c"])
        .expect("incr");
    // Slot0 leaves at (slot0 + 2) * 2000, the next slot 2 s later: poll in between.
    let leaves = (slot0 + 2) * 2000;
    let next_leaves = leaves + 2000;
    let mut seen_pending = false;
    loop {
        let before = server_ms(&srv);
        let top = srv.cmd_value(&["TSRANK.TOP", "{x}", "3", "WITHSCORES"]);
        let score_b = srv.cmd_value(&["TSRANK.SCORE", "{x}", "b"]);
        let rank_c = srv.cmd_value(&["TSRANK.RANK", "{x}", "c"]);
        let info = srv.cmd_value(&["TSRANK.INFO", "{x}"]);
        let zcard = srv.query::<i64, _>(&["ZCARD", "{x}"]);
        let after = server_ms(&srv);
        if after >= next_leaves {
            break;
        }
        if before >= leaves {
            assert_eq!(pairs(&top), vec![("c".into(), 2), ("b".into(), 1)], "{k}");
            assert_eq!(score_b, v_int(1), "{k}");
            assert_eq!(rank_c, v_int(0), "{k}");
            let Value::Array(info) = info else { panic!() };
            assert_eq!(info[5], v_int(2), "{k} members");
            seen_pending |= zcard > 2;
        } else if after < leaves {
            assert_eq!(score_b, v_int(121), "{k}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // With a 10 us budget the expiry is still running: it finishes by itself.
    srv.cmd(&["CONFIG", "SET", "tally.expire-budget-us", "1000"])
        .expect("config");
    assert!(
        wait_until(Duration::from_secs(30), || keys(&srv, "{x}*").is_empty()),
        "{k}: {:?}",
        keys(&srv, "{x}*")
    );
    assert!(
        seen_pending,
        "{k}: the expiry finished before any read could see it in progress"
    );
    srv.assert_alive();
}
