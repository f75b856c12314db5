//! A quarantined leaderboard too large for a write to repair in one pass (more than 1024
//! fields in its slot hashes) is rebuilt in steps: the write that finds it quarantined
//! starts the rebuild and answers exactly, every write meanwhile keeps the members it
//! touches exact, the timer walks the rest, and a native edit meanwhile stops the rebuild
//! (the next write starts it again). Random traffic with native edits, on a board of a
//! 20,000 members whose oldest slot leaves the window while it is quarantined,
//! checked against the reference model; then the reads, a replica and the AOF reload.

use std::collections::BTreeMap;

use module_tests::*;

const BELOW_ZERO: &str = "ERR count would go below zero";
const BOARD: &str = "{rb}";
/// Members of the big first slot (the board's slot hashes hold more than 1024 fields).
const MEMBERS: i64 = 20_000;

/// The window (first and last slot) at second `slot` of `WINDOW 4s SLOT 1s`.
fn window(slot: i64) -> (i64, i64) {
    (slot - 3, slot)
}

/// The expected reply of a list of integers (one: the integer).
fn ints(replies: &[i64]) -> Value {
    match replies {
        [one] => v_int(*one),
        _ => v_arr(replies.iter().map(|r| v_int(*r)).collect()),
    }
}

/// `member`'s total over the slots of `win` (the model's totals, for one member).
fn total(model: &RankModel, member: &str, win: (i64, i64)) -> i64 {
    (model.slots.range(win.0..=win.1))
        .filter_map(|(_, counts)| counts.get(member))
        .sum()
}

/// [`RankModel::incrby`] answered in two windows at once (one member's totals at a time:
/// the model's own walks every member).
fn incrby(
    model: &mut RankModel,
    slot: i64,
    incs: &[(i64, String)],
    wins: [(i64, i64); 2],
) -> Option<[Vec<i64>; 2]> {
    let mut trial: BTreeMap<&str, i64> = BTreeMap::new();
    for (n, m) in incs {
        let count = trial.entry(m).or_insert_with(|| {
            (model.slots.get(&slot))
                .and_then(|c| c.get(m))
                .copied()
                .unwrap_or(0)
        });
        *count += n;
        if *count < 0 {
            return None;
        }
    }
    let mut replies = [Vec::new(), Vec::new()];
    for (n, m) in incs {
        model.add(slot, m, *n);
        for (reply, win) in replies.iter_mut().zip(wins) {
            reply.push(total(model, m, win));
        }
    }
    Some(replies)
}

/// [`RankModel::rem`] answered in two windows at once.
fn rem(model: &mut RankModel, members: &[String], wins: [(i64, i64); 2]) -> [i64; 2] {
    let distinct: std::collections::BTreeSet<&String> = members.iter().collect();
    let had = wins.map(|win| {
        (distinct.iter())
            .filter(|m| total(model, m, win) > 0)
            .count() as i64
    });
    for counts in model.slots.values_mut() {
        for m in members {
            counts.remove(m);
        }
    }
    had
}

/// Writes `count(i)` for member `m{i}`, `i` in `0..n`, at `at`, in pipelined INCRBYs.
fn fill(srv: &Server, model: &mut RankModel, n: i64, at: i64, count: impl Fn(i64) -> i64) {
    let mut conn = srv.conn();
    let mut cmds = Vec::new();
    for start in (0..n).step_by(500) {
        let mut cmd = vec!["TSRANK.INCRBY".to_string(), BOARD.to_string()];
        for i in start..(start + 500).min(n) {
            cmd.push(count(i).to_string());
            cmd.push(format!("m{i}"));
            model.add(at / 1000, &format!("m{i}"), count(i));
        }
        cmd.push("AT".into());
        cmd.push(at.to_string());
        cmds.push(cmd);
    }
    for reply in pipeline(&mut conn, &cmds) {
        assert!(matches!(reply, Value::Array(_)), "{reply:?}");
    }
}

fn edited(srv: &Server) -> bool {
    srv.cmd_value(&["HEXISTS", &format!("{BOARD}|meta"), "_edited"]) == v_int(1)
}

per_server!(one_kind_at_a_time: writes_during_a_rebuild_in_steps_equal_the_model);
/// `WINDOW 4s SLOT 1s`, 20,000 members in one slot and 1500 of them in the next, a tiny
/// expiry budget; a native `HSET` quarantines the board; then for six seconds pipelined
/// batches of random INCRBYs (some negative, some refused) and REMs, some led by a native
/// `HSET` or `HDEL` of a stored slot (which stops the rebuild; the batch's first write
/// starts it again): every reply equals the model of the window of the moment. The first
/// slot leaves the window meanwhile, still stored while the board is quarantined; in the
/// last seconds no edit comes and the rebuild ends under the traffic. Then TOP and SCORE
/// answer the model, a reload of the AOF gives the same data and the replica equals the
/// primary.
fn writes_during_a_rebuild_in_steps_equal_the_model(kind: &ServerKind) {
    let k = &kind.name;
    let primary = Server::start_with(kind, ServerOptions::new().config("appendonly", "yes"));
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    let srv = &primary;
    srv.cmd(&["CONFIG", "SET", "tally.expire-budget-us", "10"])
        .expect("config");
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", BOARD, "WINDOW", "4s", "SLOT", "1s"]),
        v_ok()
    );
    let mut t0 = server_ms(srv);
    while t0 % 1000 > 200 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        t0 = server_ms(srv);
    }
    let s0 = t0 / 1000;
    let mut model = RankModel::default();
    fill(srv, &mut model, MEMBERS, t0, |i| i % 7 + 1);
    while server_ms(srv) < (s0 + 1) * 1000 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    fill(srv, &mut model, 1500, (s0 + 1) * 1000, |_| 2);
    let edit = |slot: i64, member: &str, value: i64| {
        let name = format!("{BOARD}|slot|{slot}");
        srv.cmd_value(&["HSET", &name, member, &value.to_string()])
    };
    edit(s0 + 1, "m5", 50);
    model
        .slots
        .entry(s0 + 1)
        .or_default()
        .insert("m5".into(), 50);
    assert!(
        wait_until(std::time::Duration::from_secs(2), || edited(srv)),
        "{k}: not quarantined"
    );
    let mut rng = Rng(0x5EED_0000 ^ s0 as u64);
    let member = |rng: &mut Rng| format!("m{}", rng.below(MEMBERS + 20));
    let mut conn = srv.conn();
    let (mut rebuilding_batches, mut pending_batches, mut edits, mut checks) = (0, 0, 0, 0);
    // Rebuilds that ended during the traffic.
    let mut finished = 0;
    // A write since the last native edit has started a rebuild.
    let mut started = false;
    let end = (s0 + 7) * 1000;
    loop {
        let now = server_ms(srv);
        if now >= end {
            break;
        }
        let before = now / 1000;
        // Either window may answer if a slot edge passes during the batch. (A write goes
        // to this slot or the one before: inside both.)
        let w = [window(before), window(before + 1)];
        let was_rebuilding = started && edited(srv);
        let mut cmds: Vec<Vec<String>> = Vec::new();
        let mut want: Vec<Option<[Value; 2]>> = Vec::new();
        // From 400 ms after the oldest slot left the window, no edit stops the rebuild and
        // the traffic leaves the timer time to end it (then that slot is subtracted while
        // writes go on).
        let calm = now >= (s0 + 4) * 1000 + 400;
        if calm {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if !calm && rng.chance(15) {
            // A native edit of a stored slot: the rebuild (if any) stops.
            let slots: Vec<i64> = model.slots.keys().copied().collect();
            let slot = slots[rng.below(slots.len() as i64) as usize];
            let name = format!("{BOARD}|slot|{slot}");
            if exists(srv, &name) {
                // Half the time a member no write touches: only the rebuild's walk of the
                // slot hashes brings it into the sorted set.
                let m = match rng.chance(50) {
                    true => format!("e{edits}"),
                    false => member(&mut rng),
                };
                if rng.chance(70) {
                    let value = 1 + rng.below(90);
                    model
                        .slots
                        .entry(slot)
                        .or_default()
                        .insert(m.clone(), value);
                    cmds.push(strings(&["HSET", &name, &m, &value.to_string()]));
                } else {
                    model.slots.entry(slot).or_default().remove(&m);
                    cmds.push(strings(&["HDEL", &name, &m]));
                }
                want.push(None);
                edits += 1;
                started = false;
            }
        }
        for _ in 0..40 {
            if rng.chance(80) {
                let ts = now - rng.below(2) * 1000;
                let mut cmd = strings(&["TSRANK.INCRBY", BOARD]);
                let mut incs = Vec::new();
                for _ in 0..1 + rng.below(3) {
                    let n = match rng.below(5) - 1 {
                        0 => 3,
                        n => n,
                    };
                    let m = member(&mut rng);
                    cmd.push(n.to_string());
                    cmd.push(m.clone());
                    incs.push((n, m));
                }
                cmd.push("AT".into());
                cmd.push(ts.to_string());
                let want_now = match incrby(&mut model, ts / 1000, &incs, w) {
                    Some([a, b]) => {
                        started = true;
                        [ints(&a), ints(&b)]
                    }
                    None => [v_err(BELOW_ZERO), v_err(BELOW_ZERO)],
                };
                want.push(Some(want_now));
                cmds.push(cmd);
            } else {
                let ms: Vec<String> = (0..1 + rng.below(2)).map(|_| member(&mut rng)).collect();
                let mut cmd = strings(&["TSRANK.REM", BOARD]);
                cmd.extend(ms.iter().cloned());
                want.push(Some(rem(&mut model, &ms, w).map(v_int)));
                cmds.push(cmd);
            }
        }
        let got = pipeline(&mut conn, &cmds);
        let crossed = server_ms(srv) / 1000 != before;
        for ((cmd, got), want) in cmds.iter().zip(&got).zip(&want) {
            match want {
                None => assert!(matches!(got, Value::Int(_)), "{k}: {cmd:?}: {got:?}"),
                Some(want) => {
                    assert!(
                        *got == want[0] || (crossed && *got == want[1]),
                        "{k}: {cmd:?} answered {got:?}, the model {want:?} (second {})",
                        before - s0
                    );
                    checks += 1;
                }
            }
        }
        let still = edited(srv);
        finished += usize::from(was_rebuilding && !still);
        if was_rebuilding && still {
            rebuilding_batches += 1;
            if before >= s0 + 4 && exists(srv, format!("{BOARD}|slot|{s0}")) {
                pending_batches += 1;
            }
        }
    }
    // The last batch's writes started a rebuild again, unless it held only an edit.
    if !started {
        let now = server_ms(srv);
        let reply = srv.cmd_value(&["TSRANK.INCRBY", BOARD, "1", "m1", "AT", &now.to_string()]);
        let want = model.incrby(now / 1000, &[(1, "m1".to_string())], window(now / 1000));
        assert!(matches!(reply, Value::Int(_)), "{k}: {reply:?} {want:?}");
    }
    println!(
        "{k}: {checks} checks, {rebuilding_batches} batches of 40 during a rebuild \
         ({pending_batches} with the oldest slot pending), {edits} native edits, \
         {finished} rebuilds done meanwhile"
    );
    assert!(
        rebuilding_batches >= 10 && pending_batches >= 3 && edits >= 3,
        "{k}: the traffic missed the rebuild: {rebuilding_batches} batches, \
         {pending_batches} pending, {edits} edits"
    );
    // The rebuild ends: the board is healthy and its reads answer the model.
    assert!(
        wait_until(std::time::Duration::from_secs(20), || !edited(srv)),
        "{k}: the board stays quarantined"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        assert!(std::time::Instant::now() < deadline, "{k}: no stable read");
        let before = server_ms(srv) / 1000;
        let top = srv.cmd_value(&["TSRANK.TOP", BOARD, "100000", "WITHSCORES"]);
        let scores: Vec<Value> = (0..40)
            .map(|i| srv.cmd_value(&["TSRANK.SCORE", BOARD, &format!("m{}", i * 97)]))
            .collect();
        if server_ms(srv) / 1000 != before {
            continue;
        }
        let (from, to) = window(before);
        let totals: BTreeMap<String, i64> = model.totals(from, to);
        assert_eq!(member_totals(&top), RankModel::ranked(&totals), "{k}: TOP");
        for (i, got) in scores.iter().enumerate() {
            let want = totals.get(&format!("m{}", i * 97)).copied().unwrap_or(0);
            let want = if want > 0 { v_int(want) } else { v_nil() };
            assert_eq!(*got, want, "{k}: SCORE m{}", i * 97);
        }
        break;
    }
    // The AOF holds the same board: reloaded while writes (and so the timer) are paused,
    // right away (the board's slots leave the window within seconds).
    assert_eq!(
        srv.cmd_value(&["CLIENT", "PAUSE", "20000", "WRITE"]),
        v_ok()
    );
    let dump = srv.dump_keyspace();
    assert!(
        dump.contains_key(&format!("db0:{BOARD}")),
        "{k}: nothing left to compare"
    );
    assert_eq!(srv.cmd_value(&["DEBUG", "LOADAOF"]), v_ok(), "{k}");
    assert_eq!(srv.dump_keyspace(), dump, "{k}: AOF reload");
    assert_eq!(srv.cmd_value(&["CLIENT", "UNPAUSE"]), v_ok());
    wait_replica_synced(&primary, &replica);
    assert_replica_equal(&primary, &replica, "after a rebuild in steps");
    srv.assert_alive();
    replica.assert_alive();
}

per_server!(a_rebuild_in_steps_starts_only_from_a_caller_who_may_write_every_slot);
/// A board of 1200 members over two hourly slots, quarantined by a native `HSET`: a user
/// who may write the sorted set, the meta and the slot of the hour but not the older slot
/// gets NOPERM from INCRBY and REM, and nothing changes (no rebuild starts: the timer
/// leaves the board alone); the next write of a user who may write every part answers
/// the exact total and the timer ends the rebuild.
fn a_rebuild_in_steps_starts_only_from_a_caller_who_may_write_every_slot(kind: &ServerKind) {
    let k = &kind.name;
    let srv = Server::start(kind);
    srv.cmd(&["CONFIG", "SET", "tally.expire-budget-us", "10"])
        .expect("config");
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "{a}", "WINDOW", "24h", "SLOT", "1h"]),
        v_ok()
    );
    let now = server_ms(&srv);
    let (old, hour) = (now / 3_600_000 - 1, now / 3_600_000);
    let mut model = RankModel::default();
    // Ahead of `now`, `fill` writes in the slot before the current one too.
    let at_old = old * 3_600_000;
    let board_fill = |at: i64, n: i64, model: &mut RankModel| {
        let mut conn = srv.conn();
        let mut cmds = Vec::new();
        for start in (0..n).step_by(500) {
            let mut cmd = vec!["TSRANK.INCRBY".to_string(), "{a}".to_string()];
            for i in start..(start + 500).min(n) {
                cmd.push("2".into());
                cmd.push(format!("m{i}"));
                model.add(at / 3_600_000, &format!("m{i}"), 2);
            }
            cmd.push("AT".into());
            cmd.push(at.to_string());
            cmds.push(cmd);
        }
        for reply in pipeline(&mut conn, &cmds) {
            assert!(matches!(reply, Value::Array(_)), "{reply:?}");
        }
    };
    board_fill(at_old, 1200, &mut model);
    board_fill(now, 10, &mut model);
    let old_slot = format!("{{a}}|slot|{old}");
    srv.cmd_value(&["HSET", &old_slot, "m3", "40"]);
    assert!(
        wait_until(std::time::Duration::from_secs(2), || {
            srv.cmd_value(&["HEXISTS", "{a}|meta", "_edited"]) == v_int(1)
        }),
        "{k}: not quarantined"
    );
    let before = srv.dump_keyspace();
    let hour_slot = format!("~{{a}}|slot|{hour}");
    let mut user = conn_as_user(&srv, "w", &["~{a}", "~{a}|meta", &hour_slot]);
    for cmd in [
        &["TSRANK.INCRBY", "{a}", "1", "m3"][..],
        &["TSRANK.REM", "{a}", "m4"][..],
    ] {
        let got = conn_value(&mut user, cmd);
        assert!(
            error_text(&got).is_some_and(|e| e.starts_with("NOPERM")),
            "{k}: {cmd:?}: {got:?}"
        );
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        srv.dump_keyspace(),
        before,
        "{k}: the refused writes changed the board"
    );
    // m3: 40 in the old slot (the edit), 2 in this hour's.
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "{a}", "1", "m3"]),
        v_int(43),
        "{k}"
    );
    assert!(
        wait_until(std::time::Duration::from_secs(10), || {
            srv.cmd_value(&["HEXISTS", "{a}|meta", "_edited"]) == v_int(0)
        }),
        "{k}: the rebuild never ended"
    );
    model.slots.entry(old).or_default().insert("m3".into(), 40);
    model.add(hour, "m3", 1);
    let totals = model.totals(old, hour);
    let top = srv.cmd_value(&["TSRANK.TOP", "{a}", "5000", "WITHSCORES"]);
    assert_eq!(member_totals(&top), RankModel::ranked(&totals), "{k}: TOP");
    srv.assert_alive();
}
