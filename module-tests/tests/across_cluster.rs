//! Reads across keys on a Redis Cluster (3 primaries) for every server kind:
//! TSCOUNTER.MSUM, STATS.MGET and STATS.MQUANTILE declare their keys by `numkeys`, so
//! keys of one hash tag are read on the node owning their slot, a node that does not own
//! it answers MOVED, and keys of different slots are refused with CROSSSLOT.

use module_tests::*;

per_server!(reads_across_keys_route_by_their_keys_and_refuse_cross_slot_calls);
fn reads_across_keys_route_by_their_keys_and_refuse_cross_slot_calls(kind: &ServerKind) {
    let cluster = start_cluster(kind, 3, 0);
    let k = kind.name.as_str();
    let same = ["{svc:7}:/a", "{svc:7}:/b", "{svc:7}:/c"];
    let owner = cluster.node_for_key(same[0]);
    for (i, key) in same.iter().enumerate() {
        let by = (i + 1).to_string();
        assert_eq!(
            owner.cmd_value(&["TSCOUNTER.INCRBY", &format!("{key}:hits"), &by]),
            v_int(i as i64 + 1),
            "{k}"
        );
        assert_eq!(
            owner.cmd_value(&["STATS.ADD", &format!("{key}:ms"), &by]),
            v_int(1),
            "{k}"
        );
    }
    // Every call over `keys` with the suffix of its family.
    let calls = |keys: &[&str]| -> Vec<Vec<String>> {
        let named = |suffix: &str| -> Vec<String> {
            keys.iter().map(|key| format!("{key}{suffix}")).collect()
        };
        let n = keys.len().to_string();
        let mut msum = vec!["TSCOUNTER.MSUM".to_string(), n.clone()];
        msum.extend(named(":hits"));
        msum.push("1m".into());
        let mut mget = vec!["STATS.MGET".to_string(), n.clone()];
        mget.extend(named(":ms"));
        let mut mq = vec!["STATS.MQUANTILE".to_string(), n];
        mq.extend(named(":ms"));
        mq.extend(strings(&["0", "1"]));
        vec![msum, mget, mq]
    };
    let replies: Vec<Value> = calls(&same).iter().map(|c| owner.cmd_value(c)).collect();
    assert_eq!(replies[0], v_int(6), "{k}");
    let count = map_pairs(&replies[1])
        .into_iter()
        .find(|(name, _)| name == "count")
        .map(|(_, v)| v);
    assert_eq!(count, Some(v_int(3)), "{k}: {:?}", replies[1]);
    assert_eq!(replies[2], v_arr(vec![v_bulk("1"), v_bulk("3")]), "{k}");
    // Another node redirects to the owner: it routes by the declared keys, not by the
    // first argument (`numkeys`).
    let other = cluster
        .primaries()
        .into_iter()
        .find(|n| n.port() != owner.port())
        .expect("another primary");
    for call in calls(&same) {
        let moved = error_text(&other.cmd_value(&call)).unwrap_or_default();
        assert!(
            moved.starts_with("MOVED") && moved.ends_with(&format!(":{}", owner.port())),
            "{k}: {call:?}: {moved}"
        );
    }
    // Keys of different slots: CROSSSLOT on any node.
    let split = ["{a}:x", "{b}:x"];
    assert_ne!(
        cluster.keyslot(&format!("{}:hits", split[0])),
        cluster.keyslot(&format!("{}:hits", split[1]))
    );
    for node in cluster.primaries() {
        for call in calls(&split) {
            let e = error_text(&node.cmd_value(&call)).unwrap_or_default();
            assert!(e.starts_with("CROSSSLOT"), "{k}: {call:?}: {e}");
        }
    }
    for node in cluster.nodes() {
        node.assert_alive();
    }
}
