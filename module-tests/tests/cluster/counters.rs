//! TSCOUNTER on a cluster: routing, many counters spread over every shard, resharding under
//! writes, and expiry on a promoted replica after `CLUSTER FAILOVER`.

use super::*;

per_server!(counters_route_reshard_and_fail_over);
fn counters_route_reshard_and_fail_over(kind: &ServerKind) {
    let cluster = start_cluster(kind, 3, 1);
    let k = kind.name.as_str();
    let mut cc = cluster.cluster_client();

    // Many counters over every shard, through the cluster client, read back exactly.
    let n = spread_count();
    for i in 0..n {
        let key = format!("hits:{i}");
        let v = cc_cmd(&mut cc, &["TSCOUNTER.INCRBY", &key, &(i + 1).to_string()]);
        assert_eq!(v, Ok(v_int(i as i64 + 1)), "{k}: {key}");
    }
    assert_eq!(
        cc_cmd(&mut cc, &["TSCOUNTER.CREATE", "hits:0"]),
        Err("ERR key already exists".into())
    );
    assert_spread(&cluster);
    for i in 0..n {
        let key = format!("hits:{i}");
        let v = cc_cmd(&mut cc, &["TSCOUNTER.SUM", &key, "1h"]);
        assert_eq!(v, Ok(v_int(i as i64 + 1)), "{k}: {key}");
    }
    // LIMIT routes like every counter command: a check, then an applied increment.
    for i in 0..n.min(20) {
        let key = format!("hits:{i}");
        let total = i as i64 + 1;
        let check = cc_cmd(&mut cc, &["TSCOUNTER.LIMIT", &key, "0", "1h", "1000"]);
        assert_eq!(
            check,
            Ok(v_arr(vec![v_int(1), v_int(0), v_arr(vec![v_int(total)])])),
            "{k}: {key}"
        );
        let max = (total + 1).to_string();
        let applied = cc_cmd(&mut cc, &["TSCOUNTER.LIMIT", &key, "1", "1h", &max]);
        assert_eq!(
            applied,
            Ok(v_arr(vec![
                v_int(1),
                v_int(0),
                v_arr(vec![v_int(total + 1)])
            ])),
            "{k}: {key}"
        );
        let undo = cc_cmd(&mut cc, &["TSCOUNTER.INCRBY", &key, "-1"]);
        assert!(matches!(undo, Ok(Value::Int(_))), "{k}: {key}: {undo:?}");
    }

    // Reshard the 3 lowest slots of the first primary to the second one while a
    // writer increments counters living there.
    let prim = primaries_by_slot(&cluster);
    let (from, to, third) = (prim[0], prim[1], prim[2]);
    let slots = lowest_slots(&cluster, from, 3);
    let tags: Vec<String> = slots.iter().map(|s| tag_for_slot(*s)).collect();
    let live: Vec<String> = tags.iter().map(|t| format!("live{{{t}}}")).collect();
    // Tiny resolutions: these must still have slots when the move is done, and lose
    // them on the new owner.
    let tiny = format!("tiny{{{}}}", tags[1]);
    assert_eq!(
        cluster.cmd_value(&[
            "TSCOUNTER.CREATE",
            &tiny,
            "RESOLUTIONS",
            &format!("1s:{}", tiny_secs()),
            "500ms:8"
        ]),
        v_ok()
    );
    assert_eq!(
        cluster.cmd_value(&["TSCOUNTER.INCRBY", &tiny, "7"]),
        v_int(7)
    );
    let expired_before = info_i64(to, "tally", "tally_slots_expired");
    let acks = reshard_under_writes(&cluster, from, to, slots.len(), |cc, i| {
        let key = &live[(i % live.len() as u64) as usize];
        match cc_cmd(cc, &["TSCOUNTER.INCR", key]) {
            Ok(Value::Int(_)) => Some(key.clone()),
            _ => None,
        }
    });
    for s in &slots {
        assert_eq!(
            owner_of_slot(&cluster, *s).port(),
            to.port(),
            "{k}: slot {s} moved"
        );
        assert!(
            keys_in_slot(from, *s).is_empty(),
            "{k}: slot {s} left behind keys"
        );
    }
    let mut cc = cluster.cluster_client();
    for (key, n) in &acks {
        assert_eq!(
            to.cmd_value(&["TSCOUNTER.SUM", key, "1d"]),
            v_int(*n),
            "{k}: {key}"
        );
        assert_eq!(
            cc_cmd(&mut cc, &["TSCOUNTER.SUM", key, "1h"]),
            Ok(v_int(*n))
        );
    }
    // The moved tiny counter is still there, on the new owner, which expires it.
    assert!(
        to.cmd_value(&["EXISTS", &tiny]) == v_int(1),
        "{k}: tiny counter expired before the move was done; test inconclusive"
    );

    // Failover of the third primary: a tiny counter written before it is expired by
    // the promoted replica, with nobody writing after the failover.
    let fslot = lowest_slots(&cluster, third, 1)[0];
    let ftiny = format!("ftiny{{{}}}", tag_for_slot(fslot));
    assert_eq!(
        third.cmd_value(&["TSCOUNTER.CREATE", &ftiny, "RESOLUTIONS", "1s:6"]),
        v_ok()
    );
    assert_eq!(
        third.cmd_value(&["TSCOUNTER.INCRBY", &ftiny, "3"]),
        v_int(3)
    );
    let written = Instant::now();
    let new_port = failover(&cluster, third, fslot);
    let promoted = cluster.node_by_port(new_port).expect("promoted node");
    // The object outlives a quick failover (6 s); if the failover was slow, its
    // expiry may legitimately have happened already.
    if written.elapsed() < Duration::from_secs(4) {
        assert_eq!(
            promoted.cmd_value(&["TSCOUNTER.SUM", &ftiny, "6s"]),
            v_int(3),
            "{k}"
        );
    }

    wait_gone(to, "moved tiny counter", |n| {
        n.cmd_value(&["EXISTS", &tiny]) == v_int(0)
    });
    assert!(
        info_i64(to, "tally", "tally_slots_expired") > expired_before,
        "{k}: the new owner expired no slot"
    );
    wait_gone(promoted, "counter after failover", |n| {
        n.cmd_value(&["EXISTS", &ftiny]) == v_int(0)
    });
    // The old primary, now a replica, received the expiry.
    third.cmd_value(&["READONLY"]);
    wait_gone(third, "counter on the demoted primary", |n| {
        n.cmd_value(&["EXISTS", &ftiny]) == v_int(0)
    });
    // The long-lived counters are untouched and still exact after everything.
    let mut cc = cluster.cluster_client();
    for (key, n) in &acks {
        assert_eq!(
            cc_cmd(&mut cc, &["TSCOUNTER.SUM", key, "1h"]),
            Ok(v_int(*n))
        );
    }
    for i in (0..n).step_by(7) {
        let key = format!("hits:{i}");
        let v = cc_cmd(&mut cc, &["TSCOUNTER.SUM", &key, "1h"]);
        assert_eq!(v, Ok(v_int(i as i64 + 1)), "{k}: {key}");
    }
    for node in cluster.nodes() {
        node.assert_alive();
    }
}
