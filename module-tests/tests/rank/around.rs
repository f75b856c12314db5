//! TSRANK.AROUND, TSRANK.RANK ... TIES and TSRANK.MSCORE against the reference model: over
//! a window that moves while they are read (small slots leaving it and being subtracted
//! under the reads), and over a board with many equal totals before and after a native
//! edit quarantines it; RESP2 and RESP3.

use super::*;

/// What AROUND answers on `ranked` (leaderboard order) for `member` and `count`.
fn around_rows(ranked: &[(String, i64)], member: &str, count: usize) -> Vec<(String, i64)> {
    match ranked.iter().position(|(m, _)| m == member) {
        Some(at) => {
            let end = (at + count + 1).min(ranked.len());
            ranked[at.saturating_sub(count)..end].to_vec()
        }
        None => Vec::new(),
    }
}

/// What RANK ... TIES answers on `ranked` for `member`.
fn tie_rank(ranked: &[(String, i64)], member: &str) -> Value {
    match ranked.iter().find(|(m, _)| m == member) {
        Some((_, total)) => v_int(ranked.iter().filter(|(_, t)| t > total).count() as i64),
        None => v_nil(),
    }
}

/// What MSCORE answers on `ranked` for `asked`.
fn mscores(ranked: &[(String, i64)], asked: &[String]) -> Value {
    v_arr(
        asked
            .iter()
            .map(|a| match ranked.iter().find(|(m, _)| m == a) {
                Some((_, t)) => v_int(*t),
                None => v_nil(),
            })
            .collect(),
    )
}

/// A RESP3 `WITHSCORES` reply (`[member, total]` pairs) as `(member, total)` rows; every
/// row must be a pair.
fn resp3_rows(v: &Value) -> Vec<(String, i64)> {
    let Value::Array(rows) = v else {
        panic!("not an array: {v:?}")
    };
    rows.iter()
        .map(|row| match row {
            Value::Array(pair) if pair.len() == 2 => {
                let Value::Int(total) = pair[1] else {
                    panic!("not an integer total: {row:?}")
                };
                (value_text(&pair[0]).expect("member"), total)
            }
            other => panic!("not a pair: {other:?}"),
        })
        .collect()
}

/// The replies of AROUND (RESP2 with and without scores, RESP3 with scores), RANK ...
/// TIES and MSCORE for `member` and the members `asked`.
#[derive(Debug, PartialEq)]
struct Standing {
    around: Vec<(String, i64)>,
    names: Vec<String>,
    around3: Vec<(String, i64)>,
    ties: Value,
    ties3: Value,
    scores: Value,
    scores3: Value,
}

fn standing(srv: &Server, key: &str, member: &str, count: usize, asked: &[String]) -> Standing {
    let count = count.to_string();
    let mut mscore = vec!["TSRANK.MSCORE".to_string(), key.to_string()];
    mscore.extend(asked.iter().cloned());
    let around = ["TSRANK.AROUND", key, member, &count, "WITHSCORES"];
    Standing {
        around: member_totals(&srv.cmd_value(&around)),
        names: members(&srv.cmd_value(&["TSRANK.AROUND", key, member, &count])),
        around3: resp3_rows(&srv.cmd_value_resp3(&around)),
        ties: srv.cmd_value(&["TSRANK.RANK", key, member, "TIES"]),
        ties3: srv.cmd_value_resp3(&["TSRANK.RANK", key, member, "TIES"]),
        scores: srv.cmd_value(&mscore),
        scores3: srv.cmd_value_resp3(&mscore),
    }
}

/// What [`standing`] answers on the model `ranked`.
fn expected(ranked: &[(String, i64)], member: &str, count: usize, asked: &[String]) -> Standing {
    let around = around_rows(ranked, member, count);
    Standing {
        names: around.iter().map(|(m, _)| m.clone()).collect(),
        around3: around.clone(),
        around,
        ties: tie_rank(ranked, member),
        ties3: tie_rank(ranked, member),
        scores: mscores(ranked, asked),
        scores3: mscores(ranked, asked),
    }
}

per_server!(around_ties_and_mscore_follow_a_moving_window);
/// `WINDOW 2s SLOT 200ms`: increments of 30 members at the server's now for 2.4 s, reads
/// for 5 s, so slots leave the window (and are subtracted by the timer) while the reads
/// run, until the window is empty. Every
/// read bracketed by the server's clock within one slot equals the model of that window.
fn around_ties_and_mscore_follow_a_moving_window(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let key = "{mv}";
    // A tiny expiry budget: each slot that leaves is subtracted over several ticks, so the
    // reads also meet slots that left the window but are still counted in the totals.
    srv.cmd(&["CONFIG", "SET", "tally.expire-budget-us", "10"])
        .expect("config");
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", key, "WINDOW", "2s", "SLOT", "200ms"]),
        v_ok()
    );
    let mut rng = Rng(0x5eed_a7d0);
    let mut model = RankModel::default();
    let start = Instant::now();
    let (mut checked, mut empty_seen) = (0, false);
    while start.elapsed() < Duration::from_millis(5000) {
        if start.elapsed() < Duration::from_millis(2400) {
            let t = server_ms(&srv);
            let mut cmd = vec!["TSRANK.INCRBY".to_string(), key.to_string()];
            for _ in 0..1 + rng.below(4) {
                let (m, n) = (format!("m{}", rng.below(30)), 1 + rng.below(3));
                model.add(t / 200, &m, n);
                cmd.push(n.to_string());
                cmd.push(m);
            }
            cmd.extend(["AT".to_string(), t.to_string()]);
            srv.cmd(&cmd).expect("incrby");
        }
        let member = format!("m{}", rng.below(32));
        let count = [0usize, 1, 2, 4, 40][rng.below(5) as usize];
        let asked: Vec<String> = (0..1 + rng.below(4))
            .map(|_| format!("m{}", rng.below(32)))
            .collect();
        let before = server_ms(&srv);
        let got = standing(&srv, key, &member, count, &asked);
        let after = server_ms(&srv);
        let slot = before / 200;
        if slot == after / 200 {
            let ranked = RankModel::ranked(&model.totals(slot - 9, slot));
            empty_seen |= ranked.is_empty();
            let want = expected(&ranked, &member, count, &asked);
            assert_eq!(got, want, "{k}: {member} count {count} at slot {slot}");
            checked += 1;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(checked > 20, "{k}: only {checked} checks were unambiguous");
    assert!(empty_seen, "{k}: the window never emptied under the reads");
    srv.assert_alive();
}

per_server!(around_ties_and_mscore_equal_the_model_with_many_ties_and_a_quarantine);
/// 150 members with totals of 1 to 6 (many equal) across the slots of a 24 h window: AROUND
/// of every member at several counts, its tie rank and MSCORE equal the model; then a
/// native `HSET` in a slot hash quarantines the board, and they answer the slot hashes as
/// they now are. A missing key answers empty arrays and nils.
fn around_ties_and_mscore_equal_the_model_with_many_ties_and_a_quarantine(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let key = "{ties}";
    let (mut rng, t0, cur) = seeded_board(&srv, 41, key);
    let mut model = RankModel::default();
    for i in 0..150 {
        let member = format!("p{i}");
        for _ in 0..1 + rng.below(2) {
            let ts = ((cur - rng.below(20)) * HOUR + rng.below(HOUR)).min(t0);
            let n = 1 + rng.below(3);
            model.add(ts / HOUR, &member, n);
            let (n, ts) = (n.to_string(), ts.to_string());
            srv.cmd(&["TSRANK.INCRBY", key, &n, &member, "AT", &ts])
                .expect("incrby");
        }
    }
    let check = |model: &RankModel, phase: &str| {
        let now = server_ms(&srv) / HOUR;
        assert!(now - 3 <= cur, "test ran across too many hours");
        let ranked = RankModel::ranked(&model.totals(now - 23, now));
        let asked: Vec<String> = (0..152).map(|i| format!("p{i}")).collect();
        for i in (0..152).step_by(7) {
            let member = format!("p{i}");
            for count in [0usize, 1, 3, 1000] {
                let got = standing(&srv, key, &member, count, &asked[i..i + 1]);
                let want = expected(&ranked, &member, count, &asked[i..i + 1]);
                assert_eq!(got, want, "{k} {phase}: {member} count {count}");
            }
        }
        let mut mscore = vec!["TSRANK.MSCORE".to_string(), key.to_string()];
        mscore.extend(asked.iter().cloned());
        assert_eq!(
            srv.cmd_value(&mscore),
            mscores(&ranked, &asked),
            "{k} {phase}"
        );
    };
    check(&model, "healthy");
    // A native edit of one count: the board answers its slot hashes as they now are.
    let slot = *model.slots.keys().next_back().expect("a slot");
    let slot_key = format!("{key}|slot|{slot}");
    assert!(matches!(
        srv.cmd_value(&["HSET", &slot_key, "p3", "40"]),
        Value::Int(_)
    ));
    model.slots.entry(slot).or_default().insert("p3".into(), 40);
    check(&model, "quarantined");
    let missing = expected(&[], "p1", 2, &["p1".to_string(), "p2".to_string()]);
    let asked = ["p1".to_string(), "p2".to_string()];
    assert_eq!(standing(&srv, "{none}", "p1", 2, &asked), missing, "{k}");
    srv.assert_alive();
}

per_server!(around_and_tie_rank_errors_change_nothing);
/// Bad counts, stray words and arities: exact error texts, and nothing written.
fn around_and_tie_rank_errors_change_nothing(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    srv.cmd(&["TSRANK.INCRBY", "lb", "3", "a", "2", "b"])
        .expect("incrby");
    let errors: &[(&[&str], &str)] = &[
        (
            &["TSRANK.AROUND", "lb", "a", "1001"],
            "ERR count must be between 0 and 1000",
        ),
        (
            &["TSRANK.AROUND", "lb", "a", "-1"],
            "ERR count must be between 0 and 1000",
        ),
        (
            &["TSRANK.AROUND", "lb", "a", "x"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["TSRANK.AROUND", "lb", "a", "1", "WITHSCORES", "WITHSCORES"],
            "ERR syntax error",
        ),
        (
            &["TSRANK.AROUND", "lb", "a", "1", "NOPE"],
            "ERR syntax error",
        ),
        (
            &["TSRANK.AROUND", "lb", "a"],
            "ERR wrong number of arguments for 'tsrank.around' command",
        ),
        (&["TSRANK.RANK", "lb", "a", "TIE"], "ERR syntax error"),
        (
            &["TSRANK.RANK", "lb", "a", "TIES", "TIES"],
            "ERR wrong number of arguments for 'tsrank.rank' command",
        ),
        (
            &["TSRANK.MSCORE", "lb"],
            "ERR wrong number of arguments for 'tsrank.mscore' command",
        ),
    ];
    let before = srv.dump_keyspace();
    for (cmd, want) in errors {
        assert_eq!(srv.cmd(cmd), Err(want.to_string()), "{k}: {cmd:?}");
    }
    assert_eq!(srv.dump_keyspace(), before, "{k}: an error wrote something");
    // The plain key of another type.
    srv.cmd(&["SET", "str", "x"]).expect("set");
    for cmd in [
        &["TSRANK.AROUND", "str", "a", "1"][..],
        &["TSRANK.RANK", "str", "a", "TIES"],
        &["TSRANK.MSCORE", "str", "a"],
    ] {
        let got = srv.cmd(cmd).expect_err("WRONGTYPE");
        assert!(got.starts_with("WRONGTYPE"), "{k}: {cmd:?}: {got}");
    }
    srv.assert_alive();
}
