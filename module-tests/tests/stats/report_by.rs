//! STATS.ADD ... REPORT rankkey member [KEEP n] [BY stat]: each statistic's score, the
//! default (mean), errors that write nothing, and a replica equal to the primary.

use super::*;

/// The score of `member` in the zset `rankkey`.
fn score(srv: &Server, rankkey: &str, member: &str) -> f64 {
    num(&srv.cmd_value(&["ZSCORE", rankkey, member]))
}

per_server!(report_ranks_by_each_statistic);
/// Seeded pages get values in the current period with `REPORT ... BY stat`: every score
/// equals what the page's GET (or QUANTILE) answers for the period, so the ranking of the
/// slowest pages by p99 differs from the ranking by mean where a tail hides.
fn report_ranks_by_each_statistic(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    in_one_period(&srv, |_| {
        let mut rng = Rng(0x6279);
        let stats = ["mean", "max", "count", "sum", "p50", "p90", "p99"];
        for page in 0..6 {
            let member = format!("page:{page}");
            // Page 0 has the highest mean; page 5 a low mean with a long tail.
            for _ in 0..4 {
                let values: Vec<String> = (0..50)
                    .map(|i| {
                        let base = 100.0 - page as f64 * 10.0 + rng.uniform();
                        let tail = if page == 5 && i % 25 == 0 {
                            1000.0
                        } else {
                            0.0
                        };
                        format!("{}", base + tail)
                    })
                    .collect();
                // One object per statistic, each given the same values.
                for stat in stats {
                    let key = format!("{member}:{stat}");
                    let mut args = vec!["STATS.ADD".to_string(), key];
                    args.extend(values.iter().cloned());
                    args.extend(strings(&[
                        "REPORT",
                        &format!("by:{stat}"),
                        &member,
                        "BY",
                        stat,
                    ]));
                    assert!(
                        matches!(srv.cmd_value(&args), Value::Int(_)),
                        "{k}: {args:?}"
                    );
                }
            }
            for stat in stats {
                let get = srv.cmd_value(&["STATS.GET", &format!("{member}:{stat}")]);
                assert_eq!(
                    score(&srv, &format!("by:{stat}"), &member),
                    num(&field(&get, stat)),
                    "{k}: {member} by {stat}"
                );
            }
        }
        // By mean, page 0 is the slowest; by p99 and max, page 5 (its tail).
        let top = |rankkey: &str| srv.cmd_value(&["ZREVRANGE", rankkey, "0", "0"]);
        assert_eq!(top("by:mean"), v_bulks(&["page:0"]), "{k}");
        assert_eq!(top("by:p99"), v_bulks(&["page:5"]), "{k}");
        assert_eq!(top("by:max"), v_bulks(&["page:5"]), "{k}");
        // BY in any case, before or after KEEP; without BY, the mean.
        for args in [
            vec![
                "STATS.ADD",
                "x",
                "4",
                "REPORT",
                "r1",
                "x",
                "KEEP",
                "2",
                "BY",
                "P99",
            ],
            vec![
                "STATS.ADD",
                "y",
                "4",
                "REPORT",
                "r1",
                "y",
                "by",
                "count",
                "keep",
                "2",
            ],
            vec!["STATS.ADD", "z", "4", "6", "REPORT", "r1", "z"],
        ] {
            assert!(
                matches!(srv.cmd_value(&args), Value::Int(_)),
                "{k}: {args:?}"
            );
        }
        assert_eq!(
            srv.cmd_value(&["ZRANGE", "r1", "0", "-1", "WITHSCORES"]),
            v_bulks(&["y", "1", "x", "4", "z", "5"]),
            "{k}"
        );
    });
    srv.assert_alive();
}

per_server!(report_by_errors_write_nothing);
/// `BY` alone, another word after it, or twice: `ERR syntax error`, and nothing is
/// written.
fn report_by_errors_write_nothing(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    assert!(matches!(
        srv.cmd_value(&["STATS.ADD", "s", "1", "REPORT", "rk", "m", "BY", "max"]),
        Value::Int(1)
    ));
    let before = srv.dump_keyspace();
    // `STATS.ADD s 2 REPORT rk m` and what follows.
    let report =
        |tail: &[&'static str]| [&["STATS.ADD", "s", "2", "REPORT", "rk", "m"][..], tail].concat();
    for args in [
        report(&["BY"]),
        report(&["BY", "p95"]),
        report(&["BY", "min"]),
        report(&["BY", "KEEP", "3"]),
        report(&["BY", "max", "BY", "max"]),
        report(&["KEEP", "3", "BY", "max", "KEEP", "3"]),
        vec!["STATS.ADD", "new", "2", "REPORT", "rk2", "m", "BY", "p95"],
    ] {
        assert_eq!(
            error_text(&srv.cmd_value(&args)).as_deref(),
            Some("ERR syntax error"),
            "{k}: {args:?}"
        );
    }
    assert_eq!(
        srv.dump_keyspace(),
        before,
        "{k}: a refused REPORT wrote something"
    );
    srv.assert_alive();
}

per_server!(report_by_reaches_a_replica);
/// The scores of every statistic reach a replica as ZADD effects: the replica's rankings
/// equal the primary's.
fn report_by_reaches_a_replica(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    let mut rng = Rng(0x7265);
    for i in 0..60 {
        let key = format!("s:{}", i % 5);
        let stat = ["mean", "max", "count", "sum", "p50", "p90", "p99"][i % 7];
        let values: Vec<String> = (0..20).map(|_| format!("{}", rng.lognormal())).collect();
        let mut args = vec!["STATS.ADD".to_string(), key.clone()];
        args.extend(values);
        args.extend(strings(&[
            "REPORT",
            &format!("by:{stat}"),
            &key,
            "KEEP",
            "3",
            "BY",
            stat,
        ]));
        assert!(
            matches!(primary.cmd_value(&args), Value::Int(_)),
            "{args:?}"
        );
    }
    assert_replica_equal(&primary, &replica, "after REPORT BY");
}
