//! STATS read cache: after every way a statistics hash can change behind a
//! warm cache — a user's HSET/HDEL of a closed period, DEL, RENAME, FLUSHALL, SWAPDB,
//! DEBUG RELOAD, effects arriving on a replica, the expiry timer dropping periods —
//! STATS.GET and STATS.QUANTILE answer what a cold read of the same data answers (the
//! same hash restored under a name never read).

use std::time::Duration;

use module_tests::*;

const HOUR: i64 = 3_600_000;

/// The reads the cache serves, on `key`.
fn reads(key: &str) -> Vec<Vec<String>> {
    [
        vec!["STATS.GET", key],
        vec!["STATS.GET", key, "WINDOW", "3h"],
        vec!["STATS.GET", key, "WINDOW", "24h"],
        vec!["STATS.QUANTILE", key, "0.5", "0.9", "WINDOW", "3h"],
    ]
    .iter()
    .map(|c| c.iter().map(|s| s.to_string()).collect())
    .collect()
}

fn answers(conn: &mut redis::Connection, key: &str) -> Vec<Value> {
    reads(key).iter().map(|c| conn_value(conn, c)).collect()
}

/// What a cold read answers: the hash copied by DUMP/RESTORE to a name never read.
fn cold(conn: &mut redis::Connection, key: &str) -> Vec<Value> {
    let tmp = format!("cold:{key}");
    let dump = conn_value(conn, &["DUMP", key]);
    let out = match dump {
        Value::BulkString(bytes) => {
            let restored = conn_value(
                conn,
                &[
                    b"RESTORE".to_vec(),
                    tmp.as_bytes().to_vec(),
                    b"0".to_vec(),
                    bytes,
                    b"REPLACE".to_vec(),
                ],
            );
            assert_eq!(restored, v_ok());
            answers(conn, &tmp)
        }
        _ => answers(conn, "cold:missing"),
    };
    conn_value(conn, &["DEL", tmp.as_str()]);
    out
}

/// Runs `body` until an hour boundary does not fall inside it (the windows move then).
fn in_one_hour(srv: &Server, mut body: impl FnMut(i64)) {
    for _ in 0..3 {
        let hour = server_ms(srv).div_euclid(HOUR);
        body(hour * HOUR);
        if server_ms(srv).div_euclid(HOUR) == hour {
            return;
        }
    }
    panic!("the hour changed during three consecutive runs");
}

/// An object with 10 values in each of the current and the 3 previous hours (distinct
/// values per call of `seed`).
fn fill(conn: &mut redis::Connection, key: &str, now: i64, seed: u32) {
    assert_eq!(
        conn_value(conn, &["STATS.CREATE", key, "PERIOD", "1h", "KEEP", "24"]),
        v_ok()
    );
    for h in 0..4 {
        let mut c = vec!["STATS.ADD".to_string(), key.to_string()];
        c.extend((0..10).map(|i| format!("{}", seed * 1000 + h * 10 + i)));
        c.push("AT".into());
        c.push((now - i64::from(h) * HOUR).to_string());
        assert_eq!(conn_value(conn, &c), v_int(10));
    }
}

#[track_caller]
fn assert_cold(conn: &mut redis::Connection, key: &str, what: &str) {
    let warm = answers(conn, key);
    assert_eq!(warm, cold(conn, key), "{what}");
}

per_server!(reads_after_changes_equal_cold_reads);
fn reads_after_changes_equal_cold_reads(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let mut conn = srv.conn();
    let c = &mut conn;
    in_one_hour(&srv, |now| {
        assert_eq!(conn_value(c, &["FLUSHALL"]), v_ok());
        let closed = (now.div_euclid(HOUR) - 1) * HOUR;
        let m = format!("{closed}:m");
        let q = format!("{closed}:q");

        fill(c, "s", now, 1);
        assert_cold(c, "s", &format!("{k}: filled"));
        // A user's HSET of a closed period (garbage: the period counts as empty).
        answers(c, "s");
        assert_eq!(conn_value(c, &["HSET", "s", m.as_str(), "junk"]), v_int(0));
        assert_cold(c, "s", &format!("{k}: HSET of a closed period"));
        // A user's HDEL of a closed period, on a fresh object.
        conn_value(c, &["DEL", "s"]);
        fill(c, "s", now, 2);
        answers(c, "s");
        assert_eq!(conn_value(c, &["HDEL", "s", q.as_str()]), v_int(1));
        assert_cold(c, "s", &format!("{k}: HDEL of a closed period"));
        // STATS.ADD to a closed period, then to the current one.
        answers(c, "s");
        let at = closed.to_string();
        assert_eq!(
            conn_value(c, &["STATS.ADD", "s", "7", "AT", at.as_str()]),
            v_int(1)
        );
        assert_cold(c, "s", &format!("{k}: ADD to a closed period"));
        assert!(matches!(
            conn_value(c, &["STATS.ADD", "s", "9"]),
            Value::Int(_)
        ));
        assert_cold(c, "s", &format!("{k}: ADD to the current period"));
        // DEL.
        answers(c, "s");
        conn_value(c, &["DEL", "s"]);
        assert_eq!(answers(c, "s"), vec![v_nil(); 4], "{k}: DEL");
        // RENAME over a cached object.
        fill(c, "a", now, 3);
        fill(c, "b", now, 4);
        let a_before = answers(c, "a");
        answers(c, "b");
        assert_eq!(conn_value(c, &["RENAME", "a", "b"]), v_ok());
        assert_eq!(answers(c, "b"), a_before, "{k}: RENAME");
        assert_cold(c, "b", &format!("{k}: RENAME"));
        // FLUSHALL, then the same object created again: only its current period is
        // written, so closed periods cached before the flush would show.
        answers(c, "b");
        assert_eq!(conn_value(c, &["FLUSHALL"]), v_ok());
        assert_eq!(
            conn_value(c, &["STATS.CREATE", "b", "PERIOD", "1h", "KEEP", "24"]),
            v_ok()
        );
        assert_eq!(conn_value(c, &["STATS.ADD", "b", "1"]), v_int(1));
        assert_cold(c, "b", &format!("{k}: FLUSHALL"));
        // SWAPDB: the same name in two databases, both cached.
        conn_value(c, &["FLUSHALL"]);
        fill(c, "s", now, 5);
        let db0 = answers(c, "s");
        conn_value(c, &["SELECT", "1"]);
        fill(c, "s", now, 6);
        let db1 = answers(c, "s");
        assert_ne!(db0, db1);
        conn_value(c, &["SELECT", "0"]);
        assert_eq!(answers(c, "s"), db0);
        assert_eq!(conn_value(c, &["SWAPDB", "0", "1"]), v_ok());
        assert_eq!(answers(c, "s"), db1, "{k}: SWAPDB, db 0");
        conn_value(c, &["SELECT", "1"]);
        assert_eq!(answers(c, "s"), db0, "{k}: SWAPDB, db 1");
        conn_value(c, &["SELECT", "0"]);
        // DEBUG RELOAD NOSAVE: the data reverts to the last save, with no key event.
        conn_value(c, &["FLUSHALL"]);
        fill(c, "s", now, 7);
        let saved = answers(c, "s");
        assert_eq!(conn_value(c, &["SAVE"]), v_ok());
        let at = closed.to_string();
        conn_value(c, &["STATS.ADD", "s", "123456", "AT", at.as_str()]);
        let changed = answers(c, "s");
        assert_ne!(saved, changed);
        assert_eq!(conn_value(c, &["DEBUG", "RELOAD", "NOSAVE"]), v_ok());
        assert_eq!(answers(c, "s"), saved, "{k}: DEBUG RELOAD NOSAVE");
        assert_cold(c, "s", &format!("{k}: DEBUG RELOAD NOSAVE"));
    });
}

per_server!(replica_reads_follow_the_primary);
fn replica_reads_follow_the_primary(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    let k = &kind.name;
    let (mut p, mut r) = (primary.conn(), replica.conn());
    in_one_hour(&primary, |now| {
        conn_value(&mut p, &["FLUSHALL"]);
        let closed = (now.div_euclid(HOUR) - 1) * HOUR;
        fill(&mut p, "s", now, 1);
        wait_replica_synced(&primary, &replica);
        assert_eq!(answers(&mut r, "s"), cold(&mut p, "s"), "{k}: synced");
        let at = closed.to_string();
        let m = format!("{closed}:m");
        // tally's writes arrive on the replica as HSET effects; a user's HSET as itself.
        for change in [
            vec!["STATS.ADD", "s", "5", "AT", at.as_str()],
            vec!["STATS.ADD", "s", "6"],
            vec!["HSET", "s", m.as_str(), "junk"],
            vec!["DEL", "s"],
        ] {
            answers(&mut r, "s");
            conn_value(&mut p, &change);
            wait_replica_synced(&primary, &replica);
            assert_eq!(
                answers(&mut r, "s"),
                cold(&mut p, "s"),
                "{k}: replica after {change:?}"
            );
        }
    });
}

per_server!(periods_dropped_by_the_timer_are_not_read);
fn periods_dropped_by_the_timer_are_not_read(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let mut c = srv.conn();
    assert_eq!(
        conn_value(
            &mut c,
            &["STATS.CREATE", "t", "PERIOD", "200ms", "KEEP", "2"]
        ),
        v_ok()
    );
    let window = ["STATS.GET", "t", "WINDOW", "400ms"];
    for round in 0..6 {
        conn_value(&mut c, &["STATS.ADD", "t", "1", "2", "3"]);
        let warm = conn_value(&mut c, &window);
        assert!(matches!(warm, Value::Array(_)), "{k}: {warm:?}");
        std::thread::sleep(Duration::from_millis(150));
        // A read at the same moment as a cold one (retried if a period boundary passed).
        let mut same = false;
        for _ in 0..5 {
            let before = server_ms(&srv).div_euclid(200);
            let dump = conn_value(&mut c, &["DUMP", "t"]);
            let warm = conn_value(&mut c, &window);
            let cold = match dump {
                Value::BulkString(bytes) => {
                    conn_value(
                        &mut c,
                        &[
                            b"RESTORE".to_vec(),
                            b"t:cold".to_vec(),
                            b"0".to_vec(),
                            bytes,
                            b"REPLACE".to_vec(),
                        ],
                    );
                    let v = conn_value(&mut c, &["STATS.GET", "t:cold", "WINDOW", "400ms"]);
                    conn_value(&mut c, &["DEL", "t:cold"]);
                    v
                }
                _ => v_nil(),
            };
            if server_ms(&srv).div_euclid(200) == before {
                assert_eq!(warm, cold, "{k}: round {round}");
                same = true;
                break;
            }
        }
        assert!(same, "{k}: no read inside one period");
    }
    // Once every period left, the timer deletes the key and reads answer nil.
    assert!(
        wait_until(Duration::from_secs(5), || !exists(&srv, "t")),
        "{k}: the timer did not drop the periods"
    );
    assert_eq!(conn_value(&mut c, &["STATS.GET", "t"]), v_nil(), "{k}");
}

/// An object of one-minute periods holding `periods` of them (the newest at `now`), one
/// value each, written in one pipeline.
fn fill_minutes(conn: &mut redis::Connection, key: &str, now: i64, periods: i64) {
    assert_eq!(
        conn_value(conn, &["STATS.CREATE", key, "PERIOD", "1m", "KEEP", "2000"]),
        v_ok()
    );
    let mut pipe = redis::pipe();
    for i in 0..periods {
        pipe.cmd("STATS.ADD")
            .arg(key)
            .arg((i % 97 + 1).to_string())
            .arg("AT")
            .arg(now - i * 60_000)
            .ignore();
    }
    let () = pipe.query(conn).expect("STATS.ADD pipeline");
}

/// Reads answered by the cache and reads merged from the hash, from `INFO tally`.
fn cache_reads(srv: &Server) -> (i64, i64) {
    (
        info_i64(srv, "tally", "tally_stats_cache_hits"),
        info_i64(srv, "tally", "tally_stats_cache_misses"),
    )
}

per_server!(a_repeated_read_of_a_long_window_is_served_from_the_cache);
/// The second identical read of a 1990-period window on unchanged data is served from the
/// read cache on every server: `INFO tally` counts it as a hit and no miss, and the
/// server's time for it (`INFO commandstats`, less the time the machine took from the
/// server) is a small part of what merging the periods costs (2.9 ms a call on Valkey 9
/// when its cache never kept such an object). The same for `MGET` and `MQUANTILE`, and
/// for an object in a database where another key has field TTLs, where the servers that
/// answer for a whole hash at once (Redis 8) still cache it.
fn a_repeated_read_of_a_long_window_is_served_from_the_cache(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let mut conn = srv.conn();
    let c = &mut conn;
    let reads: [&[&str]; 3] = [
        &["STATS.GET", "s", "WINDOW", "1990m"],
        &["STATS.MGET", "2", "s", "s", "WINDOW", "1990m"],
        &[
            "STATS.MQUANTILE",
            "1",
            "s",
            "0.5",
            "0.99",
            "WINDOW",
            "1990m",
        ],
    ];
    // Retried when a minute boundary passes between the reads (the window moves then).
    let mut checked = false;
    for _ in 0..3 {
        let minute = server_ms(&srv).div_euclid(60_000);
        conn_value(c, &["DEL", "s"]);
        fill_minutes(c, "s", minute * 60_000, 1990);
        let mut timings = Vec::new();
        for read in reads {
            let first = conn_value(c, read);
            assert!(
                matches!(first, Value::Array(_) | Value::Map(_)),
                "{k}: {first:?}"
            );
            let before = cache_reads(&srv);
            assert_eq!(srv.cmd_value(&["CONFIG", "RESETSTAT"]), v_ok());
            let lost = Lost::start(&srv);
            let second = conn_value(c, read);
            let held = usec_per_call_held(&srv, &read[0].to_lowercase(), &lost);
            let after = cache_reads(&srv);
            assert_eq!(second, first, "{k}: {read:?}");
            timings.push((read, before, after, held));
        }
        if server_ms(&srv).div_euclid(60_000) != minute {
            continue;
        }
        for (read, before, after, held) in timings {
            assert_eq!(
                after.1, before.1,
                "{k}: {read:?} merged from the hash again"
            );
            assert!(after.0 > before.0, "{k}: {read:?} not counted as a hit");
            assert!(
                held < 1000.0,
                "{k}: {read:?} took {held:.0} us of server time"
            );
        }
        checked = true;
        break;
    }
    assert!(checked, "{k}: a minute boundary passed during every try");
    // Another key with a field TTL in the database: the answers stay those of the data,
    // and where the server answers for the whole hash at once the cache still serves.
    if srv.cmd_value(&["HSET", "other", "f", "1"]) == v_int(1)
        && matches!(
            srv.cmd_value(&["HPEXPIRE", "other", "600000", "FIELDS", "1", "f"]),
            Value::Array(_)
        )
    {
        let minute = server_ms(&srv).div_euclid(60_000);
        let first = conn_value(c, reads[0]);
        let second = conn_value(c, reads[0]);
        assert_eq!(first, second, "{k}: with a field TTL elsewhere");
        let cold = {
            let Value::BulkString(dump) = conn_value(c, &["DUMP", "s"]) else {
                panic!("{k}: DUMP");
            };
            conn_value(c, &[b"RESTORE".as_slice(), b"t", b"0", dump.as_slice()]);
            conn_value(c, &["STATS.GET", "t", "WINDOW", "1990m"])
        };
        if server_ms(&srv).div_euclid(60_000) == minute {
            assert_eq!(
                second, cold,
                "{k}: with a field TTL elsewhere, against a cold read"
            );
        }
    }
}
