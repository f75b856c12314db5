//! The hash encoding of hot counters: a counter written at least 64 times within
//! one second with at least 16 fields moves from the listpack encoding to the hashtable one
//! (a listpack is searched from its start for each of the fields an increment writes);
//! counters written now and then keep the compact listpack, and the content never changes.

use super::*;

fn encoding(srv: &Server, key: &str) -> Value {
    srv.cmd_value(&["OBJECT", "ENCODING", key])
}

per_server!(a_hot_counter_moves_to_the_hashtable_encoding_and_others_stay_compact);
fn a_hot_counter_moves_to_the_hashtable_encoding_and_others_stay_compact(kind: &ServerKind) {
    let k = kind.name.clone();
    let (srv, replica) = start_with_replica(kind);
    let mut conn = srv.conn();
    let t0 = server_ms(&srv);
    // 40 writes, one per second over the last 40 s: 40+ fields, but not hot.
    let spread = |key: &str, n: i64| -> Vec<Vec<String>> {
        (1..=n)
            .map(|s| {
                strings(&[
                    "TSCOUNTER.INCRBY",
                    key,
                    "2",
                    "AT",
                    &(t0 - s * 1000).to_string(),
                ])
            })
            .collect()
    };
    let replies = pipeline(&mut conn, &spread("warm", 40));
    assert_eq!(replies.len(), 40, "{k}");
    assert_eq!(
        encoding(&srv, "warm"),
        v_bulk("listpack"),
        "{k}: a counter written 40 times"
    );
    // Hot, but small: 100 writes to the same slots keep 9 fields.
    let same: Vec<Vec<String>> = (0..100)
        .map(|_| strings(&["TSCOUNTER.INCRBY", "small", "1", "AT", &t0.to_string()]))
        .collect();
    assert_eq!(pipeline(&mut conn, &same).last(), Some(&v_int(100)), "{k}");
    assert_eq!(
        encoding(&srv, "small"),
        v_bulk("listpack"),
        "{k}: a hot counter of 9 fields"
    );
    // Hot and large: 100 writes within a second over 100 slots of a second.
    pipeline(&mut conn, &spread("hot", 100));
    assert_eq!(
        encoding(&srv, "hot"),
        v_bulk("hashtable"),
        "{k}: a hot counter"
    );
    // Same content as the same writes on a counter written slowly (here: the same writes
    // made in 3 batches a second apart, never 64 in one second).
    for part in spread("slow", 100).chunks(34) {
        pipeline(&mut conn, part);
        std::thread::sleep(Duration::from_millis(1100));
    }
    assert_eq!(
        encoding(&srv, "slow"),
        v_bulk("listpack"),
        "{k}: written 34 times a second"
    );
    let hot = hgetall(&srv, "hot");
    let mut slow = hgetall(&srv, "slow");
    // `_state` holds the time of the write that produced it.
    slow.insert(
        "_state".into(),
        hot.get("_state").cloned().unwrap_or_default(),
    );
    assert_eq!(hot, slow, "{k}: the same content in either encoding");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "hot", "2m", "AT", &t0.to_string()]),
        srv.cmd_value(&["TSCOUNTER.SUM", "slow", "2m", "AT", &t0.to_string()]),
        "{k}"
    );
    // Further writes work as before and the replica holds the same data.
    let at = t0.to_string();
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "hot", "5", "AT", &at]),
        srv.cmd_value(&["TSCOUNTER.INCRBY", "slow", "5", "AT", &at]),
        "{k}"
    );
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, "replica");
}
