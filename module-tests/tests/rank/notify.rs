//! Keyspace notifications of the TSRANK family (every `server_kinds()`).
//!
//! * `tsrank.incrby` and `tsrank.create` fire once per successful write command, in the
//!   sorted-set class (`z`) on `key`, seen with `notify-keyspace-events` `KA` and `Kz`
//!   and not with `Kh` (the board's own hash writes go through the module key API and fire
//!   no native events); errors, refused commands and reads fire nothing;
//! * with `KA` on a primary and its replica, reads stay exact and fresh on both (tally's
//!   caches ignore tally's own events but must not miss a write).
//!
//! How "nothing fired" is checked: after the commands under test, a sentinel write in the
//! subscribed class is made; the subscriber collects every event up to the sentinel's, in
//! the server's order.

use module_tests::*;
use std::time::{Duration, Instant};

/// Subscribes `conn` to `__keyspace@0__:*` (the subscription lasts as long as the
/// returned `PubSub`: dropping it leaves the pubsub mode).
fn subscribe(conn: &mut redis::Connection) -> redis::PubSub<'_> {
    let mut pubsub = conn.as_pubsub();
    pubsub.psubscribe("__keyspace@0__:*").expect("psubscribe");
    pubsub
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    pubsub
}

/// `(key, event)` of every event before the sentinel's (`sentinel_key`, `sentinel`), which
/// it waits for (up to 5 s).
fn until(pubsub: &mut redis::PubSub, sentinel_key: &str, sentinel: &str) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(5) {
        let msg = match pubsub.get_message() {
            Ok(msg) => msg,
            Err(e) if e.is_timeout() => continue,
            Err(e) => panic!("pubsub: {e}"),
        };
        let key = msg
            .get_channel_name()
            .strip_prefix("__keyspace@0__:")
            .expect("keyspace channel")
            .to_string();
        let event: String = msg.get_payload().expect("payload");
        if key == sentinel_key && event == sentinel {
            return seen;
        }
        seen.push((key, event));
    }
    panic!("the sentinel event never came; seen: {seen:?}")
}

fn ev(key: &str, event: &str) -> (String, String) {
    (key.to_string(), event.to_string())
}

/// The sentinel: a native write in the class under test and the event it fires.
fn sentinel(srv: &Server, classes: &str, n: usize) -> (String, &'static str) {
    let key = format!("sentinel:{n}");
    if classes == "Kh" {
        srv.cmd(&["HSET", &key, "f", "v"]).expect("hset");
        (key, "hset")
    } else {
        srv.cmd(&["ZADD", &key, "1", "x"]).expect("zadd");
        (key, "zadd")
    }
}

per_server!(rank_writes_fire_one_event_each_in_the_zset_class);
fn rank_writes_fire_one_event_each_in_the_zset_class(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    for (round, classes) in ["KA", "Kz", "Kh"].into_iter().enumerate() {
        srv.cmd(&["CONFIG", "SET", "notify-keyspace-events", classes])
            .expect("config");
        let mut sub_conn = srv.conn();
        let mut sub = subscribe(&mut sub_conn);
        let (board, auto) = (format!("lb{round}"), format!("auto{round}"));
        let now = server_ms(&srv).to_string();
        for cmd in [
            &["TSRANK.CREATE", &board, "WINDOW", "2h", "SLOT", "1h"][..],
            &["TSRANK.INCRBY", &board, "3", "a"][..],
            &[
                "TSRANK.INCRBY",
                &board,
                "1",
                "a",
                "2",
                "b",
                "1",
                "a",
                "AT",
                &now,
            ][..],
            // A new board, auto-created by its first INCRBY: still one event.
            &["TSRANK.INCRBY", &auto, "5", "z"][..],
        ] {
            let v = srv.cmd_value(cmd);
            assert!(error_text(&v).is_none(), "{k} {cmd:?}: {v:?}");
        }
        let (key, event) = sentinel(&srv, classes, 2 * round);
        let want = if classes == "Kh" {
            vec![]
        } else {
            vec![
                ev(&board, "tsrank.create"),
                ev(&board, "tsrank.incrby"),
                ev(&board, "tsrank.incrby"),
                ev(&auto, "tsrank.incrby"),
            ]
        };
        assert_eq!(until(&mut sub, &key, event), want, "{k} {classes}");

        // Errors, refused commands and reads fire nothing.
        srv.cmd(&["SET", "str", "x"]).expect("set");
        srv.cmd(&["ZADD", "plainz", "1", "a"]).expect("zadd");
        let long_ago = (server_ms(&srv) - 10 * 3_600_000).to_string();
        for cmd in [
            &["TSRANK.INCRBY", "str", "1", "a"][..],
            &["TSRANK.INCRBY", "plainz", "1", "a"][..],
            &["TSRANK.INCRBY", &board, "0", "a"][..],
            &["TSRANK.INCRBY", &board, "x", "a"][..],
            &["TSRANK.INCRBY", &board, "1", "a", "AT", &long_ago][..],
            &["TSRANK.CREATE", &board][..],
            &["TSRANK.CREATE", "str"][..],
            &["TSRANK.CREATE", "new", "WINDOW", "90m", "SLOT", "1h"][..],
        ] {
            let v = srv.cmd_value(cmd);
            assert!(error_text(&v).is_some(), "{k} {cmd:?}: {v:?}");
        }
        for cmd in [
            &["TSRANK.TOP", &board, "10", "WITHSCORES"][..],
            &["TSRANK.TOP", &board, "10", "WINDOW", "1h"][..],
            &["TSRANK.SCORE", &board, "a"][..],
            &["TSRANK.RANK", &board, "a"][..],
            &["TSRANK.INFO", &board][..],
            &["TSRANK.HISTORY", &board, "a"][..],
            &["TSRANK.TOP", "missing", "10"][..],
        ] {
            let v = srv.cmd_value(cmd);
            assert!(error_text(&v).is_none(), "{k} {cmd:?}: {v:?}");
        }
        let (key, event) = sentinel(&srv, classes, 2 * round + 1);
        let natives = if classes == "Kh" {
            vec![]
        } else {
            vec![ev("plainz", "zadd")]
        };
        let mut want = if classes == "KA" {
            vec![ev("str", "set")]
        } else {
            vec![]
        };
        want.extend(natives);
        assert_eq!(
            until(&mut sub, &key, event),
            want,
            "{k} {classes}: errors or reads fired"
        );
        srv.cmd(&["DEL", "str", "plainz"]).expect("del");
        let (key, event) = sentinel(&srv, classes, 100 + round);
        let _ = until(&mut sub, &key, event);
        assert_eq!(
            srv.cmd_value(&["TSRANK.SCORE", &board, "a"]),
            v_int(5),
            "{k}"
        );
    }
    srv.assert_alive();
}

per_server!(reads_stay_fresh_with_all_events_on_primary_and_replica);
/// With every event class on, tally's own events reach tally's hooks (which ignore them):
/// TOP after each INCRBY equals the model, on the primary and on its replica.
fn reads_stay_fresh_with_all_events_on_primary_and_replica(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    let k = &kind.name;
    for srv in [&primary, &replica] {
        srv.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KA"])
            .expect("config");
    }
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    let mut rng = Rng(0x5EED_0010);
    let mut totals: std::collections::BTreeMap<String, i64> = Default::default();
    for step in 0..40 {
        let m = format!("m{}", rng.below(6));
        let n = 1 + rng.below(9);
        *totals.entry(m.clone()).or_default() += n;
        assert_eq!(
            primary.cmd_value(&["TSRANK.INCRBY", "fresh", &n.to_string(), &m]),
            v_int(totals[&m]),
            "{k} step {step}"
        );
        let mut ranked: Vec<(String, i64)> = totals.iter().map(|(m, t)| (m.clone(), *t)).collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        let want = v_arr(
            ranked
                .iter()
                .flat_map(|(m, t)| [v_bulk(m), v_int(*t)])
                .collect(),
        );
        assert_eq!(
            primary.cmd_value(&["TSRANK.TOP", "fresh", "10", "WITHSCORES"]),
            want,
            "{k} step {step} primary"
        );
        if step % 8 == 7 {
            wait_replica_synced(&primary, &replica);
            assert_eq!(
                replica.cmd_value(&["TSRANK.TOP", "fresh", "10", "WITHSCORES"]),
                want,
                "{k} step {step} replica"
            );
            assert_eq!(
                replica.cmd_value(&["TSRANK.SCORE", "fresh", &m]),
                v_int(totals[&m]),
                "{k} step {step} replica"
            );
        }
    }
    wait_replica_synced(&primary, &replica);
    assert_replica_equal(&primary, &replica, "with notify-keyspace-events KA");
}

per_server!(an_incrby_that_opens_an_expiring_part_fires_once);
/// A part of the board expires lazily while INCRBY opens it: the command lets tally's
/// lifecycle job run and opens the keys again, and still fires one `tsrank.incrby`.
fn an_incrby_that_opens_an_expiring_part_fires_once(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    srv.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KA"])
        .expect("config");
    assert_eq!(
        srv.cmd_value(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
        v_ok(),
        "{k}"
    );
    // Tally's own timer may open the slot hash first (the expiry then happens outside the
    // INCRBY): the events up to a sentinel before the INCRBY tell, and such an attempt is
    // made again on a new board rather than judged.
    for attempt in 0..3 {
        let lb = format!("lb{attempt}");
        srv.cmd(&["TSRANK.CREATE", &lb, "WINDOW", "2h", "SLOT", "1h"])
            .expect("create");
        srv.cmd(&["TSRANK.INCRBY", &lb, "3", "a"]).expect("incr");
        let slot_hash = format!("{lb}|slot|{}", server_ms(&srv) / 3_600_000);
        let mut sub_conn = srv.conn();
        let mut sub = subscribe(&mut sub_conn);
        assert_eq!(srv.cmd_value(&["PEXPIRE", &slot_hash, "1"]), v_int(1));
        std::thread::sleep(Duration::from_millis(20));
        let (key, event) = sentinel(&srv, "KA", 2 * attempt);
        if until(&mut sub, &key, event).contains(&ev(&slot_hash, "expired")) {
            println!("{k}: the slot hash expired before the INCRBY; again");
            continue;
        }
        let v = srv.cmd_value(&["TSRANK.INCRBY", &lb, "2", "a"]);
        assert!(error_text(&v).is_none(), "{k}: {v:?}");
        let (key, event) = sentinel(&srv, "KA", 2 * attempt + 1);
        let seen = until(&mut sub, &key, event);
        let ours: Vec<_> = seen
            .iter()
            .filter(|(_, e)| e.starts_with("tsrank."))
            .collect();
        assert_eq!(ours, vec![&ev(&lb, "tsrank.incrby")], "{k}: {seen:?}");
        assert!(
            seen.contains(&ev(&slot_hash, "expired")),
            "{k}: the slot hash did not expire during the INCRBY: {seen:?}"
        );
        assert_eq!(srv.cmd_value(&["TSRANK.SCORE", &lb, "a"]), v);
        srv.assert_alive();
        return;
    }
    panic!("{k}: the slot hash expired before the INCRBY in every attempt");
}
