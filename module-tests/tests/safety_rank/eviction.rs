//! A leaderboard changes between two reads with no write when the server evicts one of
//! its keys: under `maxmemory`, every command (reads included) first evicts keys until
//! memory fits, and with an `allkeys-*` policy any part of a board may go (the totals, the
//! meta, a slot hash). A board that loses a part is removed whole, and from that moment
//! every read answers as the removed board: a `TOP` that listed a member, then a `SCORE`
//! of it answering nil, is that (not a read seeing half a board).

use std::time::Duration;

use module_tests::*;

/// Builds board `b` (4000 fillers and `m` at 1, in one slot: a slot hash and totals of a
/// few hundred KB each, a tiny meta) and checks the reads agree.
fn build_board(srv: &Server, conn: &mut redis::Connection) {
    let k = &srv.kind().name;
    let fill: Vec<Vec<String>> = (0..20)
        .map(|batch| {
            let mut cmd = vec!["TSRANK.INCRBY".to_string(), "b".to_string()];
            for i in 0..200 {
                cmd.push("2".into());
                cmd.push(format!("filler-{batch}-{i}-{}", "x".repeat(40)));
            }
            cmd
        })
        .collect();
    for reply in pipeline(conn, &fill) {
        assert!(error_text(&reply).is_none(), "{k}: {reply:?}");
    }
    assert_eq!(srv.cmd_value(&["TSRANK.INCRBY", "b", "1", "m"]), v_int(1));
    let top = srv.cmd_value(&["TSRANK.TOP", "b", "100000", "WITHSCORES"]);
    let Value::Array(items) = &top else {
        panic!("{k}: {top:?}")
    };
    assert_eq!(items.len(), 2 * 4001, "{k}");
    assert_eq!(items.last(), Some(&v_int(1)), "{k}");
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "b", "m"]), v_int(1), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSRANK.RANK", "b", "m"]),
        v_int(4000),
        "{k}"
    );
    assert_eq!(scan_db_keys(conn, 0).len(), 3, "{k}");
}

/// Lowers `maxmemory` under `policy` so that freeing one of the big parts is enough, then
/// reads only: evictions happen, and every read answers as the removed board. Returns
/// how many keys were evicted.
fn evict_then_read(srv: &Server, conn: &mut redis::Connection, policy: &str) -> i64 {
    let k = &srv.kind().name;
    let evicted_before = info_i64(srv, "stats", "evicted_keys");
    let used = info_i64(srv, "memory", "used_memory");
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "maxmemory-policy", policy]),
        v_ok()
    );
    let limit = (used - 200 * 1024).to_string();
    let _ = srv.cmd_value(&["CONFIG", "SET", "maxmemory", &limit]);
    // Reads only, from here on (INFO too): each first evicts what it must.
    let evicted = info_i64(srv, "stats", "evicted_keys") - evicted_before;
    assert!(evicted > 0, "{k}: nothing evicted");
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "b", "m"]), v_nil(), "{k}");
    assert_eq!(srv.cmd_value(&["TSRANK.RANK", "b", "m"]), v_nil(), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "b", "100000", "WITHSCORES"]),
        v_arr(vec![]),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["TSRANK.INFO", "b"]), v_nil(), "{k}");
    assert_eq!(srv.cmd_value(&["CONFIG", "SET", "maxmemory", "0"]), v_ok());
    // The parts eviction left are removed with the board.
    assert!(
        wait_until(Duration::from_secs(1), || scan_db_keys(conn, 0).is_empty()),
        "{k}: {:?}",
        scan_db_keys(conn, 0)
    );
    evicted
}

per_server!(a_board_whose_slot_hash_is_evicted_answers_as_removed);
/// The case seen once under load: the slot hash holding a member's only count is evicted
/// while the totals stay. `allkeys-lru` with the slot hash the idlest key makes that the
/// key evicted, and only it: the totals still say 1, yet the board answers as removed.
fn a_board_whose_slot_hash_is_evicted_answers_as_removed(kind: &ServerKind) {
    let srv = Server::start(kind);
    let mut conn = srv.conn();
    build_board(&srv, &mut conn);
    // The LRU clock ticks in seconds: let the slot hash grow idle, then use the others.
    std::thread::sleep(Duration::from_millis(2_100));
    let (totals, meta) = ("b", "b|meta");
    assert_eq!(srv.cmd_value(&["TOUCH", totals, meta]), v_int(2));
    // Which key goes is read from the `evicted` keyspace event.
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]),
        v_ok()
    );
    let mut events = srv.conn();
    let mut events = events.as_pubsub();
    events
        .subscribe("__keyevent@0__:evicted")
        .expect("subscribe");
    events
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    // The commands below open no slot hash (TOUCH, CONFIG, INFO), so it stays the idlest.
    assert_eq!(evict_then_read(&srv, &mut conn, "allkeys-lru"), 1);
    let message = events.get_message().expect("an evicted event");
    let evicted: Vec<u8> = message.get_payload().expect("a key name");
    assert!(
        evicted.starts_with(b"b|slot|"),
        "{}: evicted {:?}",
        kind.name,
        String::from_utf8_lossy(&evicted)
    );
    srv.assert_alive();
}

per_server!(a_board_losing_random_parts_to_eviction_answers_as_removed);
/// Rounds of `allkeys-random` eviction, so that different parts go first (the totals, the
/// slot hash, the meta and then another): every time, reads answer as the removed board.
fn a_board_losing_random_parts_to_eviction_answers_as_removed(kind: &ServerKind) {
    let srv = Server::start(kind);
    let mut conn = srv.conn();
    for _ in 0..10 {
        assert_eq!(srv.cmd_value(&["FLUSHALL"]), v_ok());
        build_board(&srv, &mut conn);
        evict_then_read(&srv, &mut conn, "allkeys-random");
    }
    srv.assert_alive();
}
