//! Boards created with `CAPACITY k` (a Space-Saving summary per slot): exact replies in
//! RESP2 and RESP3, errors that change nothing, every read against a seeded model of the
//! same summary (and the guarantees against exact counts), exactness while no slot sees
//! more than `k` members, replicas, AOF and RDB holding the primary's data, writes after
//! a restart (the slot's order read again from the slot), and expiry taking a slot's
//! error with it.

use std::collections::BTreeMap;

use super::*;

const POSITIVE: &str = "ERR a board with CAPACITY takes only positive increments";
const RANGE: &str = "ERR CAPACITY must be an integer from 1 to 100000";

/// A board with CAPACITY as the reference: per slot, a Space-Saving summary that scans
/// for its minimum (ties: the smallest name) and its error; beside it, the exact counts.
#[derive(Default)]
struct Model {
    capacity: usize,
    slots: BTreeMap<i64, (BTreeMap<String, i64>, i64)>,
    exact: RankModel,
}

impl Model {
    fn new(capacity: usize) -> Model {
        Model {
            capacity,
            ..Model::default()
        }
    }

    /// One INCRBY's pairs into slot `slot`; each pair's new estimated total over slots
    /// `from ..= to`.
    fn incrby(&mut self, slot: i64, pairs: &[(i64, String)], (from, to): (i64, i64)) -> Vec<i64> {
        let mut replies = Vec::new();
        for (n, member) in pairs {
            self.exact.add(slot, member, *n);
            let (counts, error) = self.slots.entry(slot).or_default();
            if let Some(count) = counts.get_mut(member) {
                *count += n;
            } else {
                while counts.len() >= self.capacity {
                    let (victim, count) = (counts.iter())
                        .min_by(|a, b| (a.1, a.0.as_bytes()).cmp(&(b.1, b.0.as_bytes())))
                        .map(|(m, c)| (m.clone(), *c))
                        .expect("a full slot");
                    counts.remove(&victim);
                    *error = (*error).max(count);
                }
                counts.insert(member.clone(), *error + n);
            }
            replies.push(self.totals(from, to).get(member).copied().unwrap_or(0));
        }
        replies
    }

    fn totals(&self, from: i64, to: i64) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for (counts, _) in self.slots.range(from..=to).map(|(_, s)| s) {
            for (m, c) in counts {
                *out.entry(m.clone()).or_default() += c;
            }
        }
        out
    }

    fn error(&self, from: i64, to: i64) -> i64 {
        self.slots.range(from..=to).map(|(_, (_, e))| e).sum()
    }
}

/// `TOP key 1000000 WITHSCORES` (RESP2) as `(member, total)` rows.
fn top_all(srv: &Server, board: &str) -> Vec<(String, i64)> {
    member_totals(&srv.cmd_value(&["TSRANK.TOP", board, "1000000", "WITHSCORES"]))
}

/// INFO's `error` and `capacity` fields.
fn info_error(srv: &Server, board: &str) -> (i64, i64) {
    let pairs = map_pairs(&srv.cmd_value_resp3(&["TSRANK.INFO", board]));
    let field = |name: &str| {
        (pairs.iter())
            .find(|(f, _)| f == name)
            .and_then(|(_, v)| value_text(v))
            .and_then(|t| t.parse::<i64>().ok())
            .unwrap_or_else(|| panic!("INFO {name}: {pairs:?}"))
    };
    (field("capacity"), field("error"))
}

per_server!(capacity_replies_in_resp2_and_resp3);
fn capacity_replies_in_resp2_and_resp3(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&[
            "TSRANK.CREATE",
            "cb",
            "WINDOW",
            "24h",
            "SLOT",
            "1h",
            "CAPACITY",
            "2"
        ]),
        v_ok()
    );
    let t = server_ms(&srv);
    let (at, before) = (t.to_string(), (t - HOUR).to_string());
    let (now_slot, old_slot) = (t / HOUR, t / HOUR - 1);
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "cb", "5", "a", "2", "b", "AT", &at]),
        v_arr(vec![v_int(5), v_int(2)]),
        "{k}"
    );
    // The slot is full: b (2, the smallest) leaves, c enters with 2 + 1.
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "cb", "1", "c", "AT", &at]),
        v_int(3)
    );
    // c (3) leaves, b comes back with 3 + 1.
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "cb", "1", "b", "AT", &at]),
        v_int(4)
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "cb", "2", "a", "AT", &before]),
        v_int(7)
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "cb", "10", "WITHSCORES"]),
        v_arr(vec![v_bulk("a"), v_int(7), v_bulk("b"), v_int(4)]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value_resp3(&["TSRANK.TOP", "cb", "10", "WITHSCORES"]),
        v_arr(vec![
            v_arr(vec![v_bulk("a"), v_int(7)]),
            v_arr(vec![v_bulk("b"), v_int(4)]),
        ])
    );
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "cb", "c"]), v_nil());
    assert_eq!(srv.cmd_value(&["TSRANK.RANK", "cb", "b"]), v_int(1));
    assert_eq!(
        srv.cmd_value(&["TSRANK.MSCORE", "cb", "a", "b", "c"]),
        v_arr(vec![v_int(7), v_int(4), v_nil()])
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.HISTORY", "cb", "a"]),
        v_arr(vec![
            v_arr(vec![v_int(old_slot * HOUR), v_int(2)]),
            v_arr(vec![v_int(now_slot * HOUR), v_int(5)]),
        ])
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "cb", "10", "WITHSCORES", "WINDOW", "1h"]),
        v_arr(vec![v_bulk("a"), v_int(5), v_bulk("b"), v_int(4)])
    );
    let info = |capacity: i64, error: i64| {
        vec![
            ("window", v_int(86_400_000)),
            ("slot", v_int(HOUR)),
            ("members", v_int(2)),
            ("slots", v_int(2)),
            ("oldest", v_int(old_slot * HOUR)),
            ("capacity", v_int(capacity)),
            ("error", v_int(error)),
        ]
    };
    let flat: Vec<Value> = (info(2, 3).into_iter())
        .flat_map(|(f, v)| [v_bulk(f), v])
        .collect();
    assert_eq!(srv.cmd_value(&["TSRANK.INFO", "cb"]), v_arr(flat), "{k}");
    let map = (info(2, 3).into_iter())
        .map(|(f, v)| (v_bulk(f), v))
        .collect();
    assert_eq!(
        srv.cmd_value_resp3(&["TSRANK.INFO", "cb"]),
        v_map(map),
        "{k}"
    );
    // The settings and the slot's error in the meta hash; the slot holds k members.
    assert_eq!(
        srv.cmd_value(&["HGET", "cb|meta", "_tally"]),
        v_bulk("rank 86400000 3600000 2")
    );
    let error_field = format!("_error {now_slot}");
    assert_eq!(
        srv.cmd_value(&["HGET", "cb|meta", &error_field]),
        v_bulk("3")
    );
    assert_eq!(
        srv.cmd_value(&["HGETALL", "cb|meta"])
            .as_sequence()
            .map(|v| v.len()),
        Some(6)
    );
    assert_eq!(
        srv.cmd_value(&["HLEN", &format!("cb|slot|{now_slot}")]),
        v_int(2)
    );
    // REM makes room: the next member enters with the slot's error (3) plus its increment.
    assert_eq!(srv.cmd_value(&["TSRANK.REM", "cb", "b"]), v_int(1));
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "cb", "1", "d", "AT", &at]),
        v_int(4)
    );
    assert_eq!(info_error(&srv, "cb"), (2, 3));
    // An exact board reports capacity 0 and error 0.
    srv.cmd(&["TSRANK.INCRBY", "exact", "1", "a"])
        .expect("incr");
    assert_eq!(info_error(&srv, "exact"), (0, 0));
    assert_eq!(
        srv.cmd_value(&["HGET", "exact|meta", "_tally"]),
        v_bulk("rank 86400000 3600000")
    );
}

per_server!(capacity_errors_change_nothing);
fn capacity_errors_change_nothing(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "cb", "CAPACITY", "3"]),
        v_ok()
    );
    srv.cmd(&["TSRANK.INCRBY", "cb", "2", "a"]).expect("incr");
    let before = srv.dump_keyspace();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (strings(&["TSRANK.CREATE", "n", "CAPACITY", "0"]), RANGE),
        (strings(&["TSRANK.CREATE", "n", "CAPACITY", "-5"]), RANGE),
        (
            strings(&["TSRANK.CREATE", "n", "CAPACITY", "100001"]),
            RANGE,
        ),
        (
            strings(&["TSRANK.CREATE", "n", "CAPACITY", "many"]),
            "ERR value is not an integer or out of range",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "CAPACITY"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.CREATE", "n", "CAPACITY", "2", "CAPACITY", "2"]),
            "ERR syntax error",
        ),
        (
            strings(&["TSRANK.CREATE", "cb", "CAPACITY", "2"]),
            "ERR key already exists",
        ),
        (strings(&["TSRANK.INCRBY", "cb", "-1", "a"]), POSITIVE),
        (
            strings(&["TSRANK.INCRBY", "cb", "4", "b", "-1", "a"]),
            POSITIVE,
        ),
        (
            strings(&["TSRANK.INCRBY", "cb", "0", "a"]),
            "ERR increment must be a non-zero integer",
        ),
    ];
    for (cmd, want) in &cases {
        assert_eq!(srv.cmd(cmd), Err(want.to_string()), "{k}: {cmd:?}");
    }
    assert_eq!(srv.dump_keyspace(), before, "{k}: an error wrote something");
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "big", "CAPACITY", "100000"]),
        v_ok()
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "one", "CAPACITY", "1"]),
        v_ok()
    );
}

/// A seeded workload on `board` (capacity `k`) over the latest `slots` slots of 1 h:
/// `writes` INCRBYs of 1 to 3 pairs, members drawn with a skew from `members`; every reply
/// checked against `model`.
fn seeded_writes(
    srv: &Server,
    board: &str,
    model: &mut Model,
    rng: &mut Rng,
    t0: i64,
    n: (usize, i64, i64),
) {
    let (writes, slots, members) = n;
    let now_slot = t0 / HOUR;
    let window = (now_slot - 23, now_slot);
    for _ in 0..writes {
        let slot = now_slot - rng.below(slots);
        let at = (slot * HOUR + (t0 % HOUR)).min(t0).to_string();
        let pairs: Vec<(i64, String)> = (0..1 + rng.below(3))
            .map(|_| {
                // Skewed: low numbers much more often.
                let spread = 1 + rng.below(members);
                let m = rng.below(spread);
                (1 + rng.below(4), format!("m{m}"))
            })
            .collect();
        let mut cmd = strings(&["TSRANK.INCRBY", board]);
        for (n, m) in &pairs {
            cmd.push(n.to_string());
            cmd.push(m.clone());
        }
        cmd.push("AT".into());
        cmd.push(at);
        let want = model.incrby(slot, &pairs, window);
        let got = srv.cmd_value(&cmd);
        let want = match want.as_slice() {
            [one] => v_int(*one),
            many => v_arr(many.iter().map(|&r| v_int(r)).collect()),
        };
        assert_eq!(got, want, "{}: {cmd:?}", srv.kind().name);
    }
}

/// Every read of `board` against `model`, and the guarantees against the exact counts.
fn check_board(srv: &Server, board: &str, model: &Model, t0: i64) {
    let k = &srv.kind().name;
    let now_slot = t0 / HOUR;
    let (from, to) = (now_slot - 23, now_slot);
    let totals = model.totals(from, to);
    assert_eq!(top_all(srv, board), RankModel::ranked(&totals), "{k}: TOP");
    let error = model.error(from, to);
    assert_eq!(
        info_error(srv, board),
        (model.capacity as i64, error),
        "{k}: INFO"
    );
    let truth = model.exact.totals(from, to);
    let n: i64 = truth.values().sum();
    assert!(
        error * model.capacity as i64 <= n,
        "{k}: error {error} over N/k"
    );
    for (member, true_total) in &truth {
        let est = totals.get(member).copied().unwrap_or(0);
        assert!(
            (est - true_total).abs() <= error,
            "{k}: {member} {est} vs {true_total}"
        );
        if *true_total > error {
            let score = srv.cmd_value(&["TSRANK.SCORE", board, member]);
            assert_eq!(score, v_int(est), "{k}: {member} is listed");
        }
    }
}

per_server!(capacity_board_follows_its_model_through_replication_and_reloads);
fn capacity_board_follows_its_model_through_replication_and_reloads(kind: &ServerKind) {
    let mut primary = Server::start_with(kind, ServerOptions::new().config("appendonly", "yes"));
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    for (seed, capacity) in [(1u64, 1usize), (2, 3), (3, 8)] {
        let board = format!("cap{capacity}");
        let c = capacity.to_string();
        assert_eq!(
            primary.cmd_value(&[
                "TSRANK.CREATE",
                &board,
                "WINDOW",
                "24h",
                "SLOT",
                "1h",
                "CAPACITY",
                &c
            ]),
            v_ok()
        );
        let mut rng = Rng(seed);
        let mut model = Model::new(capacity);
        let t0 = server_ms(&primary);
        seeded_writes(&primary, &board, &mut model, &mut rng, t0, (150, 4, 30));
        check_board(&primary, &board, &model, t0);
        wait_replica_synced(&primary, &replica);
        check_board(&replica, &board, &model, t0);
    }
    assert_replica_equal(&primary, &replica, "after writes");
    drop(replica);
    let before = primary.dump_keyspace();
    primary.restart();
    assert_eq!(primary.dump_keyspace(), before, "{}: AOF reload", kind.name);
    primary.restart_saving();
    assert_eq!(primary.dump_keyspace(), before, "{}: RDB reload", kind.name);
    // After a restart the order of a full slot is read again from the slot: the writes
    // go on as if nothing happened.
    let mut model = Model::new(3);
    let mut rng = Rng(2);
    let t0 = server_ms(&primary);
    assert_eq!(
        primary.cmd_value(&[
            "TSRANK.CREATE",
            "again",
            "WINDOW",
            "24h",
            "SLOT",
            "1h",
            "CAPACITY",
            "3"
        ]),
        v_ok()
    );
    seeded_writes(&primary, "again", &mut model, &mut rng, t0, (80, 2, 20));
    primary.restart_saving();
    seeded_writes(&primary, "again", &mut model, &mut rng, t0, (80, 2, 20));
    check_board(&primary, "again", &model, t0);
}

per_server!(a_capacity_board_that_never_overflows_equals_an_exact_board);
fn a_capacity_board_that_never_overflows_equals_an_exact_board(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    for (board, capacity) in [("exact", None), ("bounded", Some("20"))] {
        let mut cmd = strings(&["TSRANK.CREATE", board, "WINDOW", "24h", "SLOT", "1h"]);
        cmd.extend(
            capacity
                .map(|c| strings(&["CAPACITY", c]))
                .unwrap_or_default(),
        );
        assert_eq!(srv.cmd_value(&cmd), v_ok());
    }
    let t0 = server_ms(&srv);
    let mut rng = Rng(5);
    for _ in 0..200 {
        let at = (t0 - rng.below(5) * HOUR).to_string();
        let (n, m) = (
            (1 + rng.below(5)).to_string(),
            format!("m{}", rng.below(20)),
        );
        let replies: Vec<Value> = ["exact", "bounded"]
            .iter()
            .map(|b| srv.cmd_value(&["TSRANK.INCRBY", b, &n, &m, "AT", &at]))
            .collect();
        assert_eq!(replies[0], replies[1], "{k}");
    }
    for read in [
        strings(&["TSRANK.TOP", "_", "100", "WITHSCORES"]),
        strings(&["TSRANK.TOP", "_", "5", "OFFSET", "3", "WINDOW", "2h"]),
        strings(&["TSRANK.HISTORY", "_", "m3"]),
        strings(&["TSRANK.AROUND", "_", "m4", "2", "WITHSCORES"]),
        strings(&["TSRANK.RANK", "_", "m7", "TIES"]),
    ] {
        let on = |board: &str| {
            let mut cmd = read.clone();
            cmd[1] = board.into();
            srv.cmd_value(&cmd)
        };
        assert_eq!(on("exact"), on("bounded"), "{k}: {read:?}");
    }
    assert_eq!(info_error(&srv, "bounded"), (20, 0));
}

per_server!(a_slot_leaving_the_window_takes_its_error_with_it);
fn a_slot_leaving_the_window_takes_its_error_with_it(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&[
            "TSRANK.CREATE",
            "cb",
            "WINDOW",
            "2s",
            "SLOT",
            "1s",
            "CAPACITY",
            "1"
        ]),
        v_ok()
    );
    // Three members in one slot: two evictions, the slot's error is 2 (a: 1, b: 1 + 1).
    let t = server_ms(&srv);
    let replies = srv.cmd_value(&["TSRANK.INCRBY", "cb", "1", "a", "1", "b", "1", "c"]);
    let first_slot = t / 1000;
    if server_ms(&srv) / 1000 == first_slot {
        assert_eq!(replies, v_arr(vec![v_int(1), v_int(2), v_int(3)]), "{k}");
    }
    let field = format!("_error {first_slot}");
    // Written again in later slots until the first has left and been drained.
    assert!(
        wait_until(Duration::from_secs(6), || {
            srv.cmd(&["TSRANK.INCRBY", "cb", "1", "z"]).expect("incr");
            srv.cmd_value(&["HEXISTS", "cb|meta", &field]) == v_int(0)
        }),
        "{k}: the error of a drained slot stays"
    );
    let (capacity, error) = info_error(&srv, "cb");
    assert_eq!(capacity, 1);
    // Only z was written since: no eviction.
    assert!(error <= 2, "{k}: {error}");
}

/// Exact totals of the members written.
type Truth = BTreeMap<String, i64>;

/// Writes `(increment, member)` pairs, `Truth` following.
type Writes<'a> = dyn FnMut(Vec<(i64, String)>, &mut Truth) + 'a;

/// The guarantees of `CAPACITY k` against `truth` (every member written, all in the
/// window): `error <= N / k`, every estimate within `error` of its true total, every
/// member whose true total exceeds `error` listed.
fn check_guarantees(srv: &Server, board: &str, k: i64, truth: &BTreeMap<String, i64>, what: &str) {
    let name = &srv.kind().name;
    let (_, error) = info_error(srv, board);
    let n: i64 = truth.values().sum();
    assert!(
        error * k <= n,
        "{name}: {what}: error {error} over N/k = {n}/{k}"
    );
    let estimates: BTreeMap<String, i64> = top_all(srv, board).into_iter().collect();
    for (member, &true_total) in truth {
        let est = estimates.get(member).copied().unwrap_or(0);
        assert!(
            (est - true_total).abs() <= error,
            "{name}: {what}: {member} {est} vs {true_total}, error {error}"
        );
        assert!(
            true_total <= error || est > 0,
            "{name}: {what}: {member} is listed"
        );
    }
}

per_server!(a_large_slot_without_its_order_is_filled_by_the_timer_and_comes_back_to_k);
/// A slot of more than 128 members (`CAPACITY 200`) whose order the server lost
/// (`DEBUG RELOAD`) is not read by the write: the timer fills its order while writes
/// evict nothing, then the writes take the slot back to 200 members; the guarantees hold
/// throughout, and a replica ends equal. A field a user set that is not a count (a native
/// edit) does not keep the slot from coming back to 200 members (and that field).
fn a_large_slot_without_its_order_is_filled_by_the_timer_and_comes_back_to_k(kind: &ServerKind) {
    let (srv, replica) = start_with_replica(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&[
            "TSRANK.CREATE",
            "big",
            "WINDOW",
            "24h",
            "SLOT",
            "1h",
            "CAPACITY",
            "200"
        ]),
        v_ok()
    );
    let t0 = server_ms(&srv);
    let at = t0.to_string();
    let slot = format!("big|slot|{}", t0 / HOUR);
    let mut truth: BTreeMap<String, i64> = BTreeMap::new();
    let mut conn = srv.conn();
    let mut write = |members: Vec<(i64, String)>, truth: &mut BTreeMap<String, i64>| {
        let cmds: Vec<Vec<String>> = (members.iter())
            .map(|(n, m)| strings(&["TSRANK.INCRBY", "big", &n.to_string(), m, "AT", &at]))
            .collect();
        for reply in pipeline(&mut conn, &cmds) {
            assert!(matches!(reply, Value::Int(_)), "{k}: {reply:?}");
        }
        for (n, m) in members {
            *truth.entry(m).or_insert(0) += n;
        }
    };
    write(
        (0..300).map(|i| (i % 7 + 1, format!("m{i}"))).collect(),
        &mut truth,
    );
    assert_eq!(srv.cmd_value(&["HLEN", &slot]), v_int(200), "{k}");
    check_guarantees(&srv, "big", 200, &truth, "full");
    assert_eq!(srv.cmd_value(&["DEBUG", "RELOAD"]), v_ok());
    write(
        (0..100).map(|i| (1, format!("after{i}"))).collect(),
        &mut truth,
    );
    check_guarantees(&srv, "big", 200, &truth, "while the order fills");
    let back_to =
        |want: i64, prefix: &str, truth: &mut BTreeMap<String, i64>, write: &mut Writes| {
            let mut i = 0;
            let back = wait_until(Duration::from_secs(30), || {
                if srv.cmd_value(&["HLEN", &slot]) == v_int(want) {
                    return true;
                }
                write(
                    (i..i + 10).map(|j| (1, format!("{prefix}{j}"))).collect(),
                    truth,
                );
                i += 10;
                false
            });
            assert!(back, "{k}: the slot came back to {want} fields");
        };
    back_to(200, "back", &mut truth, &mut write);
    check_guarantees(&srv, "big", 200, &truth, "back to k");
    // A user's field that is not a count: the board is rebuilt by the next write, and the
    // slot comes back to 200 members beside that field.
    assert_eq!(srv.cmd_value(&["HSET", &slot, "junk", "abc"]), v_int(1));
    write(
        (0..50).map(|i| (1, format!("edited{i}"))).collect(),
        &mut truth,
    );
    back_to(201, "later", &mut truth, &mut write);
    check_guarantees(
        &srv,
        "big",
        200,
        &truth,
        "beside a field that is not a count",
    );
    wait_replica_synced(&srv, &replica);
    assert_replica_equal(&srv, &replica, k);
}
