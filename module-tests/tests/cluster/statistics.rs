//! STATS on a cluster: routing, CROSSSLOT for `REPORT` to another slot, resharding under
//! writes, and expiry on a promoted replica after `CLUSTER FAILOVER`.

use super::*;

per_server!(stats_route_reshard_and_fail_over);
fn stats_route_reshard_and_fail_over(kind: &ServerKind) {
    let cluster = start_cluster(kind, 3, 1);
    let k = kind.name.as_str();
    let mut cc = cluster.cluster_client();

    // REPORT's rankkey is a declared key: another slot is CROSSSLOT, nothing written.
    let owner = cluster.node_for_key("s{a}");
    let e = error_text(&owner.cmd_value(&["STATS.ADD", "s{a}", "1", "REPORT", "r{b}", "m"]))
        .expect("CROSSSLOT");
    assert!(e.starts_with("CROSSSLOT"), "{k}: {e}");
    let e = cc_cmd(&mut cc, &["STATS.ADD", "s{a}", "1", "REPORT", "r{b}", "m"])
        .expect_err("CROSSSLOT through the cluster client");
    assert!(e.starts_with("CROSSSLOT"), "{k}: {e}");
    assert_eq!(cluster.cmd_value(&["EXISTS", "s{a}"]), v_int(0), "{k}");
    assert_eq!(cluster.cmd_value(&["EXISTS", "r{b}"]), v_int(0), "{k}");
    // Same slot: fine.
    assert_eq!(
        cc_cmd(&mut cc, &["STATS.ADD", "s{a}", "4", "REPORT", "r{a}", "m"]),
        Ok(v_int(1))
    );
    assert_eq!(
        f64_of(&cluster.cmd_value(&["ZSCORE", "r{a}", "m"])),
        4.0,
        "{k}"
    );

    // Many statistics objects over every shard.
    let n = spread_count();
    for i in 0..n {
        let key = format!("st:{i}");
        let v = cc_cmd(
            &mut cc,
            &["STATS.ADD", &key, &i.to_string(), &(i + 2).to_string()],
        );
        assert_eq!(v, Ok(v_int(2)), "{k}: {key}");
    }
    assert_spread(&cluster);
    for i in 0..n {
        let key = format!("st:{i}");
        let m = map_of(cc_cmd(&mut cc, &["STATS.GET", &key]).expect("STATS.GET"));
        assert_eq!(int_of(&m["count"]), 2, "{k}: {key}");
        assert_eq!(f64_of(&m["sum"]), (2 * i + 2) as f64, "{k}: {key}");
        assert_eq!(f64_of(&m["min"]), i as f64, "{k}: {key}");
    }

    // Reshard live statistics (with their REPORT ranking in the same slot) while a
    // writer adds values.
    let prim = primaries_by_slot(&cluster);
    let (from, to, third) = (prim[0], prim[1], prim[2]);
    let slots = lowest_slots(&cluster, from, 3);
    let tags: Vec<String> = slots.iter().map(|s| tag_for_slot(*s)).collect();
    let live: Vec<(String, String)> = [0, 2]
        .iter()
        .map(|i| {
            (
                format!("live{{{}}}", tags[*i]),
                format!("slow{{{}}}", tags[*i]),
            )
        })
        .collect();
    let tiny = format!("tiny{{{}}}", tags[1]);
    assert_eq!(
        cluster.cmd_value(&[
            "STATS.CREATE",
            &tiny,
            "PERIOD",
            "1s",
            "KEEP",
            &tiny_secs().to_string()
        ]),
        v_ok()
    );
    assert_eq!(
        cluster.cmd_value(&["STATS.ADD", &tiny, "1", "2", "3"]),
        v_int(3)
    );
    let expired_before = info_i64(to, "tally", "tally_slots_expired");
    let acks = reshard_under_writes(&cluster, from, to, slots.len(), |cc, i| {
        let (key, rk) = &live[(i % 2) as usize];
        match cc_cmd(
            cc,
            &["STATS.ADD", key, "10", "REPORT", rk, "page", "KEEP", "5"],
        ) {
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
    for (key, rk) in &live {
        let n = acks.get(key).copied().unwrap_or(0);
        if n == 0 {
            continue;
        }
        // Every value is 10; periods are 1h, so a window of 2h holds all of them
        // even if the clock crossed an hour meanwhile.
        let m = map_of(cc_cmd(&mut cc, &["STATS.GET", key, "WINDOW", "2h"]).expect("GET"));
        assert_eq!(int_of(&m["count"]), n, "{k}: {key}");
        assert_eq!(f64_of(&m["sum"]), 10.0 * n as f64, "{k}: {key}");
        assert_eq!(f64_of(&m["mean"]), 10.0, "{k}: {key}");
        assert_eq!(
            f64_of(&to.cmd_value(&["ZSCORE", rk, "page"])),
            10.0,
            "{k}: {rk}"
        );
    }
    let info = map_of(to.cmd_value(&["STATS.INFO", &tiny]));
    assert!(
        int_of(&info["periods"]) >= 1,
        "{k}: tiny stats moved with its period"
    );

    // Failover: the promoted replica expires periods written before it.
    let fslot = lowest_slots(&cluster, third, 1)[0];
    let ftiny = format!("ftiny{{{}}}", tag_for_slot(fslot));
    assert_eq!(
        third.cmd_value(&["STATS.CREATE", &ftiny, "PERIOD", "1s", "KEEP", "6"]),
        v_ok()
    );
    assert_eq!(third.cmd_value(&["STATS.ADD", &ftiny, "7"]), v_int(1));
    let written = Instant::now();
    let new_port = failover(&cluster, third, fslot);
    let promoted = cluster.node_by_port(new_port).expect("promoted node");
    if written.elapsed() < Duration::from_secs(4) {
        let m = map_of(promoted.cmd_value(&["STATS.GET", &ftiny, "WINDOW", "6s"]));
        assert_eq!(
            int_of(&m["count"]),
            1,
            "{k}: the promoted replica has the stats"
        );
    }

    // No period field (`<start>:m` / `<start>:q`) left.
    let no_periods = |n: &Server, key: &str| match n.cmd_value(&["HKEYS", key]) {
        Value::Array(f) => !f
            .iter()
            .filter_map(value_text)
            .any(|f| f.ends_with(":m") || f.ends_with(":q")),
        other => panic!("HKEYS: {other:?}"),
    };
    wait_gone(to, "moved tiny stats", |n| no_periods(n, &tiny));
    assert!(
        info_i64(to, "tally", "tally_slots_expired") > expired_before,
        "{k}"
    );
    wait_gone(promoted, "stats after failover", |n| no_periods(n, &ftiny));
    third.cmd_value(&["READONLY"]);
    wait_gone(third, "stats on the demoted primary", |n| {
        no_periods(n, &ftiny)
    });
    for node in cluster.nodes() {
        node.assert_alive();
    }
}
