//! Leaderboards at scale: reads stay within 10 ms of server time while a board of 100k
//! members (`TALLY_LONG=1`: a million) is quarantined after a native edit of one slot hash
//! (every reply equals a brute-force model of the board before or after the edit), and
//! while a slot of as many members leaves the window and is subtracted (every reply
//! equals a model of the new window). Durations come from the
//! server's own clock: `SLOWLOG` with `slowlog-log-slower-than 10000`, and the longest
//! timer tick of `INFO tally`.

use std::collections::BTreeMap;
use std::time::Duration;

use module_tests::*;

/// Members in the big slot (`TALLY_LONG=1`: ten times more).
fn members() -> usize {
    if std::env::var("TALLY_LONG").is_ok_and(|v| v == "1") {
        1_000_000
    } else {
        100_000
    }
}

/// Writes `count(i)` for member `m{i}`, `i` in `0..n`, into the slot containing `at`, in
/// pipelined INCRBYs of 1000 pairs.
fn fill(srv: &Server, key: &str, n: usize, at: i64, count: impl Fn(usize) -> i64) {
    let mut conn = srv.conn();
    let mut cmds = Vec::new();
    for start in (0..n).step_by(1000) {
        let mut cmd = vec!["TSRANK.INCRBY".to_string(), key.to_string()];
        for i in start..(start + 1000).min(n) {
            cmd.push(count(i).to_string());
            cmd.push(format!("m{i}"));
        }
        cmd.push("AT".into());
        cmd.push(at.to_string());
        cmds.push(cmd);
        if cmds.len() == 20 {
            for reply in pipeline(&mut conn, &cmds) {
                assert!(matches!(reply, Value::Array(_)), "{reply:?}");
            }
            cmds.clear();
        }
    }
    if !cmds.is_empty() {
        for reply in pipeline(&mut conn, &cmds) {
            assert!(matches!(reply, Value::Array(_)), "{reply:?}");
        }
    }
}

/// One seeded `TSRANK.INCRBY key <1-4> m<i> AT at` of one of `n + 50` members (50 of them
/// new), added to `model`.
fn increment_at_random(
    srv: &Server,
    key: &str,
    at: i64,
    n: usize,
    rng: &mut Rng,
    model: &mut RankModel,
) {
    let member = format!("m{}", rng.below(n as i64 + 50));
    let by = 1 + rng.below(4);
    let (by_text, at_text) = (by.to_string(), at.to_string());
    let reply = srv.cmd_value(&["TSRANK.INCRBY", key, &by_text, &member, "AT", &at_text]);
    assert!(
        matches!(reply, Value::Int(_)),
        "{}: {reply:?}",
        srv.kind().name
    );
    model.add(at / 1000, &member, by);
}

/// The replies of TOP, SCORE, RANK and INFO `members` of `key` for `member`, and of the
/// standings reads: AROUND 3, RANK ... TIES, MSCORE of `member`, `m0` and `nobody`.
#[derive(Debug, PartialEq)]
struct Read {
    top: Vec<(String, i64)>,
    score: Value,
    rank: Value,
    members: Value,
    around: Vec<(String, i64)>,
    ties: Value,
    scores: Value,
}

fn read(srv: &Server, key: &str, member: &str) -> Read {
    let top = member_totals(&srv.cmd_value(&["TSRANK.TOP", key, "10", "WITHSCORES"]));
    let score = srv.cmd_value(&["TSRANK.SCORE", key, member]);
    let rank = srv.cmd_value(&["TSRANK.RANK", key, member]);
    let around = srv.cmd_value(&["TSRANK.AROUND", key, member, "3", "WITHSCORES"]);
    let ties = srv.cmd_value(&["TSRANK.RANK", key, member, "TIES"]);
    let scores = srv.cmd_value(&["TSRANK.MSCORE", key, member, "m0", "nobody"]);
    let info = map_pairs(&srv.cmd_value(&["TSRANK.INFO", key]));
    let members = info
        .into_iter()
        .find(|(f, _)| f == "members")
        .map_or(Value::Nil, |(_, v)| v);
    Read {
        top,
        score,
        rank,
        members,
        around: member_totals(&around),
        ties,
        scores,
    }
}

/// What [`read`] answers on the model `rows` (leaderboard order).
fn expected(rows: &[(String, i64)], member: &str) -> Read {
    let at = rows.iter().position(|(m, _)| m == member);
    let score_of = |name: &str| {
        rows.iter()
            .find(|(m, _)| m == name)
            .map_or(Value::Nil, |(_, t)| v_int(*t))
    };
    Read {
        top: rows.iter().take(10).cloned().collect(),
        score: at.map_or(Value::Nil, |i| v_int(rows[i].1)),
        rank: at.map_or(Value::Nil, |i| v_int(i as i64)),
        members: v_int(rows.len() as i64),
        around: at.map_or(Vec::new(), |i| {
            rows[i.saturating_sub(3)..(i + 4).min(rows.len())].to_vec()
        }),
        ties: at.map_or(Value::Nil, |i| {
            v_int(rows.iter().filter(|(_, t)| *t > rows[i].1).count() as i64)
        }),
        scores: v_arr(vec![score_of(member), score_of("m0"), score_of("nobody")]),
    }
}

fn either<T: PartialEq>(got: &T, a: &T, b: &T) -> bool {
    got == a || got == b
}

/// Logs every command of 10 ms or more and starts watching for tally commands and timer
/// ticks that long (beyond the time the server loses to other work): see [`StallWatch`].
fn watch_slow_commands(srv: &Server) -> StallWatch {
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]),
        v_ok()
    );
    StallWatch::start(srv, STALL_LIMIT_US)
}

/// The SLOT of [`big_slot_board`] in ms: a second, or ten with `TALLY_LONG=1`, where
/// writing its million members takes longer than a second and the window of four slots
/// must still hold the slot they are written to.
fn big_slot_ms() -> i64 {
    if members() > 100_000 {
        10_000
    } else {
        1_000
    }
}

/// A board whose big slot is about to leave the window: see [`big_slot_board`].
struct BigSlot {
    /// The board's SLOT in ms ([`big_slot_ms`]).
    slot: i64,
    /// The index of the slot with [`members`] members.
    big: i64,
    /// The start of the slot three later, with 50 of them and `late` again.
    next: i64,
    /// The model of the window once the big slot has left, in leaderboard order.
    rows: Vec<(String, i64)>,
}

/// `key` as `WINDOW 4s SLOT 1s` (four slots of [`big_slot_ms`]) with a tiny expiry budget
/// (the expiry lasts longer than the tests look at it): [`members`] members in one slot
/// written right after a slot boundary, then 50 of them and `late` three slots later.
fn big_slot_board(srv: &Server, key: &str) -> BigSlot {
    srv.cmd(&["CONFIG", "SET", "tally.expire-budget-us", "10"])
        .expect("config");
    let slot = big_slot_ms();
    let (window, slot_arg) = (format!("{}ms", 4 * slot), format!("{slot}ms"));
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", key, "WINDOW", &window, "SLOT", &slot_arg]),
        v_ok()
    );
    let mut t0 = server_ms(srv);
    while t0 % slot > 200 {
        std::thread::sleep(Duration::from_millis(10));
        t0 = server_ms(srv);
    }
    let big = t0 / slot;
    fill(srv, key, members(), t0, |i| (i % 3) as i64 + 1);
    let next = (big + 3) * slot;
    while server_ms(srv) < next {
        std::thread::sleep(Duration::from_millis(5));
    }
    fill(srv, key, 50, next, |_| 1);
    let late = srv.cmd_value(&["TSRANK.INCRBY", key, "5", "late", "AT", &next.to_string()]);
    assert_eq!(late, v_int(5), "{key}");
    let mut model: BTreeMap<String, i64> = (0..50).map(|i| (format!("m{i}"), 1)).collect();
    model.insert("late".into(), 5);
    BigSlot {
        slot,
        big,
        next,
        rows: RankModel::ranked(&model),
    }
}

/// Writes `early` 7 and `m7` 2 into the slot after the big one of [`big_slot_board`]:
/// that slot leaves the window a slot after the big one, while the big one is still
/// being subtracted. The model of the window while both are in it, from `big.rows` (the
/// model once both have left).
fn add_early_slot(srv: &Server, key: &str, big: &BigSlot) -> Vec<(String, i64)> {
    let at = ((big.big + 1) * big.slot).to_string();
    let reply = srv.cmd_value(&["TSRANK.INCRBY", key, "7", "early", "2", "m7", "AT", &at]);
    assert!(matches!(reply, Value::Array(_)), "{reply:?}");
    let mut model: BTreeMap<String, i64> = big.rows.iter().cloned().collect();
    model.insert("early".into(), 7);
    *model.entry("m7".into()).or_default() += 2;
    RankModel::ranked(&model)
}

/// Runs a big-slot scenario on keys `{base0}`, then `{base1}` ...: its reads must see the
/// subtraction in progress in each phase (a second each). A machine that stalls the test
/// through a whole phase leaves that phase unobserved, not wrong: the scenario runs again
/// on fresh keys (after a `FLUSHALL` of `srv`), at most three times.
fn observe_both_phases(
    srv: &Server,
    base: &str,
    mut scenario: impl FnMut(&str) -> Result<(), String>,
) {
    let mut missed = Vec::new();
    for attempt in 0..3 {
        if attempt > 0 {
            assert_eq!(srv.cmd_value(&["FLUSHALL"]), v_ok());
        }
        match scenario(&format!("{{{base}{attempt}}}")) {
            Ok(()) => return,
            Err(why) => {
                println!("{why}; again on fresh keys");
                missed.push(why);
            }
        }
    }
    panic!("{missed:?}");
}

per_server!(one_kind_at_a_time: reads_stay_fast_while_a_big_slot_expires);
/// `WINDOW 4s SLOT 1s`, 100k members in one slot, `early` and one of them in the next
/// slot, 50 of them and `late` three slots after the big one; a tiny expiry budget. For
/// the two seconds after the big slot leaves the window, while its subtraction is still
/// running, TOP, TOP ... WINDOW, SCORE, RANK, INFO and HISTORY answer the model of the new
/// window, each within 10 ms: first with `early`'s slot in the window, then, once that
/// slot has left too, without it. (They walked the members of the expiring slot, 50-400
/// ms here, until the board kept its totals without that slot ready before it left; and
/// again once a second slot left while the big one was subtracted, until the reads
/// corrected only that second slot's counts.)
fn reads_stay_fast_while_a_big_slot_expires(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    observe_both_phases(&srv, "bd", |key| {
        let board = big_slot_board(&srv, key);
        let with_early = add_early_slot(&srv, key, &board);
        let BigSlot {
            slot,
            big,
            next,
            rows,
        } = board;
        let big_slot = format!("{key}|slot|{big}");
        // The big slot leaves at slot big + 4, `early`'s a slot later, `next`'s at big + 7.
        let leaves = (big + 4) * slot;
        let (early_leaves, stop) = (leaves + slot, leaves + 2 * slot);
        let sub_window = format!("{}ms", 2 * slot);
        while server_ms(&srv) < leaves - 300 {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut watch = watch_slow_commands(&srv);
        let mut reads = [0, 0];
        let mut pending_seen = [false, false];
        let next_row = Value::Array(vec![v_int(next), v_int(1)]);
        let early_row = Value::Array(vec![v_int((big + 1) * slot), v_int(2)]);
        loop {
            let before = server_ms(&srv);
            if before >= stop {
                break;
            }
            if before < leaves {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            let phase = usize::from(before >= early_leaves);
            let pending = srv.query::<i64, _>(&["EXISTS", &big_slot]) == 1;
            let zcard = srv.query::<i64, _>(&["ZCARD", key]);
            let got = read(&srv, key, "m7");
            let gone_score = srv.cmd_value(&["TSRANK.SCORE", key, "m5000"]);
            let sub =
                srv.cmd_value(&["TSRANK.TOP", key, "10", "WITHSCORES", "WINDOW", &sub_window]);
            let history = srv.cmd_value(&["TSRANK.HISTORY", key, "m7"]);
            let after = server_ms(&srv);
            if after >= stop || usize::from(after >= early_leaves) != phase {
                continue;
            }
            // The sub-window of two slots holds `next`'s slot until `early`'s leaves the window.
            let (model, sub_top, history_want) = match phase {
                0 => (
                    &with_early,
                    expected(&rows, "m7").top,
                    vec![early_row.clone(), next_row.clone()],
                ),
                _ => (&rows, Vec::new(), vec![next_row.clone()]),
            };
            let want = expected(model, "m7");
            assert_eq!(got, want, "{k}: phase {phase}");
            assert_eq!(gone_score, Value::Nil, "{k}: SCORE of an expired member");
            assert_eq!(
                member_totals(&sub),
                sub_top,
                "{k}: TOP WINDOW 2s, phase {phase}"
            );
            assert_eq!(
                history,
                Value::Array(history_want),
                "{k}: HISTORY, phase {phase}"
            );
            reads[phase] += 1;
            pending_seen[phase] |= pending && zcard > model.len() as i64;
            watch.check(&srv, &format!("reads, phase {phase}"));
        }
        watch.check(&srv, k);
        if pending_seen == [true, true] {
            Ok(())
        } else {
            Err(format!(
                "{k}: no read saw the expiry in progress in each phase ({reads:?} reads)"
            ))
        }
    });
    srv.assert_alive();
}

per_server!(one_kind_at_a_time: reads_stay_fast_on_a_quarantined_board);
/// A board of 100k members; a native `HSET` of one member in a slot hash quarantines it.
/// Until the next write, every SCORE, RANK, TOP, INFO and HISTORY takes less than 10 ms:
/// they answer the board as tally left it (its sorted set) while the timer sums the slot
/// hashes, then the totals of the slot hashes as they now are. Those totals count in
/// `tally_rank_memory_bytes` and are freed once the next write has started rebuilding
/// the board.
fn reads_stay_fast_on_a_quarantined_board(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "{q}", "WINDOW", "1h", "SLOT", "1m"]),
        v_ok()
    );
    let t0 = server_ms(&srv);
    let slot = t0 / 60_000;
    let n = members();
    fill(&srv, "{q}", n, t0, |i| (i % 1000) as i64 + 1);
    let mut model: BTreeMap<String, i64> = (0..n)
        .map(|i| (format!("m{i}"), (i % 1000) as i64 + 1))
        .collect();
    let before = RankModel::ranked(&model);
    // The native edit: m1 goes from 2 to 5000, first on the board.
    let slot_name = format!("{{q}}|slot|{slot}");
    let mut watch = watch_slow_commands(&srv);
    assert_eq!(srv.cmd_value(&["HSET", &slot_name, "m1", "5000"]), v_int(0));
    let edited_at = std::time::Instant::now();
    model.insert("m1".into(), 5000);
    let after = RankModel::ranked(&model);
    let want = [expected(&before, "m1"), expected(&after, "m1")];
    let middle = [expected(&before, "m12345"), expected(&after, "m12345")];
    assert_eq!(want[1].rank, v_int(0));
    let history_want = Value::Array(vec![Value::Array(vec![v_int(slot * 60_000), v_int(5000)])]);
    // Until the timer is done the board answers as before the edit, then as after it.
    let mut rounds_after = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while rounds_after < 10 {
        assert!(
            std::time::Instant::now() < deadline,
            "{k}: the board never answered the edited slots"
        );
        let (m1, mid) = (read(&srv, "{q}", "m1"), read(&srv, "{q}", "m12345"));
        let history = srv.cmd_value(&["TSRANK.HISTORY", "{q}", "m1"]);
        assert_eq!(history, history_want, "{k}: HISTORY");
        if m1 == want[1] && mid == middle[1] {
            if rounds_after == 0 {
                println!(
                    "{k}: {n} members: the edit answered {:?} after it",
                    edited_at.elapsed()
                );
            }
            rounds_after += 1;
            continue;
        }
        // The timer finished in the middle of this round: each reply is one or the other.
        assert_eq!(
            rounds_after, 0,
            "{k}: answered the edit, then not: {m1:?} {mid:?}"
        );
        for (got, [old, new]) in [(&m1, &want), (&mid, &middle)] {
            assert!(
                either(&got.top, &old.top, &new.top)
                    && either(&got.score, &old.score, &new.score)
                    && either(&got.rank, &old.rank, &new.rank)
                    && either(&got.members, &old.members, &new.members)
                    && either(&got.around, &old.around, &new.around)
                    && either(&got.ties, &old.ties, &new.ties)
                    && either(&got.scores, &old.scores, &new.scores),
                "{k}: {got:?} is neither {old:?} nor {new:?}"
            );
        }
    }
    watch.check(&srv, k);
    // The timer's totals of the quarantined board count in the family's memory, and go
    // once the next write has started the board's rebuild (in steps, by the timer).
    let held = info_i64(&srv, "tally", "tally_rank_memory_bytes");
    println!(
        "{k}: {n} quarantined members: rank_memory_bytes {held} ({} per member)",
        held / n as i64
    );
    assert!(held > 40 * n as i64, "{k}: {held} bytes for {n} members");
    // The module's bookkeeping figure is the families' together: here, the board's.
    let state = info_i64(&srv, "tally", "tally_state_bytes");
    assert!(
        state >= held && state < held + (1 << 16),
        "{k}: state {state}, rank {held}"
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "{q}", "1", "m1"]),
        v_int(5001)
    );
    assert!(
        wait_until(Duration::from_secs(5), || {
            info_i64(&srv, "tally", "tally_rank_memory_bytes") < 1 << 16
        }),
        "{k}: {} bytes stay after the rebuild",
        info_i64(&srv, "tally", "tally_rank_memory_bytes")
    );
    srv.assert_alive();
}

per_server!(one_kind_at_a_time: replies_equal_the_model_while_large_slots_leave_in_turn);
/// `WINDOW 3s SLOT 1s`, two consecutive slots of 20,000 members each (the same members,
/// other counts), then random increments every few milliseconds, with a tiny expiry
/// budget: while each large slot leaves the window and is subtracted (the second one
/// right after the first), TOP, SCORE, RANK and INFO answer the model of the window of the
/// moment, as they do before and after.
fn replies_equal_the_model_while_large_slots_leave_in_turn(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    srv.cmd(&["CONFIG", "SET", "tally.expire-budget-us", "10"])
        .expect("config");
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "{ws}", "WINDOW", "3s", "SLOT", "1s"]),
        v_ok()
    );
    let mut t0 = server_ms(&srv);
    while t0 % 1000 > 200 {
        std::thread::sleep(Duration::from_millis(10));
        t0 = server_ms(&srv);
    }
    let first = t0 / 1000;
    let n = 20_000;
    let mut model = RankModel::default();
    fill(&srv, "{ws}", n, t0, |i| (i % 5) as i64 + 1);
    (0..n).for_each(|i| model.add(first, &format!("m{i}"), (i % 5) as i64 + 1));
    while server_ms(&srv) < (first + 1) * 1000 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let second_at = (first + 1) * 1000;
    fill(&srv, "{ws}", n, second_at, |i| (i % 7) as i64 + 1);
    (0..n).for_each(|i| model.add(first + 1, &format!("m{i}"), (i % 7) as i64 + 1));
    let mut rng = Rng(0x5EED);
    let (mut checks, mut pending_checks) = (0, [0, 0]);
    let end = (first + 6) * 1000;
    loop {
        let at = server_ms(&srv);
        if at >= end {
            break;
        }
        increment_at_random(&srv, "{ws}", at, n, &mut rng, &mut model);
        let probe = format!("m{}", rng.below(n as i64 + 50));
        let before = server_ms(&srv) / 1000;
        let pending = [first, first + 1]
            .map(|slot| before > slot + 2 && exists(&srv, format!("{{ws}}|slot|{slot}")));
        let got = read(&srv, "{ws}", &probe);
        if server_ms(&srv) / 1000 != before {
            continue;
        }
        let rows = RankModel::ranked(&model.totals(before - 2, before));
        assert_eq!(got, expected(&rows, &probe), "{k}: slot {before}, {probe}");
        checks += 1;
        for (seen, was_pending) in pending_checks.iter_mut().zip(pending) {
            *seen += usize::from(was_pending);
        }
    }
    println!("{k}: {checks} checks, {pending_checks:?} while a large slot was subtracted");
    assert!(
        pending_checks.iter().all(|&c| c > 0),
        "{k}: {pending_checks:?} checks while each large slot was subtracted"
    );
    srv.assert_alive();
}

per_server!(one_kind_at_a_time: a_write_to_a_quarantined_board_is_bounded);
/// A board of 100k members quarantined by a native `HSET` of one slot hash: the next
/// `TSRANK.INCRBY` answers the exact totals of the slot hashes within 10 ms (it rebuilt
/// the whole board in one pass, ~580 ms here, until the write started a rebuild in steps
/// that the timer finishes), the reads that follow converge to the edited board with the
/// increments, the board leaves quarantine, and a replica ends equal to the primary.
fn a_write_to_a_quarantined_board_is_bounded(kind: &ServerKind) {
    let (srv, replica) = start_with_replica(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "{w}", "WINDOW", "1h", "SLOT", "1m"]),
        v_ok()
    );
    let t0 = server_ms(&srv);
    let slot = t0 / 60_000;
    let n = members();
    fill(&srv, "{w}", n, t0, |i| (i % 1000) as i64 + 1);
    let mut model: BTreeMap<String, i64> = (0..n)
        .map(|i| (format!("m{i}"), (i % 1000) as i64 + 1))
        .collect();
    let mut watch = watch_slow_commands(&srv);
    let slot_name = format!("{{w}}|slot|{slot}");
    assert_eq!(srv.cmd_value(&["HSET", &slot_name, "m1", "5000"]), v_int(0));
    model.insert("m1".into(), 5000);
    // The write answers the totals of the slot hashes, at once and again right after.
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "{w}", "1", "m1", "3", "m2"]),
        Value::Array(vec![v_int(5001), v_int(6)]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "{w}", "1", "m1"]),
        v_int(5002),
        "{k}"
    );
    model.insert("m1".into(), 5002);
    model.insert("m2".into(), 6);
    let rows = RankModel::ranked(&model);
    let want = expected(&rows, "m1");
    let middle = expected(&rows, "m12345");
    assert_eq!(want.rank, v_int(0));
    assert!(
        wait_until(Duration::from_secs(30), || {
            read(&srv, "{w}", "m1") == want && read(&srv, "{w}", "m12345") == middle
        }),
        "{k}: {:?} is not {want:?}",
        read(&srv, "{w}", "m1")
    );
    assert_eq!(read(&srv, "{w}", "m2"), expected(&rows, "m2"), "{k}");
    assert!(
        wait_until(Duration::from_secs(30), || {
            srv.cmd_value(&["HEXISTS", "{w}|meta", "_edited"]) == v_int(0)
        }),
        "{k}: the board stays quarantined"
    );
    // Healthy again: a write answers from the sorted set.
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "{w}", "2", "m12345"]),
        v_int(348),
        "{k}"
    );
    watch.check(&srv, k);
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, k);
    srv.assert_alive();
}

per_server!(one_kind_at_a_time: a_promoted_replica_reads_fast_while_a_big_slot_expires);
/// The case of [`replica_reads_stay_fast_while_a_big_slot_expires`], with the replica
/// promoted (`REPLICAOF NO ONE`) while the primary subtracts the big slot: the promoted
/// node's own timer subtracts the rest, and its reads, before and after the promotion,
/// answer the model of the new window within 10 ms from the totals it kept as a replica
/// (a node that has none walks the slot until the subtraction ends).
fn a_promoted_replica_reads_fast_while_a_big_slot_expires(kind: &ServerKind) {
    let (srv, replica) = start_with_replica(kind);
    let k = &kind.name;
    let BigSlot {
        slot, big, rows, ..
    } = big_slot_board(&srv, "{bp}");
    let want = expected(&rows, "m7");
    let big_slot = format!("{{bp}}|slot|{big}");
    let leaves = (big + 4) * slot;
    let (promote_at, stop, model_ends) = (leaves + 300, leaves + 2 * slot, leaves + 3 * slot);
    replica
        .cmd(&["CONFIG", "SET", "tally.expire-budget-us", "10"])
        .expect("config");
    while server_ms(&replica) < leaves - 300 {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut watch = watch_slow_commands(&replica);
    let mut promoted = false;
    let (mut reads, mut pending_seen) = (0, false);
    loop {
        let before = server_ms(&replica);
        if before >= stop {
            break;
        }
        if before < leaves {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        if !promoted && before >= promote_at {
            assert_eq!(replica.cmd_value(&["REPLICAOF", "NO", "ONE"]), v_ok());
            promoted = true;
        }
        let pending = replica.query::<i64, _>(&["EXISTS", &big_slot]) == 1;
        let zcard = replica.query::<i64, _>(&["ZCARD", "{bp}"]);
        let got = read(&replica, "{bp}", "m7");
        if server_ms(&replica) >= model_ends {
            break;
        }
        assert_eq!(got, want, "{k}: promoted {promoted}");
        reads += 1;
        pending_seen |= pending && zcard > rows.len() as i64;
        watch.check_commands(&replica, &format!("promoted {promoted}"));
    }
    assert!(
        promoted && pending_seen && reads > 0,
        "{k}: no read saw the expiry in progress ({reads} reads)"
    );
    // The reads only (check_commands): the first subtraction steps of a newly promoted
    // node can take a few ms longer than its budget on a loaded machine, with or without
    // these totals.
    watch.check_commands(&replica, k);
    replica.assert_alive();
    srv.assert_alive();
}

per_server!(one_kind_at_a_time: replica_replies_equal_the_model_while_a_large_slot_leaves);
/// `WINDOW 3s SLOT 1s`, a slot of 20,000 members, then seeded random increments on the
/// primary (members of that slot and others) with a tiny expiry budget; after each one
/// has reached the replica (`WAIT`), TOP, SCORE, RANK and INFO on the replica answer the
/// model of the window of the moment: before the slot leaves, while the primary's effects
/// subtract it (the replica answers from its own totals without that slot, which follow
/// both the increments and the subtraction) and after.
fn replica_replies_equal_the_model_while_a_large_slot_leaves(kind: &ServerKind) {
    let (srv, replica) = start_with_replica(kind);
    let k = &kind.name;
    srv.cmd(&["CONFIG", "SET", "tally.expire-budget-us", "10"])
        .expect("config");
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "{rm}", "WINDOW", "3s", "SLOT", "1s"]),
        v_ok()
    );
    let mut t0 = server_ms(&srv);
    while t0 % 1000 > 200 {
        std::thread::sleep(Duration::from_millis(10));
        t0 = server_ms(&srv);
    }
    let first = t0 / 1000;
    let n = 20_000;
    let mut model = RankModel::default();
    fill(&srv, "{rm}", n, t0, |i| (i % 5) as i64 + 1);
    (0..n).for_each(|i| model.add(first, &format!("m{i}"), (i % 5) as i64 + 1));
    let big_slot = format!("{{rm}}|slot|{first}");
    let mut rng = Rng(0x5EED_0003);
    let (mut checks, mut pending_checks) = (0, 0);
    let end = (first + 5) * 1000;
    loop {
        let at = server_ms(&srv);
        if at >= end {
            break;
        }
        increment_at_random(&srv, "{rm}", at, n, &mut rng, &mut model);
        assert_eq!(
            srv.cmd_value(&["WAIT", "1", "10000"]),
            v_int(1),
            "{k}: WAIT"
        );
        let probe = format!("m{}", rng.below(n as i64 + 50));
        let before = server_ms(&replica) / 1000;
        let pending = before > first + 2 && exists(&replica, &big_slot);
        let got = read(&replica, "{rm}", &probe);
        if server_ms(&replica) / 1000 != before {
            continue;
        }
        let rows = RankModel::ranked(&model.totals(before - 2, before));
        assert_eq!(got, expected(&rows, &probe), "{k}: slot {before}, {probe}");
        checks += 1;
        pending_checks += usize::from(pending);
    }
    println!("{k}: {checks} checks, {pending_checks} while the large slot was subtracted");
    assert!(
        pending_checks > 0,
        "{k}: no check while the large slot was subtracted ({checks} checks)"
    );
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, k);
    replica.assert_alive();
    srv.assert_alive();
}

per_server!(one_kind_at_a_time: replica_reads_stay_fast_while_a_big_slot_expires);
/// The case of [`reads_stay_fast_while_a_big_slot_expires`], read on a replica: while the
/// primary's timer subtracts the 100k-member slot that left the window (replicated as
/// effects), TOP, SCORE, RANK and INFO on the replica answer the model of the new window,
/// each within 10 ms of the replica's time, before and after `early`'s slot leaves too
/// (they walked the slot, 100-400 ms here, until the replica kept its own totals without
/// that slot, in step with the primary's effects).
fn replica_reads_stay_fast_while_a_big_slot_expires(kind: &ServerKind) {
    let (srv, replica) = start_with_replica(kind);
    let k = &kind.name;
    observe_both_phases(&srv, "br", |key| {
        let board = big_slot_board(&srv, key);
        let with_early = add_early_slot(&srv, key, &board);
        let BigSlot {
            slot, big, rows, ..
        } = board;
        let big_slot = format!("{key}|slot|{big}");
        // The big slot leaves at slot big + 4, `early`'s a slot later.
        let leaves = (big + 4) * slot;
        let (early_leaves, stop) = (leaves + slot, leaves + 2 * slot);
        while server_ms(&replica) < leaves - 300 {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut watch = watch_slow_commands(&replica);
        let mut reads = [0, 0];
        let mut pending_seen = [false, false];
        loop {
            let before = server_ms(&replica);
            if before >= stop {
                break;
            }
            if before < leaves {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            let phase = usize::from(before >= early_leaves);
            let pending = replica.query::<i64, _>(&["EXISTS", &big_slot]) == 1;
            let zcard = replica.query::<i64, _>(&["ZCARD", key]);
            let got = read(&replica, key, "m7");
            let after = server_ms(&replica);
            if after >= stop || usize::from(after >= early_leaves) != phase {
                continue;
            }
            let model = if phase == 0 { &with_early } else { &rows };
            assert_eq!(got, expected(model, "m7"), "{k}: replica, phase {phase}");
            reads[phase] += 1;
            pending_seen[phase] |= pending && zcard > model.len() as i64;
            watch.check(&replica, &format!("replica reads, phase {phase}"));
        }
        watch.check(&replica, k);
        if pending_seen == [true, true] {
            Ok(())
        } else {
            Err(format!(
                "{k}: no replica read saw the expiry in progress in each phase ({reads:?} reads)"
            ))
        }
    });
    replica.assert_alive();
    srv.assert_alive();
}

/// `key` as `WINDOW window SLOT slot` with [`members`] members written now, with totals
/// of 1 to 3 (a third of the board shares each total): the model and its order.
fn thirds_board(
    srv: &Server,
    key: &str,
    window: &str,
    slot: &str,
) -> (BTreeMap<String, i64>, Vec<(String, i64)>) {
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", key, "WINDOW", window, "SLOT", slot]),
        v_ok()
    );
    let n = members();
    fill(srv, key, n, server_ms(srv), |i| (i % 3) as i64 + 1);
    let model: BTreeMap<String, i64> = (0..n)
        .map(|i| (format!("m{i}"), (i % 3) as i64 + 1))
        .collect();
    let rows = RankModel::ranked(&model);
    (model, rows)
}

per_server!(one_kind_at_a_time: standings_reads_stay_fast_on_a_large_board);
/// A board of 100k members (`TALLY_LONG=1`: a million) with totals of 1 to 3, so a third
/// of the board shares each total: AROUND of the last, a middle and the first member with
/// count 1000, RANK ... TIES of members in the largest groups of equal totals, and MSCORE
/// of 1000 members, each within 10 ms of server time and equal to the model.
fn standings_reads_stay_fast_on_a_large_board(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let key = "{st}";
    let n = members();
    let (model, rows) = thirds_board(&srv, key, "1h", "1m");
    let mut watch = watch_slow_commands(&srv);
    let probes = [
        rows[rows.len() - 1].0.clone(),
        rows[rows.len() / 2].0.clone(),
        rows[0].0.clone(),
        format!("m{}", n / 3),
    ];
    for _ in 0..5 {
        for member in &probes {
            let at = rows
                .iter()
                .position(|(m, _)| m == member)
                .expect("a member");
            let got = srv.cmd_value(&["TSRANK.AROUND", key, member, "1000", "WITHSCORES"]);
            let want = &rows[at.saturating_sub(1000)..(at + 1001).min(rows.len())];
            assert_eq!(member_totals(&got), want, "{k}: AROUND {member}");
            let above = rows.iter().filter(|(_, t)| *t > rows[at].1).count();
            assert_eq!(
                srv.cmd_value(&["TSRANK.RANK", key, member, "TIES"]),
                v_int(above as i64),
                "{k}: RANK {member} TIES"
            );
        }
        let mut mscore = vec!["TSRANK.MSCORE".to_string(), key.to_string()];
        mscore.extend((0..1000).map(|i| format!("m{}", i * (n / 1000) + 1)));
        let want: Vec<Value> = mscore[2..].iter().map(|m| v_int(model[m])).collect();
        assert_eq!(srv.cmd_value(&mscore), v_arr(want), "{k}: MSCORE");
        watch.check(&srv, k);
    }
    srv.assert_alive();
}

per_server!(one_kind_at_a_time: standings_reads_stay_fast_while_a_small_slot_leaves);
/// A board of 100k members (`TALLY_LONG=1`: a million) with totals of 1 to 3, and an older
/// slot of 2,000 of them, spread over the whole order, that leaves the window (too few
/// members for next totals: the reads correct them one by one) while a tiny expiry budget
/// subtracts it. Meanwhile AROUND and RANK of members deep in the board, some of them in
/// that slot, equal the model of the new window, each within 10 ms of server time: they
/// count positions in the sorted set and correct the pending members alone, where a walk
/// of the order down to the member took tens of milliseconds.
fn standings_reads_stay_fast_while_a_small_slot_leaves(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let key = "{sp}";
    srv.cmd(&["CONFIG", "SET", "tally.expire-budget-us", "10"])
        .expect("config");
    let n = members();
    let (_, rows) = thirds_board(&srv, key, "60s", "1s");
    // 2,000 members get 2 more in a slot that leaves the window about 3 s from now.
    let small_at = server_ms(&srv) - 57_000;
    let leaves = (small_at / 1000 + 60) * 1000;
    let step = n / 2000;
    let pending: Vec<String> = (0..2000).map(|i| format!("m{}", i * step + 7)).collect();
    let mut incr = vec!["TSRANK.INCRBY".to_string(), key.to_string()];
    for member in &pending {
        incr.extend(["2".to_string(), member.clone()]);
    }
    incr.extend(["AT".to_string(), small_at.to_string()]);
    let reply = srv.cmd_value(&incr.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(matches!(reply, Value::Array(_)), "{k}: {reply:?}");
    let small_slot = format!("{key}|slot|{}", small_at / 1000);
    let probes = [
        pending[1999].clone(),
        pending[1000].clone(),
        rows[rows.len() - 1].0.clone(),
        rows[rows.len() / 2 + 1].0.clone(),
        format!("m{}", n / 3 + 1),
    ];
    while server_ms(&srv) < leaves {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut watch = watch_slow_commands(&srv);
    let mut pending_reads = 0;
    for round in 0.. {
        let pending = srv.query::<i64, _>(&["EXISTS", &small_slot]) == 1;
        if !pending || round > 200 {
            break;
        }
        let member = &probes[round % probes.len()];
        let at = rows
            .iter()
            .position(|(m, _)| m == member)
            .expect("a member");
        let around = srv.cmd_value(&["TSRANK.AROUND", key, member, "5", "WITHSCORES"]);
        let rank = srv.cmd_value(&["TSRANK.RANK", key, member]);
        let want = &rows[at.saturating_sub(5)..(at + 6).min(rows.len())];
        assert_eq!(member_totals(&around), want, "{k}: AROUND {member}");
        assert_eq!(rank, v_int(at as i64), "{k}: RANK {member}");
        pending_reads += usize::from(srv.query::<i64, _>(&["EXISTS", &small_slot]) == 1);
        watch.check(&srv, "reads while the slot is subtracted");
    }
    assert!(
        pending_reads > 0,
        "{k}: no read saw the slot being subtracted"
    );
    srv.assert_alive();
}

per_server!(one_kind_at_a_time: a_write_over_a_leftover_slot_hash_is_bounded);
/// A write whose slot hash is a leftover (not a part of the board) replaces it within 10 ms
/// of server time, and a replica follows, with servers that free a deleted key inside the
/// command (`lazyfree-lazy-server-del no`, Redis 7.0's default): a user's own hash of 100k
/// fields (`TALLY_LONG=1`: a million) under a new board's slot name, which the write
/// deleted in place (77 ms on Redis 7.0, 47 ms on Redis 8.2); and a board of as many
/// members in one slot unlinked and written again in one transaction (the write runs the
/// queued removal of its parts first).
fn a_write_over_a_leftover_slot_hash_is_bounded(kind: &ServerKind) {
    let (srv, replica) = start_with_replica(kind);
    let k = &kind.name;
    let n = members();
    for server in [&srv, &replica] {
        for config in ["lazyfree-lazy-server-del", "lazyfree-lazy-user-del"] {
            assert_eq!(server.cmd_value(&["CONFIG", "SET", config, "no"]), v_ok());
        }
    }
    let t0 = server_ms(&srv);
    let at = t0.to_string();
    for key in ["{d}", "{u}"] {
        assert_eq!(
            srv.cmd_value(&["TSRANK.CREATE", key, "WINDOW", "1h", "SLOT", "1m"]),
            v_ok()
        );
    }
    fill(&srv, "{d}", n, t0, |i| (i % 7) as i64 + 1);
    let slot_name = format!("{{u}}|slot|{}", t0 / 60_000);
    let mut conn = srv.conn();
    let fields: Vec<Vec<String>> = (0..n)
        .step_by(1000)
        .map(|start| {
            let mut cmd = vec!["HSET".to_string(), slot_name.clone()];
            for i in start..(start + 1000).min(n) {
                cmd.push(format!("f{i}"));
                cmd.push("7".into());
            }
            cmd
        })
        .collect();
    for chunk in fields.chunks(20) {
        for reply in pipeline(&mut conn, chunk) {
            assert!(matches!(reply, Value::Int(_)), "{reply:?}");
        }
    }
    wait_replica_synced(&srv, &replica);
    let mut watch = watch_slow_commands(&srv);

    // The board unlinked and written again in one transaction.
    let replies = pipeline(
        &mut conn,
        &[
            vec!["MULTI"],
            vec!["UNLINK", "{d}"],
            vec!["TSRANK.INCRBY", "{d}", "5", "fresh", "AT", &at],
            vec!["EXEC"],
        ],
    );
    assert_eq!(
        replies.last(),
        Some(&Value::Array(vec![v_int(1), v_int(5)])),
        "{k}: {replies:?}"
    );
    // The user's hash under the new board's slot name.
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "{u}", "3", "m1", "AT", &at]),
        v_int(3),
        "{k}"
    );
    watch.check(&srv, k);
    for (key, member, total) in [("{d}", "fresh", 5), ("{u}", "m1", 3)] {
        assert_eq!(
            srv.cmd_value(&["TSRANK.TOP", key, "10", "WITHSCORES"]),
            v_arr(vec![v_bulk(member), v_int(total)]),
            "{k}: {key} holds the new write alone"
        );
    }
    assert_eq!(srv.cmd_value(&["HLEN", &slot_name]), v_int(1), "{k}");
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, k);
    srv.assert_alive();
    replica.assert_alive();
}

/// The exact counts written to a board with `CAPACITY` (one member a key), to check the
/// summary's guarantees against.
type Truth = BTreeMap<String, i64>;

/// `TSRANK.INCRBY key 1 member AT at` for each `(member, at)`, pipelined 100 at a time;
/// each reply an integer; `truth` follows.
fn write_ones(srv: &Server, key: &str, writes: &[(String, i64)], truth: &mut Truth) {
    let mut conn = srv.conn();
    let cmds: Vec<Vec<String>> = (writes.iter())
        .map(|(member, at)| strings(&["TSRANK.INCRBY", key, "1", member, "AT", &at.to_string()]))
        .collect();
    for chunk in cmds.chunks(100) {
        for reply in pipeline(&mut conn, chunk) {
            assert!(matches!(reply, Value::Int(_)), "{reply:?}");
        }
    }
    for (member, _) in writes {
        *truth.entry(member.clone()).or_insert(0) += 1;
    }
}

/// The guarantees of `CAPACITY k` against `truth` (every member written, all in the
/// window): `error <= N / k`, every estimate within `error` of its true total, every
/// member whose true total exceeds `error` listed. Reads the sorted set natively (a TOP of
/// 100,000 members is a large reply, not a stall).
fn check_capacity_guarantees(srv: &Server, key: &str, k: i64, truth: &Truth, what: &str) {
    let name = &srv.kind().name;
    let info = map_pairs(&srv.cmd_value_resp3(&["TSRANK.INFO", key]));
    let error = match info.iter().find(|(field, _)| field == "error") {
        Some((_, Value::Int(error))) => *error,
        other => panic!("{name}: {what}: INFO error {other:?}"),
    };
    let n: i64 = truth.values().sum();
    assert!(
        error * k <= n,
        "{name}: {what}: error {error} over N/k = {n}/{k}"
    );
    let estimates: BTreeMap<String, i64> =
        member_totals(&srv.cmd_value(&["ZRANGE", key, "0", "-1", "WITHSCORES"]))
            .into_iter()
            .collect();
    for (member, &true_total) in truth {
        let est = estimates.get(member).copied().unwrap_or(0);
        assert!(
            (est - true_total).abs() <= error,
            "{name}: {what}: {member} {est} vs {true_total}, error {error}"
        );
        assert!(
            true_total <= error || est > 0,
            "{name}: {what}: {member} ({true_total} > error {error}) is listed"
        );
    }
    for (member, est) in &estimates {
        assert!(
            truth.contains_key(member),
            "{name}: {what}: {member} ({est}) was never written"
        );
    }
}

/// Writes new members (`{prefix}{i}`, 1 each) to the slots of `slots` (`(slot hash,
/// at)`) still above `n` members, until every one holds `n` again (a slot whose order was
/// filled by the timer takes back a few members a write); `truth` follows.
fn write_until_back_to(
    srv: &Server,
    key: &str,
    slots: &[(&str, i64)],
    n: usize,
    prefix: &str,
    truth: &mut Truth,
) {
    let name = &srv.kind().name;
    let mut i = 0;
    let back = wait_until(Duration::from_secs(120), || {
        let above: Vec<i64> = (slots.iter())
            .filter(|(slot, _)| srv.cmd_value(&["HLEN", slot]) != v_int(n as i64))
            .map(|&(_, at)| at)
            .collect();
        if above.is_empty() {
            return true;
        }
        let writes: Vec<(String, i64)> = (0..50)
            .map(|j| (format!("{prefix}{}", i + j), above[j % above.len()]))
            .collect();
        i += writes.len();
        write_ones(srv, key, &writes, truth);
        false
    });
    assert!(back, "{name}: the slots came back to {n} members");
    for (slot, _) in slots {
        assert_eq!(srv.cmd_value(&["HLEN", slot]), v_int(n as i64), "{name}");
    }
}

per_server!(one_kind_at_a_time: a_full_slot_of_a_board_with_capacity_evicts_in_bounded_time);
/// A board with `CAPACITY 100000` whose slot holds 100,000 members (full): 2,000 writes of
/// new members, each evicting the slot's smallest count, cost a few microseconds of server
/// time each (`INFO commandstats`, no scan of the slot), the slot keeps 100,000 members,
/// and no command passes 10 ms. After `DEBUG RELOAD` the slot's order is gone from memory:
/// no write reads the slot (it would take ~300 ms); the timer fills the order in bounded
/// steps while writes evict nothing (the slot holds more than 100,000 members for a while),
/// then the writes take it back down to 100,000. Throughout, every write and every timer
/// tick stays under 10 ms of server time, and the summary's guarantees hold against the
/// exact counts. A replica ends equal.
fn a_full_slot_of_a_board_with_capacity_evicts_in_bounded_time(kind: &ServerKind) {
    let (srv, replica) = start_with_replica(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&[
            "TSRANK.CREATE",
            "{c}",
            "WINDOW",
            "1h",
            "SLOT",
            "1m",
            "CAPACITY",
            "100000"
        ]),
        v_ok()
    );
    let t0 = server_ms(&srv);
    let slot_name = format!("{{c}}|slot|{}", t0 / 60_000);
    let n = 100_000;
    fill(&srv, "{c}", n, t0, |i| (i % 1000) as i64 + 1);
    let mut truth: Truth = (0..n)
        .map(|i| (format!("m{i}"), (i % 1000) as i64 + 1))
        .collect();
    assert_eq!(srv.cmd_value(&["HLEN", &slot_name]), v_int(n as i64), "{k}");
    let mut watch = watch_slow_commands(&srv);
    assert_eq!(srv.cmd_value(&["CONFIG", "RESETSTAT"]), v_ok());
    let lost = Lost::start(&srv);
    let writes: Vec<(String, i64)> = (0..2000).map(|i| (format!("new{i}"), t0)).collect();
    write_ones(&srv, "{c}", &writes, &mut truth);
    let usec = usec_per_call_held(&srv, "tsrank.incrby", &lost);
    assert!(
        usec < 200.0,
        "{k}: an evicting write took {usec} us of server time"
    );
    assert_eq!(srv.cmd_value(&["HLEN", &slot_name]), v_int(n as i64), "{k}");
    // The smallest counts left first: the 100 members with 1, then the newcomers (2 each
    // once the minimum rose), so m0 (1) is gone and m999 (1000) stays.
    assert_eq!(
        srv.cmd_value(&["TSRANK.SCORE", "{c}", "m0"]),
        v_nil(),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.SCORE", "{c}", "m999"]),
        v_int(1000),
        "{k}"
    );
    watch.check(&srv, k);
    check_capacity_guarantees(&srv, "{c}", n as i64, &truth, "evicting writes");
    wait_replica_synced(&srv, &replica);
    // The order is gone after a reload: the writes go on at once, bounded.
    assert_eq!(srv.cmd_value(&["DEBUG", "RELOAD"]), v_ok());
    let mut watch = watch_slow_commands(&srv);
    assert_eq!(srv.cmd_value(&["CONFIG", "RESETSTAT"]), v_ok());
    let lost = Lost::start(&srv);
    let writes: Vec<(String, i64)> = (0..2000).map(|i| (format!("after{i}"), t0)).collect();
    write_ones(&srv, "{c}", &writes, &mut truth);
    check_capacity_guarantees(
        &srv,
        "{c}",
        n as i64,
        &truth,
        "writes while the order fills",
    );
    write_until_back_to(&srv, "{c}", &[(&slot_name, t0)], n, "back", &mut truth);
    let usec = usec_per_call_held(&srv, "tsrank.incrby", &lost);
    assert!(
        usec < 200.0,
        "{k}: after DEBUG RELOAD a write took {usec} us of server time"
    );
    watch.check(&srv, &format!("{k}: after DEBUG RELOAD"));
    check_capacity_guarantees(&srv, "{c}", n as i64, &truth, "back to k");
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, k);
    srv.assert_alive();
}

per_server!(one_kind_at_a_time: writes_alternating_between_two_full_slots_stay_bounded);
/// A board with `CAPACITY 100000` with two full slots (the current minute and the one
/// before): 2,000 writes of new members alternating between them (`AT`) each evict in a
/// few microseconds (the orders of both slots are held), and after `DEBUG RELOAD` the
/// same writes stay under 10 ms each while the timer fills both orders, in ticks under
/// 10 ms; both slots come back to 100,000 members and the guarantees hold throughout.
fn writes_alternating_between_two_full_slots_stay_bounded(kind: &ServerKind) {
    let (srv, replica) = start_with_replica(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&[
            "TSRANK.CREATE",
            "{a}",
            "WINDOW",
            "1h",
            "SLOT",
            "1m",
            "CAPACITY",
            "100000"
        ]),
        v_ok()
    );
    let t1 = server_ms(&srv);
    let t0 = t1 - 60_000;
    let slots = [
        format!("{{a}}|slot|{}", t0 / 60_000),
        format!("{{a}}|slot|{}", t1 / 60_000),
    ];
    let n = 100_000;
    fill(&srv, "{a}", n, t0, |i| (i % 1000) as i64 + 1);
    fill(&srv, "{a}", n, t1, |i| (i % 997) as i64 + 1);
    let mut truth: Truth = (0..n)
        .map(|i| (format!("m{i}"), (i % 1000) as i64 + (i % 997) as i64 + 2))
        .collect();
    let both = [(&slots[0][..], t0), (&slots[1][..], t1)];
    let alternating = |prefix: &str| -> Vec<(String, i64)> {
        (0..2000)
            .map(|i| (format!("{prefix}{i}"), both[i % 2].1))
            .collect()
    };
    let mut watch = watch_slow_commands(&srv);
    assert_eq!(srv.cmd_value(&["CONFIG", "RESETSTAT"]), v_ok());
    let lost = Lost::start(&srv);
    write_ones(&srv, "{a}", &alternating("new"), &mut truth);
    let usec = usec_per_call_held(&srv, "tsrank.incrby", &lost);
    assert!(
        usec < 200.0,
        "{k}: a write alternating between two slots took {usec} us of server time"
    );
    for slot in &slots {
        assert_eq!(srv.cmd_value(&["HLEN", slot]), v_int(n as i64), "{k}");
    }
    watch.check(&srv, k);
    check_capacity_guarantees(&srv, "{a}", n as i64, &truth, "alternating writes");
    assert_eq!(srv.cmd_value(&["DEBUG", "RELOAD"]), v_ok());
    let mut watch = watch_slow_commands(&srv);
    assert_eq!(srv.cmd_value(&["CONFIG", "RESETSTAT"]), v_ok());
    let lost = Lost::start(&srv);
    write_ones(&srv, "{a}", &alternating("after"), &mut truth);
    check_capacity_guarantees(&srv, "{a}", n as i64, &truth, "while both orders fill");
    write_until_back_to(&srv, "{a}", &both, n, "back", &mut truth);
    let usec = usec_per_call_held(&srv, "tsrank.incrby", &lost);
    assert!(
        usec < 200.0,
        "{k}: after DEBUG RELOAD an alternating write took {usec} us of server time"
    );
    watch.check(&srv, &format!("{k}: after DEBUG RELOAD"));
    check_capacity_guarantees(&srv, "{a}", n as i64, &truth, "both back to k");
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, k);
    srv.assert_alive();
}
