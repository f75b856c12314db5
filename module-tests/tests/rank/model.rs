//! The seeded model-based workload (members, increments, `AT` across the window) checked
//! against a reference model: TOP (count, OFFSET, WITHSCORES, WINDOW), SCORE, RANK, ties
//! ordered as `ZREVRANGE` orders them, and `ZREVRANGE key 0 -1` equal to TOP.

use super::*;

// ================================================================= model test

per_server!(model_random_workload_top_score_rank_window);
fn model_random_workload_top_score_rank_window(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let mut conn = srv.conn();
    for (seed, board) in [(7u64, "lb:a"), (99, "lb:b"), (12345, "lb:c")] {
        let (mut rng, t0, cur) = seeded_board(&srv, seed, board);
        let mut model = RankModel::default();
        for round in 0..6 {
            // A batch of writes: members m0..m29, increments 1..3, AT up to 20 h back.
            let mut cmds = Vec::new();
            let mut expected = Vec::new();
            for _ in 0..60 {
                let back = rng.below(21);
                let ts = (cur - back) * HOUR + rng.below(HOUR);
                let ts = ts.min(t0);
                let npairs = 1 + rng.below(3);
                let mut cmd = vec!["TSRANK.INCRBY".to_string(), board.to_string()];
                let mut replies = Vec::new();
                for _ in 0..npairs {
                    let m = format!("m{}", rng.below(30));
                    let n = 1 + rng.below(3);
                    model.add(ts / HOUR, &m, n);
                    replies.push(model.totals(cur - 23, cur)[&m]);
                    cmd.push(n.to_string());
                    cmd.push(m);
                }
                cmd.push("AT".into());
                cmd.push(ts.to_string());
                cmds.push(cmd);
                expected.push(match replies.as_slice() {
                    [one] => v_int(*one),
                    _ => v_arr(replies.iter().map(|r| v_int(*r)).collect()),
                });
            }
            assert_eq!(
                pipeline(&mut conn, &cmds),
                expected,
                "{k} {board} round {round}"
            );
            assert!(
                server_ms(&srv) / HOUR - 3 <= cur,
                "test ran across too many hours"
            );
            let now_slot = server_ms(&srv) / HOUR;
            let ranked = RankModel::ranked(&model.totals(now_slot - 23, now_slot));
            // Whole board.
            let top = srv.cmd_value(&["TSRANK.TOP", board, "1000", "WITHSCORES"]);
            assert_eq!(member_totals(&top), ranked, "{k} {board} round {round}");
            let z = srv.cmd_value(&["ZREVRANGE", board, "0", "-1", "WITHSCORES"]);
            assert_eq!(
                member_totals(&z),
                member_totals(&top),
                "{k}: ZREVRANGE equals TOP"
            );
            // Slices with OFFSET, with and without scores.
            for _ in 0..5 {
                let (count, offset) = (rng.below(12), rng.below(35));
                let want: Vec<(String, i64)> = ranked
                    .iter()
                    .skip(offset as usize)
                    .take(count as usize)
                    .cloned()
                    .collect();
                let v = srv.cmd_value(&[
                    "TSRANK.TOP",
                    board,
                    &count.to_string(),
                    "OFFSET",
                    &offset.to_string(),
                    "WITHSCORES",
                ]);
                assert_eq!(
                    member_totals(&v),
                    want,
                    "{k} {board} TOP {count} OFFSET {offset}"
                );
                let v = srv.cmd_value(&[
                    "TSRANK.TOP",
                    board,
                    &count.to_string(),
                    "OFFSET",
                    &offset.to_string(),
                ]);
                assert_eq!(
                    members(&v),
                    want.iter().map(|p| p.0.clone()).collect::<Vec<_>>()
                );
            }
            // SCORE and RANK of every member (and of one that never appeared).
            for (pos, (m, total)) in ranked.iter().enumerate() {
                assert_eq!(
                    srv.cmd_value(&["TSRANK.SCORE", board, m]),
                    v_int(*total),
                    "{k} {m}"
                );
                assert_eq!(
                    srv.cmd_value(&["TSRANK.RANK", board, m]),
                    v_int(pos as i64),
                    "{k} {m}"
                );
            }
            assert_eq!(srv.cmd_value(&["TSRANK.SCORE", board, "nobody"]), v_nil());
            assert_eq!(srv.cmd_value(&["TSRANK.RANK", board, "nobody"]), v_nil());
            // Sub-windows from the slot hashes.
            for hours in [1i64, 2, 5, 12, 24] {
                let before = server_ms(&srv) / HOUR;
                let v = srv.cmd_value(&[
                    "TSRANK.TOP",
                    board,
                    "50",
                    "WITHSCORES",
                    "WINDOW",
                    &format!("{hours}h"),
                ]);
                let after = server_ms(&srv) / HOUR;
                if before != after {
                    continue; // an hour boundary passed during the query
                }
                let want = RankModel::ranked(&model.totals(before - hours + 1, before));
                let want: Vec<_> = want.into_iter().take(50).collect();
                assert_eq!(member_totals(&v), want, "{k} {board} WINDOW {hours}h");
            }
            let info = srv.cmd_value(&["TSRANK.INFO", board]);
            let Value::Array(info) = info else {
                panic!("{info:?}")
            };
            assert_eq!(info[5], v_int(ranked.len() as i64), "{k} members");
        }
    }
    srv.assert_alive();
}
