//! TSCOUNTER.LIMIT: atomic multi-window rate limits. Random traffic with `AT` is checked
//! against a small model of the contract (windows, kept ranges, the increment applied only
//! when every window has room, `retry_after_ms` found by trying later times); then errors,
//! replies in both protocols, key specs, keyspace notifications, replication and ACL.

use module_tests::*;
use std::collections::BTreeMap;

/// A counter as the contract describes it: per resolution, the count of each kept slot.
struct Model {
    /// (resolution ms, samples), finest first.
    resolutions: Vec<(i64, i64)>,
    slots: BTreeMap<(i64, i64), i64>,
}

fn slot_of(t: i64, res: i64) -> i64 {
    t.div_euclid(res)
}

impl Model {
    fn new(resolutions: &[(i64, i64)]) -> Model {
        Model {
            resolutions: resolutions.to_vec(),
            slots: BTreeMap::new(),
        }
    }

    fn keeps(&self, (res, samples): (i64, i64), now: i64, t: i64) -> bool {
        slot_of(t, res) > slot_of(now, res) - samples
    }

    /// SUM window at time `t` with the clock at `now`.
    fn sum(&self, window: i64, t: i64, now: i64) -> i64 {
        let Some(&(res, samples)) = self.resolutions.iter().find(|(r, s)| r * s >= window) else {
            panic!("the test only asks windows some resolution spans");
        };
        let k = (window + res - 1) / res;
        let last = slot_of(t, res);
        let first_kept = slot_of(now, res) - samples + 1;
        (last - k + 1..=last)
            .filter(|&i| i >= first_kept)
            .map(|i| self.slots.get(&(res, i)).copied().unwrap_or(0))
            .sum()
    }

    fn allowed(&self, increment: i64, limits: &[(i64, i64)], t: i64, now: i64) -> bool {
        limits
            .iter()
            .all(|&(w, max)| self.sum(w, t, now) + increment <= max)
    }

    fn incrby(&mut self, increment: i64, t: i64, now: i64) {
        for &(res, samples) in &self.resolutions.clone() {
            if self.keeps((res, samples), now, t) {
                let slot = self.slots.entry((res, slot_of(t, res))).or_insert(0);
                *slot += increment;
                if *slot == 0 {
                    self.slots.remove(&(res, slot_of(t, res)));
                }
            }
        }
    }

    /// The reply the contract asks of LIMIT at `t` (clock `now`), applying the increment
    /// when allowed.
    fn limit(&mut self, increment: i64, limits: &[(i64, i64)], t: i64, now: i64) -> Value {
        let allowed = self.allowed(increment, limits, t, now);
        let retry = if allowed {
            0
        } else if limits.iter().any(|&(_, max)| increment > max) {
            -1
        } else {
            // Sums change only when a slot boundary of some resolution is crossed: try
            // the next millisecond and every boundary after it, in order.
            let longest = limits.iter().map(|&(w, _)| w).max().unwrap_or(0);
            let mut candidates: Vec<i64> = vec![1];
            for &(res, _) in &self.resolutions {
                let mut boundary = (slot_of(t, res) + 1) * res;
                while boundary - t <= longest + res {
                    candidates.push(boundary - t);
                    boundary += res;
                }
            }
            candidates.sort_unstable();
            candidates.dedup();
            *candidates
                .iter()
                .find(|&&d| self.allowed(increment, limits, t + d, now.max(t + d)))
                .expect("a refused call with room in every max passes once its window has moved on")
        };
        if allowed && increment != 0 {
            self.incrby(increment, t, now);
        }
        let sums: Vec<Value> = limits
            .iter()
            .map(|&(w, _)| v_int(self.sum(w, t, now)))
            .collect();
        v_arr(vec![v_int(i64::from(allowed)), v_int(retry), v_arr(sums)])
    }
}

fn limit_args(key: &str, increment: i64, limits: &[(i64, i64)], at: Option<i64>) -> Vec<String> {
    let mut args = vec![
        "TSCOUNTER.LIMIT".to_string(),
        key.into(),
        increment.to_string(),
    ];
    for (w, max) in limits {
        args.push(format!("{w}ms"));
        args.push(max.to_string());
    }
    if let Some(at) = at {
        args.push("AT".into());
        args.push(at.to_string());
    }
    args
}

per_server!(limit_agrees_with_the_model_under_random_traffic);
/// Seeded random LIMIT calls (and a few INCRBYs) with `AT` in the past, checked reply by
/// reply against the model; the key's slots equal the model's at the end.
fn limit_agrees_with_the_model_under_random_traffic(kind: &ServerKind) {
    let srv = Server::start(kind);
    let resolutions = [(1_000, 600), (60_000, 60)];
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "rl", "RESOLUTIONS", "1s:600", "1m:60"]),
        v_ok()
    );
    let mut model = Model::new(&resolutions);
    let mut rng = Rng(0x005e_ed11);
    // AT times from 8 min ago on, rising by 0.75 s a call on average: every one stays
    // kept by both resolutions (10 min and 1 h) while the test runs, far from the kept
    // edges, so the moving server clock never changes what the model counts.
    let now = server_ms(&srv);
    let base = now - 8 * 60_000;
    let mut checks = 0;
    let mut refused_with_wait = 0;
    let mut t = base;
    for step in 0..400 {
        t += rng.below(1_500);
        let clock = server_ms(&srv);
        let pairs = 1 + rng.below(3) as usize;
        let limits: Vec<(i64, i64)> = (0..pairs)
            .map(|_| {
                let window = *rng.pick(&[2_000, 5_000, 30_000, 300_000, 120_000, 1_800_000]);
                (window, rng.below(12))
            })
            .collect();
        if rng.chance(10) {
            let n = 1 + rng.below(3);
            let reply = srv.cmd_value(&[
                "TSCOUNTER.INCRBY",
                "rl",
                &n.to_string(),
                "AT",
                &t.to_string(),
            ]);
            assert!(matches!(reply, Value::Int(_)), "step {step}: {reply:?}");
            model.incrby(n, t, clock);
            continue;
        }
        let increment = *rng.pick(&[0, 1, 1, 1, 2, 5]);
        let args = limit_args("rl", increment, &limits, Some(t));
        let got = srv.cmd_value(&args);
        let want = model.limit(increment, &limits, t, clock);
        assert_eq!(got, want, "step {step}: {args:?}");
        checks += 1;
        if let Value::Array(items) = &got {
            if items
                .get(1)
                .is_some_and(|r| matches!(r, Value::Int(d) if *d > 0))
            {
                refused_with_wait += 1;
            }
        }
    }
    assert!(checks > 300, "only {checks} LIMIT calls checked");
    assert!(
        refused_with_wait > 20,
        "only {refused_with_wait} refusals with a wait: the test does not reach retry_after"
    );
    // The stored slots are the model's (as RANGE lists them: the timer packs the runs of
    // seconds older than the two newest into one field each).
    let mut stored: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    for (label, res) in [("1s", 1_000), ("1m", 60_000)] {
        let range = srv.cmd_value(&["TSCOUNTER.RANGE", "rl", label, "FROM", &base.to_string()]);
        let Value::Array(pairs) = range else {
            panic!("{range:?}")
        };
        for pair in pairs {
            match pair {
                Value::Array(p) => match (&p[0], &p[1]) {
                    (Value::Int(start), Value::Int(count)) => {
                        stored.insert((res, start / res), *count);
                    }
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(stored, model.slots);
    srv.assert_alive();
}

per_server!(limit_allows_refuses_and_waits_exactly);
/// The README's risk-control example, with exact replies.
fn limit_allows_refuses_and_waits_exactly(kind: &ServerKind) {
    let srv = Server::start(kind);
    let now = server_ms(&srv);
    // A whole second ago, so the 5 s window's oldest slot leaves at a known time.
    let t = (now / 1000 - 1) * 1000 + 200;
    let at = t.to_string();
    let call = |inc: &str| {
        srv.cmd_value(&[
            "TSCOUNTER.LIMIT",
            "login:alice",
            inc,
            "5s",
            "5",
            "5m",
            "100",
            "1d",
            "1000",
            "AT",
            &at,
        ])
    };
    for n in 1..=5 {
        assert_eq!(
            call("1"),
            v_arr(vec![
                v_int(1),
                v_int(0),
                v_arr(vec![v_int(n), v_int(n), v_int(n)])
            ])
        );
    }
    // The sixth in the same 5 s is refused; the five leave the 5 s window when its
    // oldest slot moves past t's slot: 5 slots of 1 s after t's slot starts, 800 ms + 4 s.
    assert_eq!(
        call("1"),
        v_arr(vec![
            v_int(0),
            v_int(4_800),
            v_arr(vec![v_int(5), v_int(5), v_int(5)])
        ])
    );
    // An increment above a max can never pass.
    assert_eq!(
        call("6"),
        v_arr(vec![
            v_int(0),
            v_int(-1),
            v_arr(vec![v_int(5), v_int(5), v_int(5)])
        ])
    );
    // Increment 0 only checks.
    assert_eq!(
        call("0"),
        v_arr(vec![
            v_int(1),
            v_int(0),
            v_arr(vec![v_int(5), v_int(5), v_int(5)])
        ])
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "login:alice", "1d"]),
        v_int(5)
    );
    // RESP3 answers the same shape.
    assert_eq!(
        srv.cmd_value_resp3(&["TSCOUNTER.LIMIT", "login:alice", "0", "5s", "5", "AT", &at]),
        v_arr(vec![v_int(1), v_int(0), v_arr(vec![v_int(5)])])
    );
}

per_server!(refused_and_checking_calls_write_nothing);
/// A refusal and an increment of 0 never create the key, change it or replicate.
fn refused_and_checking_calls_write_nothing(kind: &ServerKind) {
    let srv = Server::start(kind);
    // A replica, so that the replication offset counts what the primary propagates.
    let replica = Server::start(kind);
    // No PING of the replica moves the offset while the test looks at it.
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "repl-ping-replica-period", "3600"]),
        v_ok()
    );
    replica.replicate_from(&srv);
    wait_replica_synced(&srv, &replica);
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.LIMIT", "new", "0", "5s", "5"]),
        v_arr(vec![v_int(1), v_int(0), v_arr(vec![v_int(0)])])
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.LIMIT", "new", "3", "5s", "2"]),
        v_arr(vec![v_int(0), v_int(-1), v_arr(vec![v_int(0)])])
    );
    assert!(!exists(&srv, "new"));
    let offset = repl_offset(&srv);
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.LIMIT", "new", "1", "5s", "2"]),
        v_arr(vec![v_int(1), v_int(0), v_arr(vec![v_int(1)])])
    );
    assert!(exists(&srv, "new"));
    let before = hgetall(&srv, "new");
    let offset_after_write = repl_offset(&srv);
    assert_ne!(offset, offset_after_write, "the applied call replicates");
    for _ in 0..3 {
        srv.cmd_value(&["TSCOUNTER.LIMIT", "new", "2", "5s", "2"]);
    }
    assert_eq!(hgetall(&srv, "new"), before);
    assert_eq!(
        repl_offset(&srv),
        offset_after_write,
        "refusals replicate nothing"
    );
    assert_replica_equal(&srv, &replica, "after refusals");
}

per_server!(limit_rejects_bad_arguments_with_the_contract_errors);
fn limit_rejects_bad_arguments_with_the_contract_errors(kind: &ServerKind) {
    let srv = Server::start(kind);
    let syntax = v_err("ERR syntax error");
    let cases: Vec<(Vec<&str>, Value)> = vec![
        (
            vec!["TSCOUNTER.LIMIT", "k", "1", "5s"],
            v_err("ERR wrong number of arguments for 'tscounter.limit' command"),
        ),
        (
            vec!["TSCOUNTER.LIMIT", "k", "-1", "5s", "5"],
            v_err("ERR value is not an integer or out of range: increment is an integer >= 0"),
        ),
        (
            vec!["TSCOUNTER.LIMIT", "k", "x", "5s", "5"],
            v_err("ERR value is not an integer or out of range: increment is an integer >= 0"),
        ),
        (
            vec!["TSCOUNTER.LIMIT", "k", "1", "5s", "-5"],
            v_err("ERR value is not an integer or out of range: max (of a window max pair) is an integer >= 0"),
        ),
        (
            vec!["TSCOUNTER.LIMIT", "k", "1", "5s", "five"],
            v_err("ERR value is not an integer or out of range: max (of a window max pair) is an integer >= 0"),
        ),
        (
            vec!["TSCOUNTER.LIMIT", "k", "1", "5s", "5", "1m"],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.LIMIT", "k", "1", "5s", "AT", "5"],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.LIMIT", "k", "1", "5s", "5", "AT"],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.LIMIT", "k", "1", "5s", "5", "AT", "1", "AT", "2"],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.LIMIT", "k", "1", "5x", "5"],
            v_err("ERR invalid duration '5x': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)"),
        ),
        // A window no resolution spans: SUM's error.
        (
            vec!["TSCOUNTER.LIMIT", "k", "1", "1000d", "5"],
            v_err("ERR window '1000d' is longer than any resolution keeps (at most 120d)"),
        ),
    ];
    for (args, want) in cases {
        let got = srv.cmd_value(&args);
        if args.len() == 4 {
            // Arity: some servers word it differently only in case.
            assert_eq!(
                error_text(&got).map(|t| t.to_lowercase()),
                error_text(&want).map(|t| t.to_lowercase()),
                "{args:?}"
            );
        } else {
            assert_eq!(got, want, "{args:?}");
        }
    }
    // 17 pairs: more than the 16 allowed.
    let mut args = vec!["TSCOUNTER.LIMIT".to_string(), "k".into(), "1".into()];
    for _ in 0..17 {
        args.push("5s".into());
        args.push("5".into());
    }
    assert_eq!(srv.cmd_value(&args), syntax);
    assert_eq!(srv.cmd_value(&["SET", "str", "x"]), v_ok());
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.LIMIT", "str", "1", "5s", "5"]),
        v_err(WRONGTYPE)
    );
    assert!(!exists(&srv, "k"), "no failed call creates its key");
}

per_server!(limit_declares_its_key_and_fires_one_event_when_applied);
fn limit_declares_its_key_and_fires_one_event_when_applied(kind: &ServerKind) {
    let srv = Server::start(kind);
    assert_eq!(
        srv.cmd_value(&[
            "COMMAND",
            "GETKEYS",
            "TSCOUNTER.LIMIT",
            "rl",
            "1",
            "5s",
            "5",
            "AT",
            "1"
        ]),
        v_bulks(&["rl"])
    );
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "notify-keyspace-events", "Kh"]),
        v_ok()
    );
    let client = redis::Client::open(srv.url_resp2()).expect("client");
    let mut sub_conn = client.get_connection().expect("connection");
    let mut pubsub = sub_conn.as_pubsub();
    pubsub.psubscribe("__keyspace@0__:*").expect("psubscribe");
    pubsub
        .set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .expect("timeout");
    srv.cmd_value(&["TSCOUNTER.LIMIT", "rl", "1", "5s", "1"]); // applied
    srv.cmd_value(&["TSCOUNTER.LIMIT", "rl", "1", "5s", "1"]); // refused
    srv.cmd_value(&["TSCOUNTER.LIMIT", "rl", "0", "5s", "1"]); // check only
    srv.cmd_value(&["TSCOUNTER.LIMIT", "rl", "x", "5s", "1"]); // error
    let mut events = Vec::new();
    while let Ok(message) = pubsub.get_message() {
        let payload: String = message.get_payload().expect("payload");
        events.push((message.get_channel_name().to_string(), payload));
    }
    assert_eq!(
        events,
        vec![(
            "__keyspace@0__:rl".to_string(),
            "tscounter.limit".to_string()
        )]
    );
}

per_server!(applied_limits_reach_the_replica);
fn applied_limits_reach_the_replica(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    let mut rng = Rng(77);
    let now = server_ms(&primary);
    for _ in 0..300 {
        let key = format!("u{}", rng.below(5));
        let at = (now - rng.below(60_000)).to_string();
        let max = rng.below(6).to_string();
        primary.cmd_value(&[
            "TSCOUNTER.LIMIT",
            &key,
            "1",
            "10s",
            &max,
            "1m",
            "20",
            "AT",
            &at,
        ]);
    }
    assert_replica_equal(&primary, &replica, "after LIMIT traffic");
    // The replica answers a check like the primary.
    for key in ["u0", "u1", "u2"] {
        let args = ["TSCOUNTER.SUM", key, "1m"];
        assert_eq!(replica.cmd_value(&args), primary.cmd_value(&args), "{key}");
    }
}

per_server!(limit_obeys_key_permissions);
fn limit_obeys_key_permissions(kind: &ServerKind) {
    let srv = Server::start(kind);
    let mut own = conn_as_user(&srv, "limiter", &["on", "nopass", "~rl:*", "+@all"]);
    assert_eq!(
        conn_value(&mut own, &["TSCOUNTER.LIMIT", "rl:a", "1", "5s", "5"]),
        v_arr(vec![v_int(1), v_int(0), v_arr(vec![v_int(1)])])
    );
    let denied = conn_value(&mut own, &["TSCOUNTER.LIMIT", "other", "1", "5s", "5"]);
    assert!(
        error_text(&denied).is_some_and(|t| t.starts_with("NOPERM")),
        "{denied:?}"
    );
    assert!(!exists(&srv, "other"));
}
