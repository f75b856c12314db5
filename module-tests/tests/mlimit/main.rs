//! TSCOUNTER.MLIMIT (one atomic limit over several counters) and TSCOUNTER.LIMIT's
//! DETAILS. Random traffic with `AT` across slot and window edges over several keys is
//! checked reply by reply against a brute-force model (a log of every applied increment
//! per key; waits and resets found by trying every later slot boundary); then exact
//! replies, errors, all or nothing (a refused or failed call writes and propagates
//! nothing), key declarations, notifications, a replica and an AOF reload equal to the
//! primary, and key permissions.
//!
//! Files: `model.rs` (the brute-force model and the random traffic checked against it),
//! `replies.rs` (exact replies and errors); this file holds key declarations, events,
//! replication, reloads, permissions and the scale case.

use module_tests::*;
use std::collections::BTreeMap;

mod model;
mod replies;

per_server!(mlimit_declares_its_keys_and_fires_one_event_per_key_written);
fn mlimit_declares_its_keys_and_fires_one_event_per_key_written(kind: &ServerKind) {
    let srv = Server::start(kind);
    assert_eq!(
        srv.cmd_value(&[
            "COMMAND",
            "GETKEYS",
            "TSCOUNTER.MLIMIT",
            "3",
            "a",
            "b",
            "c",
            "1",
            "1",
            "5s",
            "5",
            "1",
            "5s",
            "5",
            "2",
            "5s",
            "5",
            "1m",
            "9",
            "AT",
            "1",
            "DETAILS"
        ]),
        v_bulks(&["a", "b", "c"])
    );
    assert_eq!(
        srv.cmd_value(&[
            "COMMAND",
            "GETKEYS",
            "TSCOUNTER.MLIMIT",
            "1",
            "k",
            "1",
            "1",
            "5s",
            "5"
        ]),
        v_bulks(&["k"])
    );
    assert_eq!(
        srv.cmd_value(&[
            "COMMAND",
            "GETKEYS",
            "TSCOUNTER.LIMIT",
            "k",
            "1",
            "5s",
            "5",
            "DETAILS"
        ]),
        v_bulks(&["k"])
    );
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "notify-keyspace-events", "Kh"]),
        v_ok()
    );
    let client = redis::Client::open(srv.url_resp2()).expect("client");
    let mut sub_conn = client.get_connection().expect("connection");
    let mut pubsub = sub_conn.as_pubsub();
    pubsub.psubscribe("__keyspace@0__:*").expect("psubscribe");
    pubsub
        .set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .expect("timeout");
    let call = |increment: &str| {
        srv.cmd_value(&[
            "TSCOUNTER.MLIMIT",
            "2",
            "x",
            "y",
            increment,
            "1",
            "5s",
            "1",
            "1",
            "5s",
            "9",
        ])
    };
    assert!(matches!(call("1"), Value::Array(a) if a[0] == v_int(1))); // applied
    assert!(matches!(call("1"), Value::Array(a) if a[0] == v_int(0))); // refused
    assert!(matches!(call("0"), Value::Array(_))); // check only
    call("x"); // error
    let mut events = Vec::new();
    while let Ok(message) = pubsub.get_message() {
        let payload: String = message.get_payload().expect("payload");
        events.push((message.get_channel_name().to_string(), payload));
    }
    assert_eq!(
        events,
        vec![
            (
                "__keyspace@0__:x".to_string(),
                "tscounter.limit".to_string()
            ),
            (
                "__keyspace@0__:y".to_string(),
                "tscounter.limit".to_string()
            ),
        ]
    );
}

/// Random MLIMIT traffic over five counters (some refused), `AT` in the last minute.
fn mlimit_traffic(srv: &Server, rng: &mut Rng, calls: usize) -> (usize, usize) {
    let now = server_ms(srv);
    let (mut applied, mut refused) = (0, 0);
    for _ in 0..calls {
        let n = 1 + rng.below(3) as usize;
        let mut keys: Vec<String> = Vec::new();
        while keys.len() < n {
            let key = format!("u{}", rng.below(5));
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        let mut args = vec!["TSCOUNTER.MLIMIT".to_string(), n.to_string()];
        args.extend(keys.iter().cloned());
        args.push(rng.below(3).to_string());
        for _ in 0..n {
            args.extend(strings(&[
                "2",
                "10s",
                &rng.below(6).to_string(),
                "1m",
                "20",
            ]));
        }
        args.extend(strings(&["AT", &(now - rng.below(60_000)).to_string()]));
        match srv.cmd_value(&args) {
            Value::Array(a) if a[0] == v_int(1) => applied += 1,
            Value::Array(_) => refused += 1,
            other => panic!("{args:?}: {other:?}"),
        }
    }
    (applied, refused)
}

per_server!(mlimit_replicates_effects_and_refusals_propagate_nothing);
/// A replica equals the primary after MLIMIT traffic; a refused call (and a check)
/// propagates nothing.
fn mlimit_replicates_effects_and_refusals_propagate_nothing(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    assert_eq!(
        primary.cmd_value(&["CONFIG", "SET", "repl-ping-replica-period", "3600"]),
        v_ok()
    );
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    let applied = primary.cmd_value(&[
        "TSCOUNTER.MLIMIT",
        "2",
        "p",
        "q",
        "2",
        "1",
        "1m",
        "2",
        "1",
        "1m",
        "2",
    ]);
    assert_eq!(
        applied.clone(),
        v_arr(vec![
            v_int(1),
            v_int(0),
            v_arr(vec![v_arr(vec![v_int(2)]), v_arr(vec![v_int(2)])])
        ])
    );
    wait_replica_synced(&primary, &replica);
    let offset = repl_offset(&primary);
    for increment in ["1", "0", "5"] {
        let reply = primary.cmd_value(&[
            "TSCOUNTER.MLIMIT",
            "2",
            "p",
            "q",
            increment,
            "1",
            "1m",
            "2",
            "1",
            "1m",
            "9",
        ]);
        assert!(
            matches!(&reply, Value::Array(a) if a.len() == 3),
            "{reply:?}"
        );
    }
    assert_eq!(
        repl_offset(&primary),
        offset,
        "refusals and checks replicate nothing"
    );
    let mut rng = Rng(0x3e91);
    let (applied, refused) = mlimit_traffic(&primary, &mut rng, 300);
    assert!(
        applied > 30 && refused > 30,
        "{applied} applied, {refused} refused"
    );
    wait_replica_synced(&primary, &replica);
    assert_replica_equal(&primary, &replica, "after MLIMIT traffic");
}

per_server!(mlimit_effects_reload_from_the_aof);
/// The effects MLIMIT writes to the AOF rebuild the same data.
fn mlimit_effects_reload_from_the_aof(kind: &ServerKind) {
    let mut srv = Server::start_with(
        kind,
        ServerOptions::new()
            .config("appendonly", "yes")
            .config("appendfsync", "always"),
    );
    let mut rng = Rng(0xa0f);
    let (applied, _) = mlimit_traffic(&srv, &mut rng, 200);
    assert!(applied > 30, "{applied}");
    let before = srv.dump_keyspace();
    assert_eq!(before.len(), 5, "{before:?}");
    srv.restart();
    assert_eq!(srv.dump_keyspace(), before, "AOF reload");
}

per_server!(mlimit_obeys_key_permissions_on_every_key);
/// A user without access to one of the keys is refused, and nothing is written to the
/// keys it may access.
fn mlimit_obeys_key_permissions_on_every_key(kind: &ServerKind) {
    let srv = Server::start(kind);
    let mut own = conn_as_user(&srv, "limiter", &["~rl:*"]);
    assert_eq!(
        conn_value(
            &mut own,
            &[
                "TSCOUNTER.MLIMIT",
                "2",
                "rl:a",
                "rl:b",
                "1",
                "1",
                "5s",
                "5",
                "1",
                "5s",
                "5"
            ]
        ),
        v_arr(vec![
            v_int(1),
            v_int(0),
            v_arr(vec![v_arr(vec![v_int(1)]), v_arr(vec![v_int(1)])])
        ])
    );
    let before = hgetall(&srv, "rl:a");
    for args in [
        vec![
            "TSCOUNTER.MLIMIT",
            "2",
            "rl:a",
            "other",
            "1",
            "1",
            "5s",
            "5",
            "1",
            "5s",
            "5",
        ],
        vec![
            "TSCOUNTER.MLIMIT",
            "2",
            "other",
            "rl:a",
            "1",
            "1",
            "5s",
            "5",
            "1",
            "5s",
            "5",
        ],
    ] {
        let denied = conn_value(&mut own, &args);
        assert!(
            error_text(&denied).is_some_and(|t| t.starts_with("NOPERM")),
            "{args:?}: {denied:?}"
        );
    }
    assert!(!exists(&srv, "other"));
    assert_eq!(hgetall(&srv, "rl:a"), before);
    // Read-only access to a key is not enough: MLIMIT may write every key.
    let mut reader = conn_as_user(&srv, "reader", &["~rl:*", "%R~ro:*"]);
    let denied = conn_value(
        &mut reader,
        &[
            "TSCOUNTER.MLIMIT",
            "2",
            "rl:a",
            "ro:x",
            "0",
            "1",
            "5s",
            "5",
            "1",
            "5s",
            "5",
        ],
    );
    assert!(
        error_text(&denied).is_some_and(|t| t.starts_with("NOPERM")),
        "{denied:?}"
    );
}

/// The server time (µs) of the best of three calls of `args`, by `INFO commandstats`.
fn best_usec(srv: &Server, args: &[String]) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..5 {
        assert_eq!(srv.cmd_value(&["CONFIG", "RESETSTAT"]), v_ok());
        let reply = srv.cmd_value(args);
        assert!(
            matches!(&reply, Value::Array(a) if a.len() == 3),
            "{reply:?}"
        );
        best = best.min(usec_per_call(srv, &args[0].to_lowercase()));
    }
    best
}

per_server!(mlimit_of_many_keys_and_full_counters_answers_in_10ms);
/// The most keys and pairs (16 keys of the default resolutions, busy for the last two
/// minutes, 16 pairs each, DETAILS), and two counters of 2500 one-second slots, every slot
/// stored (too many for a read cache, so their hashes are read), with 16 windows of 2400
/// slots each and DETAILS: under 10 ms at the server. The cost adds up over the keys (each
/// is one LIMIT's read), as the command's documented complexity says.
fn mlimit_of_many_keys_and_full_counters_answers_in_10ms(kind: &ServerKind) {
    let srv = Server::start(kind);
    let now = server_ms(&srv);
    let keys: Vec<String> = (0..16).map(|i| format!("{{s}}:{i}")).collect();
    let mut conn = srv.conn();
    let writes: Vec<Vec<String>> = (0..16 * 2_000)
        .map(|i| {
            let key = &keys[i % 16];
            let at = now - 120_000 + (i as i64 * 7) % 120_000;
            strings(&["TSCOUNTER.INCRBY", key, "1", "AT", &at.to_string()])
        })
        .collect();
    for chunk in writes.chunks(2_000) {
        for reply in pipeline(&mut conn, chunk) {
            assert!(matches!(reply, Value::Int(_)), "{reply:?}");
        }
    }
    let windows = [
        "1s", "5s", "30s", "1m", "90s", "2m", "5m", "10m", "1h", "2h", "5h", "10h", "1d", "2d",
        "5d", "100d",
    ];
    let mut args = vec!["TSCOUNTER.MLIMIT".to_string(), "16".to_string()];
    args.extend(keys.iter().cloned());
    args.push("1".into());
    for _ in &keys {
        args.push("16".into());
        for w in windows {
            args.extend(strings(&[w, "1000000"]));
        }
    }
    args.push("DETAILS".into());
    let us = best_usec(&srv, &args);
    println!("{}: MLIMIT of 16 keys x 16 pairs: {us} us", kind.name);
    assert!(us <= 10_000.0, "{}: {us} us", kind.name);

    for key in ["full:a", "full:b"] {
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.CREATE", key, "RESOLUTIONS", "1s:2500"]),
            v_ok()
        );
        let fill: Vec<Vec<String>> = (0..2_490)
            .rev()
            .map(|back: i64| {
                strings(&[
                    "TSCOUNTER.INCRBY",
                    key,
                    "1",
                    "AT",
                    &(now - back * 1000).to_string(),
                ])
            })
            .collect();
        for chunk in fill.chunks(2_000) {
            for reply in pipeline(&mut conn, chunk) {
                assert!(matches!(reply, Value::Int(_)), "{reply:?}");
            }
        }
    }
    let mut args = strings(&["TSCOUNTER.MLIMIT", "2", "full:a", "full:b", "1"]);
    for _ in 0..2 {
        args.push("16".into());
        for max in 0..16 {
            args.extend(strings(&["2400s", &(5_000 + max).to_string()]));
        }
    }
    args.push("DETAILS".into());
    let us = best_usec(&srv, &args);
    println!(
        "{}: MLIMIT of 2 counters of 2500 slots x 16 windows of 2400 slots: {us} us",
        kind.name
    );
    assert!(us <= 10_000.0, "{}: {us} us", kind.name);
    srv.assert_alive();
}
