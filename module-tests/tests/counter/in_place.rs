//! A hot counter's usual increment is made on its read mirror in place: the
//! replies, the stored slots and what the replica holds are exactly those the general
//! path gives, including the writes that leave the in-place path (a new slot, a count back
//! to 0, a past slot) and reads after the mirror was dropped.

use super::*;

per_server!(in_place_increments_store_and_replicate_exactly);
fn in_place_increments_store_and_replicate_exactly(kind: &ServerKind) {
    let k = kind.name.clone();
    let (srv, replica) = start_with_replica(kind);
    let mut conn = srv.conn();
    let t = server_ms(&srv);
    let (at, hour_ago) = (t.to_string(), (t - 3_600_000).to_string());
    let field = |res: &str, ms: i64, at: i64| format!("{res}:{}", at.div_euclid(ms));
    let fields = |pairs: &[(String, i64)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(f, c)| (f.clone(), c.to_string()))
            .collect()
    };
    let create = [
        "TSCOUNTER.CREATE",
        "hot",
        "RESOLUTIONS",
        "1s:600",
        "1m:600",
        "1h:48",
    ];
    assert_eq!(srv.cmd_value(&create), v_ok(), "{k}");
    // A past slot (kept by the minutes and hours only), then 500 increments of the same
    // slots: from the third on, the counter has a mirror and they are made in place.
    let past = ["TSCOUNTER.INCRBY", "hot", "5", "AT", &hour_ago];
    assert_eq!(srv.cmd_value(&past), v_int(5), "{k}");
    let writes: Vec<Vec<String>> = (0..500)
        .map(|_| strings(&["TSCOUNTER.INCRBY", "hot", "3", "AT", &at]))
        .collect();
    let want: Vec<Value> = (1..=500).map(|i| v_int(3 * i)).collect();
    assert_eq!(pipeline(&mut conn, &writes), want, "{k}");
    let before = t - 3_600_000;
    let past_fields = [
        (field("1m", 60_000, before), 5),
        (field("1h", 3_600_000, before), 5),
    ];
    let mut now_fields = past_fields.to_vec();
    now_fields.extend([
        (field("1s", 1_000, t), 1500),
        (field("1m", 60_000, t), 1500),
        (field("1h", 3_600_000, t), 1500),
    ]);
    assert_eq!(slot_fields(&srv, "hot"), fields(&now_fields), "{k}");
    // A native edit drops the mirror: the hash alone answers the same.
    srv.cmd_value(&["HSET", "hot", "zz", "1"]);
    srv.cmd_value(&["HDEL", "hot", "zz"]);
    let sum = ["TSCOUNTER.SUM", "hot", "10s", "2h", "AT", &at];
    assert_eq!(
        srv.cmd_value(&sum),
        Value::Array(vec![v_int(1500), v_int(1505)]),
        "{k}"
    );
    // Back to 0 (the general path removes the slots), then new slots again.
    let zero = ["TSCOUNTER.INCRBY", "hot", "-1500", "AT", &at];
    assert_eq!(srv.cmd_value(&zero), v_int(0), "{k}");
    assert_eq!(slot_fields(&srv, "hot"), fields(&past_fields), "{k}");
    let incrs: Vec<Vec<String>> = (0..10)
        .map(|_| strings(&["TSCOUNTER.INCR", "hot", "AT", &at]))
        .collect();
    let want: Vec<Value> = (1..=10).map(v_int).collect();
    assert_eq!(pipeline(&mut conn, &incrs), want, "{k}");
    let mut last_fields = past_fields.to_vec();
    last_fields.extend([
        (field("1s", 1_000, t), 10),
        (field("1m", 60_000, t), 10),
        (field("1h", 3_600_000, t), 10),
    ]);
    assert_eq!(slot_fields(&srv, "hot"), fields(&last_fields), "{k}");
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, "replica");
    assert_eq!(
        replica.cmd_value(&sum),
        Value::Array(vec![v_int(10), v_int(15)]),
        "{k}"
    );
}
