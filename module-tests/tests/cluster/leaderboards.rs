//! TSRANK on a cluster: routing, hash-tag rules, resharding under writes, expiry after
//! `CLUSTER FAILOVER`, and a leaderboard moved key by key counting every write once.

use super::*;

per_server!(leaderboards_route_reshard_and_fail_over);
fn leaderboards_route_reshard_and_fail_over(kind: &ServerKind) {
    let cluster = start_cluster(kind, 3, 1);
    let k = kind.name.as_str();
    let mut cc = cluster.cluster_client();

    // A leaderboard key without a hash tag is refused in cluster mode: its derived
    // keys would land in other slots. Nothing is written.
    for cmd in [
        vec!["TSRANK.INCRBY", "board", "1", "m"],
        vec!["TSRANK.CREATE", "board", "WINDOW", "1h", "SLOT", "1m"],
        vec!["TSRANK.INCRBY", "board{}", "1", "m"],
        vec!["TSRANK.INCRBY", "board", "-1", "m"],
        vec!["TSRANK.REM", "board", "m"],
    ] {
        let e = cc_cmd(&mut cc, &cmd).expect_err("refused without a hash tag");
        assert!(
            e.starts_with("ERR") && e.to_lowercase().contains("tag"),
            "{k}: {cmd:?}: {e}"
        );
    }
    for key in ["board", "board|meta", "board{}", "board{}|meta"] {
        assert_eq!(cluster.cmd_value(&["EXISTS", key]), v_int(0), "{k}: {key}");
    }

    // Unlikes and removal, routed by the hash tag to the board's node.
    assert_eq!(
        cc_cmd(&mut cc, &["TSRANK.INCRBY", "rem{z}", "3", "a", "2", "b"]),
        Ok(v_arr(vec![v_int(3), v_int(2)])),
        "{k}"
    );
    assert_eq!(
        cc_cmd(&mut cc, &["TSRANK.INCRBY", "rem{z}", "-1", "a"]),
        Ok(v_int(2))
    );
    assert_eq!(
        cc_cmd(&mut cc, &["TSRANK.REM", "rem{z}", "b", "c"]),
        Ok(v_int(1))
    );
    assert_eq!(
        cc_cmd(&mut cc, &["TSRANK.TOP", "rem{z}", "10"]),
        Ok(v_bulks(&["a"]))
    );
    // The standings reads, routed the same way.
    assert_eq!(
        cc_cmd(&mut cc, &["TSRANK.INCRBY", "rem{z}", "2", "c", "5", "d"]),
        Ok(v_arr(vec![v_int(2), v_int(5)])),
        "{k}"
    );
    assert_eq!(
        cc_cmd(
            &mut cc,
            &["TSRANK.AROUND", "rem{z}", "a", "1", "WITHSCORES"]
        ),
        Ok(v_arr(vec![v_bulk("c"), v_int(2), v_bulk("a"), v_int(2)])),
        "{k}"
    );
    assert_eq!(
        cc_cmd(&mut cc, &["TSRANK.RANK", "rem{z}", "a", "TIES"]),
        Ok(v_int(1))
    );
    assert_eq!(
        cc_cmd(&mut cc, &["TSRANK.MSCORE", "rem{z}", "a", "b", "d"]),
        Ok(v_arr(vec![v_int(2), v_nil(), v_int(5)]))
    );
    for cmd in [
        vec!["TSRANK.AROUND", "board", "a", "1"],
        vec!["TSRANK.RANK", "board", "a", "TIES"],
        vec!["TSRANK.MSCORE", "board", "a"],
    ] {
        let e = cc_cmd(&mut cc, &cmd).expect_err("refused without a hash tag");
        assert!(e.to_lowercase().contains("tag"), "{k}: {cmd:?}: {e}");
    }

    // Many leaderboards over every shard.
    let n = spread_count();
    for i in 0..n {
        let key = format!("lb{{{i}}}");
        let v = cc_cmd(
            &mut cc,
            &["TSRANK.INCRBY", &key, &(i + 1).to_string(), "a", "1", "b"],
        );
        assert_eq!(
            v,
            Ok(v_arr(vec![v_int(i as i64 + 1), v_int(1)])),
            "{k}: {key}"
        );
    }
    assert_spread(&cluster);
    for i in 0..n {
        let key = format!("lb{{{i}}}");
        assert_eq!(
            cc_cmd(&mut cc, &["TSRANK.SCORE", &key, "a"]),
            Ok(v_int(i as i64 + 1))
        );
        let top = cc_cmd(&mut cc, &["TSRANK.TOP", &key, "2"]);
        let want = if i == 0 {
            v_bulks(&["b", "a"])
        } else {
            v_bulks(&["a", "b"])
        };
        assert_eq!(top, Ok(want), "{k}: {key}");
    }

    // Reshard slots holding live leaderboards (main key and derived keys move
    // together: they share the hash tag) while a writer increments them.
    let prim = primaries_by_slot(&cluster);
    let (from, to, third) = (prim[0], prim[1], prim[2]);
    let slots = lowest_slots(&cluster, from, 3);
    let tags: Vec<String> = slots.iter().map(|s| tag_for_slot(*s)).collect();
    let live: Vec<String> = [0, 2]
        .iter()
        .map(|i| format!("live{{{}}}", tags[*i]))
        .collect();
    let tiny = format!("tiny{{{}}}", tags[1]);
    assert_eq!(
        cluster.cmd_value(&[
            "TSRANK.CREATE",
            &tiny,
            "WINDOW",
            &format!("{}s", tiny_secs()),
            "SLOT",
            "1s"
        ]),
        v_ok()
    );
    assert_eq!(
        cluster.cmd_value(&["TSRANK.INCRBY", &tiny, "5", "x"]),
        v_int(5)
    );
    let expired_before = info_i64(to, "tally", "tally_slots_expired");
    let members = ["m0", "m1", "m2", "m3"];
    let acks = reshard_under_writes(&cluster, from, to, slots.len(), |cc, i| {
        let key = &live[(i % 2) as usize];
        let member = members[((i / 2) % 4) as usize];
        match cc_cmd(cc, &["TSRANK.INCRBY", key, "1", member]) {
            Ok(Value::Int(_)) => Some(format!("{key} {member}")),
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
    let mut totals: BTreeMap<&str, Vec<(String, i64)>> = BTreeMap::new();
    for (km, n) in &acks {
        let (key, member) = km.split_once(' ').expect("key member");
        assert_eq!(
            cc_cmd(&mut cc, &["TSRANK.SCORE", key, member]),
            Ok(v_int(*n)),
            "{k}: {key} {member}"
        );
        // The main key is the native sorted set of totals.
        assert_eq!(f64_of(&to.cmd_value(&["ZSCORE", key, member])), *n as f64);
        let key_static: &str = live.iter().find(|l| *l == key).expect("live key");
        totals
            .entry(key_static)
            .or_default()
            .push((member.to_string(), *n));
    }
    for (key, mut t) in totals {
        t.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        let want: Vec<&str> = t.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(
            cc_cmd(&mut cc, &["TSRANK.TOP", key, "10"]),
            Ok(v_bulks(&want)),
            "{k}"
        );
    }
    assert_eq!(
        to.cmd_value(&["TSRANK.SCORE", &tiny, "x"]),
        v_int(5),
        "{k}: tiny moved"
    );

    // Failover: the promoted replica expires a leaderboard written before it.
    let fslot = lowest_slots(&cluster, third, 1)[0];
    let ftiny = format!("ftiny{{{}}}", tag_for_slot(fslot));
    assert_eq!(
        third.cmd_value(&["TSRANK.CREATE", &ftiny, "WINDOW", "6s", "SLOT", "1s"]),
        v_ok()
    );
    assert_eq!(
        third.cmd_value(&["TSRANK.INCRBY", &ftiny, "2", "y"]),
        v_int(2)
    );
    let written = Instant::now();
    let new_port = failover(&cluster, third, fslot);
    let promoted = cluster.node_by_port(new_port).expect("promoted node");
    if written.elapsed() < Duration::from_secs(4) {
        let v = promoted.cmd_value(&["TSRANK.SCORE", &ftiny, "y"]);
        assert_eq!(v, v_int(2), "{k}: the promoted replica has the leaderboard");
    }

    let no_slots = |n: &Server, key: &str, slot: u16| {
        n.cmd_value(&["EXISTS", key]) == v_int(0)
            && !keys_in_slot(n, slot).iter().any(|x| x.contains("|slot|"))
    };
    wait_gone(to, "moved tiny leaderboard", |n| {
        no_slots(n, &tiny, slots[1])
    });
    assert_eq!(to.cmd_value(&["TSRANK.SCORE", &tiny, "x"]), v_nil(), "{k}");
    assert!(
        info_i64(to, "tally", "tally_slots_expired") > expired_before,
        "{k}"
    );
    wait_gone(promoted, "leaderboard after failover", |n| {
        no_slots(n, &ftiny, fslot)
    });
    third.cmd_value(&["READONLY"]);
    wait_gone(third, "leaderboard on the demoted primary", |n| {
        no_slots(n, &ftiny, fslot)
    });
    for node in cluster.nodes() {
        node.assert_alive();
    }
}

per_server!(leaderboard_moved_key_by_key_counts_every_write_once);
/// A leaderboard whose slot holds hundreds of keys (one hash per live slot), moved one key
/// per MIGRATE (`--cluster-pipeline 1`) while a writer increments it: for a while the main
/// key and its derived keys sit on different nodes. Every acknowledged write must be
/// counted exactly once afterwards, and the reshard must not fail on a key that a write
/// re-created on the wrong side.
fn leaderboard_moved_key_by_key_counts_every_write_once(kind: &ServerKind) {
    let cluster = start_cluster(kind, 3, 1);
    let k = kind.name.as_str();
    let prim = primaries_by_slot(&cluster);
    let (from, to) = (prim[0], prim[1]);
    let slot = lowest_slots(&cluster, from, 1)[0];
    let key = format!("big{{{}}}", tag_for_slot(slot));
    assert_eq!(
        from.cmd_value(&["TSRANK.CREATE", &key, "WINDOW", "1h", "SLOT", "1s"]),
        v_ok()
    );
    let now = match from.cmd_value(&["TIME"]) {
        Value::Array(t) => int_of(&t[0]) * 1000,
        other => panic!("TIME: {other:?}"),
    };
    let n_slots = if long_run() { 3000 } else { 200 };
    let mut conn = from.conn();
    let mut pipe = redis::pipe();
    for i in 0..n_slots {
        let at = (now - 5000 - i * 1000).to_string();
        pipe.cmd("TSRANK.INCRBY")
            .arg(&key)
            .arg(1)
            .arg("m")
            .arg("AT")
            .arg(at);
    }
    let _: Vec<Value> = pipe.query(&mut conn).expect("populate");
    drop(conn);
    let keys = int_of(&from.cmd_value(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]));
    assert!(keys > n_slots, "{k}: {keys} keys in the slot");

    let stop = AtomicBool::new(false);
    let (acks, errors) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            writer(&cluster, &stop, |cc, _| {
                match cc_cmd(cc, &["TSRANK.INCRBY", &key, "1", "m"]) {
                    Ok(Value::Int(_)) => Some(key.clone()),
                    _ => None,
                }
            })
        });
        let _guard = StopOnDrop(&stop);
        std::thread::sleep(Duration::from_millis(100));
        reshard_with_pipeline(from, to, 1, 1);
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::Relaxed);
        h.join().expect("writer")
    });
    let acked = acks.get(&key).copied().unwrap_or(0);
    assert_eq!(
        owner_of_slot(&cluster, slot).port(),
        to.port(),
        "{k}: slot moved"
    );
    assert!(keys_in_slot(from, slot).is_empty(), "{k}: keys left behind");
    let mut cc = cluster.cluster_client();
    assert_eq!(
        cc_cmd(&mut cc, &["TSRANK.SCORE", &key, "m"]),
        Ok(v_int(n_slots + acked)),
        "{k}: {acked} acknowledged writes during the move ({} refused: {:?})",
        errors.len(),
        errors.iter().take(3).collect::<Vec<_>>()
    );
    for node in cluster.nodes() {
        node.assert_alive();
    }
}
