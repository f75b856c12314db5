//! TSCOUNTER.MLIMIT on a Redis Cluster (3 primaries) for every server kind: its keys are
//! declared by `numkeys`, so keys of one hash tag run on the node owning their slot, a
//! node that does not own it answers MOVED, and keys of different slots are refused with
//! CROSSSLOT without writing anything.

use module_tests::*;

per_server!(mlimit_routes_by_its_keys_and_refuses_cross_slot_calls);
fn mlimit_routes_by_its_keys_and_refuses_cross_slot_calls(kind: &ServerKind) {
    let cluster = start_cluster(kind, 3, 0);
    let k = kind.name.as_str();
    let call = |node: &Server, keys: &[&str]| {
        let mut args = vec!["TSCOUNTER.MLIMIT".to_string(), keys.len().to_string()];
        args.extend(keys.iter().map(|key| key.to_string()));
        args.push("1".into());
        for _ in keys {
            args.extend(strings(&["1", "1m", "5"]));
        }
        node.cmd_value(&args)
    };
    // One hash tag: one slot, served by its owner.
    let same = ["{user:7}:user", "{user:7}:ip", "{user:7}:global"];
    let owner = cluster.node_for_key(same[0]);
    let ones = v_arr(vec![v_arr(vec![v_int(1)]); 3]);
    assert_eq!(
        call(owner, &same),
        v_arr(vec![v_int(1), v_int(0), ones]),
        "{k}"
    );
    for key in same {
        assert_eq!(
            owner.cmd_value(&["TSCOUNTER.SUM", key, "1m"]),
            v_int(1),
            "{k}: {key}"
        );
    }
    // Another node redirects to the owner: it routes by the declared keys, not by the
    // first argument (`numkeys`).
    let other = cluster
        .primaries()
        .into_iter()
        .find(|n| n.port() != owner.port())
        .expect("another primary");
    let moved = error_text(&call(other, &same)).unwrap_or_default();
    assert!(
        moved.starts_with("MOVED") && moved.ends_with(&format!(":{}", owner.port())),
        "{k}: {moved}"
    );
    // Keys of different slots: CROSSSLOT on any node, and nothing written.
    let split = ["{a}:user", "{b}:user"];
    assert_ne!(cluster.keyslot(split[0]), cluster.keyslot(split[1]));
    for node in cluster.primaries() {
        let e = error_text(&call(node, &split)).unwrap_or_default();
        assert!(e.starts_with("CROSSSLOT"), "{k}: {e}");
    }
    for key in split {
        assert_eq!(cluster.cmd_value(&["EXISTS", key]), v_int(0), "{k}: {key}");
    }
    for node in cluster.nodes() {
        node.assert_alive();
    }
}
