//! TSRANK.INCRBY trusts a board's meta it has verified instead of reading `key|meta` on
//! every write. Every way a user can change a meta hash must make the next write
//! read it again: for each native edit, a board whose meta was verified must answer exactly
//! what a board edited before any verification answers (and the exact replies expected
//! after that edit), and `check-caches` (on in every test server) must never have found a
//! stale copy. A meta field past its TTL answers as after its `HDEL`, whether the server
//! has reclaimed it yet or not.

use module_tests::*;
use std::time::Duration;

/// One native edit of the meta hash `meta` (`donor` is the meta of another board, with other
/// settings). `None`: the server does not have the command (hash field TTLs before 7.4).
fn edit(srv: &Server, name: &str, meta: &str, donor: &str) -> Option<()> {
    let run = |args: &[&str]| srv.cmd(args);
    let outcome = match name {
        "HDEL _tally" => run(&["HDEL", meta, "_tally"]),
        "HDEL _slots" => run(&["HDEL", meta, "_slots"]),
        "HSET _tally garbage" => run(&["HSET", meta, "_tally", "rank 1 x"]),
        "HSET _slots narrow" => run(&["HSET", meta, "_slots", "0 0"]),
        "DEL" => run(&["DEL", meta]),
        "UNLINK" => run(&["UNLINK", meta]),
        "RENAME away" => run(&["RENAME", meta, "elsewhere"]),
        "RENAME donor over" => run(&["RENAME", donor, meta]),
        "COPY donor over" => run(&["COPY", donor, meta, "REPLACE"]),
        "MOVE to db 1" => run(&["MOVE", meta, "1"]),
        "RESTORE donor over" => {
            let Ok(Value::BulkString(dump)) = srv.cmd(&["DUMP", donor]) else {
                panic!("{}: DUMP {donor} failed", srv.kind().name)
            };
            srv.cmd(&[
                b"RESTORE".as_slice(),
                meta.as_bytes(),
                b"0",
                &dump,
                b"REPLACE",
            ])
        }
        "PEXPIRE" => run(&["PEXPIRE", meta, "1"]),
        "HPEXPIRE _slots" => match run(&["HPEXPIRE", meta, "1", "FIELDS", "1", "_slots"]) {
            Err(e) if e.to_lowercase().contains("unknown command") => return None,
            other => other,
        },
        "SET string" => run(&["SET", meta, "x"]),
        _ => panic!("no edit {name}"),
    };
    outcome.unwrap_or_else(|e| panic!("{}: edit {name}: {e}", srv.kind().name));
    // Let a TTL run out (lazily: the next open expires it).
    std::thread::sleep(Duration::from_millis(5));
    Some(())
}

const EDITS: &[&str] = &[
    "HDEL _tally",
    "HDEL _slots",
    "HSET _tally garbage",
    "HSET _slots narrow",
    "DEL",
    "UNLINK",
    "RENAME away",
    "RENAME donor over",
    "COPY donor over",
    "MOVE to db 1",
    "RESTORE donor over",
    "PEXPIRE",
    "HPEXPIRE _slots",
    "SET string",
];

/// What a user sees of board `key` after the edit: reads (which use a verified meta too),
/// the next write, then reads.
fn after_edit(srv: &Server, key: &str) -> Vec<Value> {
    vec![
        srv.cmd_value(&["TSRANK.TOP", key, "10", "WITHSCORES"]),
        srv.cmd_value(&["TSRANK.SCORE", key, "m"]),
        srv.cmd_value(&["TSRANK.RANK", key, "m"]),
        srv.cmd_value(&["TSRANK.INFO", key]),
        srv.cmd_value(&["TSRANK.INCRBY", key, "1", "m"]),
        srv.cmd_value(&["TSRANK.INCRBY", key, "2", "n"]),
        srv.cmd_value(&["TSRANK.TOP", key, "10", "WITHSCORES"]),
        srv.cmd_value(&["TSRANK.SCORE", key, "m"]),
    ]
}

per_server!(every_native_edit_of_a_verified_meta_is_seen_by_the_next_write);
fn every_native_edit_of_a_verified_meta_is_seen_by_the_next_write(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start(kind);
    for (i, name) in EDITS.iter().enumerate() {
        let mut seen = Vec::new();
        // "cold": one write (a new board's meta is not verified yet) then the edit;
        // "verified": writes until the meta is trusted, then the same edit.
        for (label, writes) in [("cold", 1), ("verified", 3)] {
            let key = format!("{label}:{i}");
            let (meta, donor) = (format!("{key}|meta"), format!("donor:{label}:{i}"));
            assert_eq!(
                srv.cmd(&["TSRANK.CREATE", &donor, "WINDOW", "2h", "SLOT", "1m"]),
                Ok(v_ok()),
                "{k}"
            );
            let donor_meta = format!("{donor}|meta");
            for _ in 0..writes - 1 {
                srv.cmd(&["TSRANK.INCRBY", &key, "1", "m"]).expect("write");
            }
            let first = if writes == 1 { "3" } else { "1" };
            srv.cmd(&["TSRANK.INCRBY", &key, first, "m"])
                .expect("write");
            if edit(&srv, name, &meta, &donor_meta).is_none() {
                break;
            }
            seen.push(after_edit(&srv, &key));
        }
        if let [cold, verified] = seen.as_slice() {
            assert_eq!(cold, verified, "{k}: after {name}, cold vs verified board");
            assert_expected_after(&k, name, cold);
        }
    }
    assert_eq!(
        info_i64(&srv, "tally", "tally_cache_mismatches"),
        0,
        "{k}: check-caches found a stale meta"
    );
    srv.assert_alive();
}

/// How a field TTL put on a meta field runs out.
#[derive(Clone, Copy, Debug)]
enum Lapse {
    /// Its time has passed but the server has not reclaimed it: active expiry is off, and
    /// only tally's commands touch the meta (the server's hash field reads treat the field
    /// as absent; no event fires).
    Lazy,
    /// Reclaimed (by a native command or active expiry), which fires `hexpired`.
    Reclaimed,
}

per_server!(a_meta_field_past_its_ttl_answers_as_if_deleted);
/// A field TTL on `_slots` or `_tally` of a board's meta: once its time has passed, the
/// board answers exactly as after an `HDEL` of that field (the meta is put back), whether
/// the server has reclaimed the field yet or not, for a cold board and a verified one; the
/// replica ends equal. Servers without field TTLs (Redis 7.0) check the `HDEL` answers only.
fn a_meta_field_past_its_ttl_answers_as_if_deleted(kind: &ServerKind) {
    let k = kind.name.clone();
    let (srv, replica) = start_with_replica(kind);
    for field in ["_slots", "_tally"] {
        for (label, writes) in [("cold", 1), ("verified", 3)] {
            let board = |how: &str| {
                let key = format!("{how}:{field}:{label}");
                for _ in 0..writes - 1 {
                    srv.cmd(&["TSRANK.INCRBY", &key, "1", "m"]).expect("write");
                }
                let first = if writes == 1 { "3" } else { "1" };
                srv.cmd(&["TSRANK.INCRBY", &key, first, "m"])
                    .expect("write");
                let meta = format!("{key}|meta");
                (key, meta)
            };
            let (key, meta) = board("hdel");
            assert_eq!(srv.cmd_value(&["HDEL", &meta, field]), v_int(1), "{k}");
            let deleted = after_edit(&srv, &key);
            assert_usual_answers(&k, &format!("HDEL {field}, {label}"), &deleted);
            for lapse in [Lapse::Lazy, Lapse::Reclaimed] {
                let what = format!("{lapse:?} TTL on {field}, {label}");
                let (key, meta) = board(&format!("{lapse:?}"));
                if matches!(lapse, Lapse::Lazy) {
                    assert_eq!(srv.cmd_value(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), v_ok());
                }
                match srv.cmd(&["HPEXPIRE", &meta, "1", "FIELDS", "1", field]) {
                    Err(e) if e.to_lowercase().contains("unknown command") => {
                        assert_eq!(srv.cmd_value(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), v_ok());
                        break;
                    }
                    other => assert_eq!(other, Ok(v_arr(vec![v_int(1)])), "{k}: {what}"),
                }
                // (The jobs the HPEXPIRE queued, `_edited` among them, have run.)
                let len = srv.cmd_value(&["HLEN", &meta]);
                std::thread::sleep(Duration::from_millis(5));
                match lapse {
                    // The hash length still counts a field not reclaimed.
                    Lapse::Lazy => assert_eq!(srv.cmd_value(&["HLEN", &meta]), len, "{k}: {what}"),
                    // Reclaimed by this HEXISTS (Redis 8), or by active expiry (Valkey's
                    // HEXISTS reclaims nothing), after which tally put it back without TTL.
                    Lapse::Reclaimed => assert!(
                        wait_until(Duration::from_secs(5), || {
                            let gone = srv.cmd_value(&["HEXISTS", &meta, field]) == v_int(0)
                                && srv.cmd_value(&["HLEN", &meta]) != len;
                            gone || srv.cmd_value(&["HPTTL", &meta, "FIELDS", "1", field])
                                == v_arr(vec![v_int(-1)])
                        }),
                        "{k}: {what}: never reclaimed"
                    ),
                }
                let lapsed = after_edit(&srv, &key);
                assert_eq!(srv.cmd_value(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), v_ok());
                assert_eq!(lapsed, deleted, "{k}: {what} vs HDEL {field}");
            }
        }
    }
    // A write as the first command after the lapse: TSRANK.REM, TSRANK.INCRBY.
    let firsts: [(&str, &[&str], [Value; 2]); 2] = [
        ("TSRANK.REM", &["m"], [v_int(1), v_nil()]),
        ("TSRANK.INCRBY", &["1", "m"], [v_int(4), v_int(4)]),
    ];
    for (command, args, expected) in firsts {
        for how in ["HDEL", "Lazy"] {
            let what = format!("{command} first after {how} of _slots");
            let key = format!("first:{command}:{how}");
            let meta = format!("{key}|meta");
            srv.cmd(&["TSRANK.INCRBY", &key, "3", "m"]).expect("write");
            if how == "HDEL" {
                assert_eq!(srv.cmd_value(&["HDEL", &meta, "_slots"]), v_int(1), "{k}");
            } else {
                assert_eq!(srv.cmd_value(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), v_ok());
                if srv
                    .cmd(&["HPEXPIRE", &meta, "1", "FIELDS", "1", "_slots"])
                    .is_err()
                {
                    assert_eq!(srv.cmd_value(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), v_ok());
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let mut cmd = vec![command, key.as_str()];
            cmd.extend(args);
            let replies = [
                srv.cmd_value(&cmd),
                srv.cmd_value(&["TSRANK.SCORE", &key, "m"]),
            ];
            assert_eq!(srv.cmd_value(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), v_ok());
            assert_eq!(replies, expected, "{k}: {what}");
        }
    }
    assert_eq!(
        info_i64(&srv, "tally", "tally_cache_mismatches"),
        0,
        "{k}: check-caches found a stale meta"
    );
    // The metas put back reach the replica as they are on the primary.
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, &format!("{k}: metas past a field TTL"));
    srv.assert_alive();
}

/// Checks the replies of [`after_edit`] for a board of one member `m` with a total of 3
/// whose meta was put back after an edit: the usual answers, never an error.
fn assert_usual_answers(k: &str, what: &str, replies: &[Value]) {
    let expected = [
        (0, v_arr(vec![v_bulk("m"), v_int(3)])),
        (1, v_int(3)),
        (2, v_int(0)),
        (4, v_int(4)),
        (5, v_int(2)),
        (6, v_arr(vec![v_bulk("m"), v_int(4), v_bulk("n"), v_int(2)])),
        (7, v_int(4)),
    ];
    assert_replies(k, what, replies, &expected, Some(1));
}

/// Checks the replies of [`after_edit`] at the indices of `expected`, and the `members`
/// field of `TSRANK.INFO` (`None`: INFO answers nil, no board).
fn assert_replies(
    k: &str,
    what: &str,
    replies: &[Value],
    expected: &[(usize, Value)],
    members: Option<i64>,
) {
    for (i, want) in expected {
        assert_eq!(
            replies.get(*i),
            Some(want),
            "{k}: after {what}, reply {i}: {replies:?}"
        );
    }
    let info = match (replies.get(3), members) {
        (Some(Value::Nil), None) => return,
        (Some(info @ (Value::Array(_) | Value::Map(_))), Some(_)) => map_pairs(info),
        (other, _) => panic!("{k}: after {what}, TSRANK.INFO gave {other:?}"),
    };
    assert!(
        info.iter()
            .any(|(f, v)| f == "members" && Some(v) == members.map(v_int).as_ref()),
        "{k}: after {what}, TSRANK.INFO: {info:?}"
    );
}

/// The exact replies of [`after_edit`] after the native edit `name` (the same for a cold
/// board and a verified one: equal errors must not pass for equal answers).
fn assert_expected_after(k: &str, name: &str, replies: &[Value]) {
    // The board, emptied or gone, then two writes.
    let fresh = |info_members: Option<i64>| {
        let expected = [
            (0, v_arr(vec![])),
            (1, v_nil()),
            (2, v_nil()),
            (4, v_int(1)),
            (5, v_int(2)),
            (6, v_arr(vec![v_bulk("n"), v_int(2), v_bulk("m"), v_int(1)])),
            (7, v_int(1)),
        ];
        assert_replies(k, name, replies, &expected, info_members);
    };
    match name {
        // The meta is put back (with the board quarantined): the board answers as before.
        "HDEL _tally"
        | "HDEL _slots"
        | "HSET _tally garbage"
        | "DEL"
        | "UNLINK"
        | "RENAME away"
        | "MOVE to db 1"
        | "HPEXPIRE _slots" => assert_usual_answers(k, name, replies),
        // A valid meta whose range (or settings) holds none of the board's slots.
        "HSET _slots narrow" | "RENAME donor over" | "COPY donor over" | "RESTORE donor over" => {
            fresh(Some(0))
        }
        // The board goes whole with its meta.
        "PEXPIRE" => fresh(None),
        // A string in place of the meta: the sorted set is no leaderboard.
        "SET string" => {
            let wrongtype =
                v_err("WRONGTYPE Operation against a key holding the wrong kind of value");
            assert!(
                replies.iter().all(|r| *r == wrongtype),
                "{k}: after {name}: {replies:?}"
            );
        }
        _ => panic!("no expected replies for {name}"),
    }
}

per_server!(a_meta_changed_by_the_new_primary_is_read_after_failing_back);
/// A replica takes no keyspace action of its own (no quarantine, no jobs), but the
/// primary's effects on a meta hash must still drop the copy it verified while it was the
/// primary itself: after a failover and a partial resync, the new primary's write to an
/// older slot moves the board's range; failing back, the old primary must read it.
fn a_meta_changed_by_the_new_primary_is_read_after_failing_back(kind: &ServerKind) {
    let k = kind.name.clone();
    let (a, b) = (Server::start(kind), Server::start(kind));
    b.replicate_from(&a);
    wait_replica_synced(&a, &b);
    for _ in 0..3 {
        a.cmd(&["TSRANK.INCRBY", "b", "1", "m"]).expect("write");
    }
    wait_replica_synced(&a, &b);
    // Fail over to b; a follows b (a partial resync: a keeps what it knew in memory).
    assert_eq!(b.cmd(&["REPLICAOF", "NO", "ONE"]), Ok(v_ok()), "{k}");
    a.replicate_from(&b);
    wait_replica_synced(&b, &a);
    let hour_ago = now_ms(&b) - 3_600_000;
    b.cmd(&[
        "TSRANK.INCRBY",
        "b",
        "5",
        "old",
        "AT",
        &hour_ago.to_string(),
    ])
    .expect("write to an older slot");
    wait_replica_synced(&b, &a);
    // Fail back to a.
    assert_eq!(a.cmd(&["REPLICAOF", "NO", "ONE"]), Ok(v_ok()), "{k}");
    let on_a = after_edit(&a, "b");
    let on_b = after_edit(&b, "b");
    assert_eq!(
        on_a, on_b,
        "{k}: failed-back primary vs the one it followed"
    );
    for srv in [&a, &b] {
        assert_eq!(info_i64(srv, "tally", "tally_cache_mismatches"), 0, "{k}");
    }
}

/// The server's clock in ms.
fn now_ms(srv: &Server) -> i64 {
    let Ok(Value::Array(parts)) = srv.cmd(&["TIME"]) else {
        panic!("TIME failed")
    };
    let num = |v: Option<&Value>| match v {
        Some(Value::BulkString(b)) => String::from_utf8_lossy(b).parse::<i64>().unwrap_or(0),
        _ => 0,
    };
    num(parts.first()) * 1000 + num(parts.get(1)) / 1000
}
