//! TSRANK.INCRBY trusts a board's meta it has verified instead of reading `key|meta` on
//! every write. Every way a user can change a meta hash must make the next write
//! read it again: for each native edit, a board whose meta was verified must answer exactly
//! what a board edited before any verification answers, and `check-caches` (on in every
//! test server) must never have found a stale copy.

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
        }
    }
    assert_eq!(
        info_i64(&srv, "tally", "tally_cache_mismatches"),
        0,
        "{k}: check-caches found a stale meta"
    );
    srv.assert_alive();
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
