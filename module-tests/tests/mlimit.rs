//! TSCOUNTER.MLIMIT (one atomic limit over several counters) and TSCOUNTER.LIMIT's
//! DETAILS. Random traffic with `AT` across slot and window edges over several keys is
//! checked reply by reply against a brute-force model (a log of every applied increment
//! per key; waits and resets found by trying every later slot boundary); then exact
//! replies, errors, all or nothing (a refused or failed call writes and propagates
//! nothing), key declarations, notifications, a replica and an AOF reload equal to the
//! primary, and key permissions.

use module_tests::*;
use std::collections::BTreeMap;

fn slot_of(t: i64, res: i64) -> i64 {
    t.div_euclid(res)
}

/// One counter as a log of every applied increment: `(ts, increment)`, with the
/// resolutions that decide which of them a read counts.
struct Model {
    /// (resolution ms, samples), finest first.
    resolutions: Vec<(i64, i64)>,
    /// Every applied increment, with the clock it was applied at.
    log: Vec<(i64, i64, i64)>,
}

impl Model {
    fn new(resolutions: &[(i64, i64)]) -> Model {
        Model {
            resolutions: resolutions.to_vec(),
            log: Vec::new(),
        }
    }

    /// The slot of `t` at resolution `(res, samples)` is kept when the clock is `now`.
    fn keeps((res, samples): (i64, i64), now: i64, t: i64) -> bool {
        slot_of(t, res) > slot_of(now, res) - samples
    }

    /// SUM window at time `t` with the clock at `now`: the increments of the log that
    /// landed in the window's resolution (kept when written) and fall in its slots.
    fn sum(&self, window: i64, t: i64, now: i64) -> i64 {
        let &(res, samples) = self
            .resolutions
            .iter()
            .find(|(r, s)| r * s >= window)
            .expect("the test only asks windows some resolution spans");
        let k = (window + res - 1) / res;
        let last = slot_of(t, res);
        let first = (last - k + 1).max(slot_of(now, res) - samples + 1);
        self.log
            .iter()
            .filter(|&&(ts, _, clock)| Model::keeps((res, samples), clock, ts))
            .filter(|&&(ts, _, _)| (first..=last).contains(&slot_of(ts, res)))
            .map(|&(_, by, _)| by)
            .sum()
    }

    fn passes(&self, increment: i64, limits: &[(i64, i64)], t: i64, now: i64) -> bool {
        limits
            .iter()
            .all(|&(w, max)| self.sum(w, t, now) + increment <= max)
    }

    /// Every later moment at which some sum of these resolutions may change (a slot
    /// boundary), as delays from `t`, up to `horizon`.
    fn boundaries(&self, t: i64, horizon: i64) -> Vec<i64> {
        let mut out = Vec::new();
        for &(res, _) in &self.resolutions {
            let mut boundary = (slot_of(t, res) + 1) * res;
            while boundary - t <= horizon {
                out.push(boundary - t);
                boundary += res;
            }
        }
        out
    }

    /// `[sum, remaining, reset_ms]` of one pair at `t` (clock `now`): the reset is the
    /// first slot boundary of the window's resolution at which the sum is below its value
    /// at the boundary before (none later than every slot counted or to enter has left).
    fn details(&self, (window, max): (i64, i64), t: i64, now: i64) -> Vec<Value> {
        let sum = self.sum(window, t, now);
        let mut reset = 0;
        if sum != 0 {
            let &(res, _) = self
                .resolutions
                .iter()
                .find(|(r, s)| r * s >= window)
                .unwrap();
            let horizon = (now - t) + window + 2 * res;
            let mut before = sum;
            let mut boundary = (slot_of(t, res) + 1) * res;
            while boundary - t <= horizon {
                let later = self.sum(window, boundary, now.max(boundary));
                if later < before {
                    reset = boundary - t;
                    break;
                }
                before = later;
                boundary += res;
            }
        }
        vec![v_int(sum), v_int((max - sum).max(0)), v_int(reset)]
    }
}

/// The reply the contract asks of MLIMIT (or, with `per_key` false and one key, of
/// LIMIT) at `t` with the clock at `now`; applies the increment to every key when allowed.
fn model_call(
    keys: &mut [(&mut Model, Vec<(i64, i64)>)],
    increment: i64,
    t: i64,
    now: i64,
    details: bool,
    per_key: bool,
) -> Value {
    let allowed = keys.iter().all(|(m, l)| m.passes(increment, l, t, now))
        && keys
            .iter()
            .flat_map(|(_, l)| l)
            .all(|&(_, max)| increment <= max);
    let retry = if allowed {
        0
    } else if keys
        .iter()
        .flat_map(|(_, l)| l)
        .any(|&(_, max)| increment > max)
    {
        -1
    } else {
        let longest = keys
            .iter()
            .flat_map(|(_, l)| l)
            .map(|&(w, _)| w)
            .max()
            .unwrap();
        let mut delays: Vec<i64> = vec![1];
        for (m, _) in keys.iter() {
            delays.extend(m.boundaries(t, (now - t) + longest + 3_600_000));
        }
        delays.sort_unstable();
        delays.dedup();
        *delays
            .iter()
            .find(|&&d| {
                keys.iter()
                    .all(|(m, l)| m.passes(increment, l, t + d, now.max(t + d)))
            })
            .expect("a refused call with room in every max passes once its windows move on")
    };
    if allowed && increment != 0 {
        for (m, _) in keys.iter_mut() {
            m.log.push((t, increment, now));
        }
    }
    let third: Vec<Value> = keys
        .iter()
        .map(|(m, l)| {
            v_arr(
                l.iter()
                    .map(|&pair| {
                        if details {
                            v_arr(m.details(pair, t, now))
                        } else {
                            v_int(m.sum(pair.0, t, now))
                        }
                    })
                    .collect(),
            )
        })
        .collect();
    let third = if per_key {
        v_arr(third)
    } else {
        third.into_iter().next().unwrap()
    };
    v_arr(vec![v_int(i64::from(allowed)), v_int(retry), third])
}

/// The arguments of `TSCOUNTER.MLIMIT` over `keys` with their pairs.
fn mlimit_args(
    keys: &[(&str, &[(i64, i64)])],
    increment: i64,
    at: Option<i64>,
    details: bool,
) -> Vec<String> {
    let mut args = vec!["TSCOUNTER.MLIMIT".to_string(), keys.len().to_string()];
    args.extend(keys.iter().map(|(k, _)| k.to_string()));
    args.push(increment.to_string());
    for (_, limits) in keys {
        args.push(limits.len().to_string());
        for (w, max) in limits.iter() {
            args.push(format!("{w}ms"));
            args.push(max.to_string());
        }
    }
    options(&mut args, at, details);
    args
}

/// `[AT ts] [DETAILS]`, in either order.
fn options(args: &mut Vec<String>, at: Option<i64>, details: bool) {
    let mut at_args = Vec::new();
    if let Some(at) = at {
        at_args = vec!["AT".to_string(), at.to_string()];
    }
    if details && at.is_some_and(|at| at % 2 == 0) {
        args.push("DETAILS".into());
        args.extend(at_args);
    } else {
        args.extend(at_args);
        if details {
            args.push("DETAILS".into());
        }
    }
}

const KEYS: [&str; 3] = ["{u}:user", "{u}:ip", "{u}:global"];
const RESOLUTIONS: [&[(i64, i64)]; 3] = [
    &[(1_000, 600), (60_000, 60)],
    &[(2_000, 600), (60_000, 60)],
    &[(5_000, 360), (3_600_000, 24)],
];
const RESOLUTION_TEXTS: [&[&str]; 3] = [
    &["1s:600", "1m:60"],
    &["2s:600", "1m:60"],
    &["5s:360", "1h:24"],
];

per_server!(mlimit_agrees_with_the_model_under_random_traffic);
/// Seeded random MLIMIT calls over one to three counters of different resolutions (and
/// LIMIT ... DETAILS calls, a few INCRBYs), `AT` in the past across slot and window edges,
/// DETAILS before or after AT: every reply equals the model's, and every counter's slots
/// equal the model's at the end.
fn mlimit_agrees_with_the_model_under_random_traffic(kind: &ServerKind) {
    let srv = Server::start(kind);
    let mut models: Vec<Model> = RESOLUTIONS.iter().map(|r| Model::new(r)).collect();
    for (key, texts) in KEYS.iter().zip(RESOLUTION_TEXTS) {
        let mut args = vec!["TSCOUNTER.CREATE", key, "RESOLUTIONS"];
        args.extend(texts);
        assert_eq!(srv.cmd_value(&args), v_ok());
    }
    let mut rng = Rng(0x0311_7e57);
    // AT from 8 minutes ago on, rising 0.75 s a call on average: kept by every resolution
    // while the test runs, far from the kept edges, so the moving clock changes nothing
    // the model counts.
    let now = server_ms(&srv);
    let mut t = now - 8 * 60_000;
    let (mut calls, mut refused_with_wait, mut allowed, mut detailed) = (0, 0, 0, 0);
    for step in 0..400 {
        t += rng.below(1_500);
        let clock = server_ms(&srv);
        if rng.chance(8) {
            let k = rng.below(3) as usize;
            let n = 1 + rng.below(3);
            let reply = srv.cmd_value(&[
                "TSCOUNTER.INCRBY",
                KEYS[k],
                &n.to_string(),
                "AT",
                &t.to_string(),
            ]);
            assert!(matches!(reply, Value::Int(_)), "step {step}: {reply:?}");
            models[k].log.push((t, n, clock));
            continue;
        }
        // One to three distinct keys, in random order.
        let mut chosen: Vec<usize> = vec![0, 1, 2];
        for i in (1..3).rev() {
            chosen.swap(i, rng.below(i as i64 + 1) as usize);
        }
        chosen.truncate(1 + rng.below(3) as usize);
        let limits: Vec<Vec<(i64, i64)>> = chosen
            .iter()
            .map(|_| {
                (0..1 + rng.below(3))
                    .map(|_| {
                        let window =
                            *rng.pick(&[2_000, 4_000, 5_000, 30_000, 120_000, 300_000, 1_800_000]);
                        (window, rng.below(14))
                    })
                    .collect()
            })
            .collect();
        let increment = *rng.pick(&[0, 1, 1, 1, 2, 4]);
        let details = rng.chance(60);
        let single_limit = chosen.len() == 1 && rng.chance(40);
        let args = if single_limit {
            let mut args = vec![
                "TSCOUNTER.LIMIT".to_string(),
                KEYS[chosen[0]].to_string(),
                increment.to_string(),
            ];
            for (w, max) in &limits[0] {
                args.push(format!("{w}ms"));
                args.push(max.to_string());
            }
            options(&mut args, Some(t), details);
            args
        } else {
            let keys: Vec<(&str, &[(i64, i64)])> = chosen
                .iter()
                .zip(&limits)
                .map(|(&k, l)| (KEYS[k], l.as_slice()))
                .collect();
            mlimit_args(&keys, increment, Some(t), details)
        };
        let got = srv.cmd_value(&args);
        let mut split: Vec<Option<&mut Model>> = models.iter_mut().map(Some).collect();
        let mut keys: Vec<(&mut Model, Vec<(i64, i64)>)> = chosen
            .iter()
            .zip(&limits)
            .map(|(&k, l)| (split[k].take().unwrap(), l.clone()))
            .collect();
        let want = model_call(&mut keys, increment, t, clock, details, !single_limit);
        assert_eq!(got, want, "step {step}: {args:?}");
        calls += 1;
        detailed += usize::from(details);
        if let Value::Array(items) = &got {
            match items.get(..2) {
                Some([Value::Int(1), _]) => allowed += 1,
                Some([_, Value::Int(d)]) if *d > 0 => refused_with_wait += 1,
                _ => {}
            }
        }
    }
    assert!(
        calls > 300 && detailed > 150,
        "{calls} calls, {detailed} with DETAILS"
    );
    assert!(
        refused_with_wait > 20 && allowed > 50,
        "{refused_with_wait} refusals with a wait, {allowed} allowed: the traffic misses a case"
    );
    // Every counter's slots are what its log adds up to.
    for ((key, model), &resolutions) in KEYS.iter().zip(&models).zip(&RESOLUTIONS) {
        let mut want: BTreeMap<String, String> = BTreeMap::new();
        let mut counts: BTreeMap<(i64, i64), i64> = BTreeMap::new();
        for &(ts, by, clock) in &model.log {
            for &r in resolutions {
                if Model::keeps(r, clock, ts) {
                    *counts.entry((r.0, slot_of(ts, r.0))).or_insert(0) += by;
                }
            }
        }
        let got = slot_fields(&srv, key);
        for ((res, index), count) in counts {
            let unit = match res {
                1_000 => "1s".to_string(),
                2_000 => "2s".to_string(),
                5_000 => "5s".to_string(),
                60_000 => "1m".to_string(),
                _ => "1h".to_string(),
            };
            want.insert(format!("{unit}:{index}"), count.to_string());
        }
        assert_eq!(got, want, "{key}");
    }
    srv.assert_alive();
}

per_server!(mlimit_allows_refuses_and_waits_exactly);
/// A per-user, per-IP and global limit in one call, with exact replies in both protocols:
/// the user's limit refuses a call, and nothing is spent on the other keys.
fn mlimit_allows_refuses_and_waits_exactly(kind: &ServerKind) {
    let srv = Server::start(kind);
    let now = server_ms(&srv);
    // Half a second into a second that began a whole second ago: known slot edges.
    let t = (now / 1000 - 1) * 1000 + 500;
    let at = t.to_string();
    let call = |increment: &str, details: bool| {
        let mut args = vec![
            "TSCOUNTER.MLIMIT",
            "3",
            "user:1",
            "ip:9",
            "global",
            increment,
            "2",
            "5s",
            "2",
            "1m",
            "10",
            "1",
            "5s",
            "5",
            "1",
            "1m",
            "1000",
            "AT",
            &at,
        ];
        if details {
            args.push("DETAILS");
        }
        srv.cmd_value(&args)
    };
    let sums = |user: [i64; 2], ip: i64, global: i64| {
        v_arr(vec![
            v_arr(vec![v_int(user[0]), v_int(user[1])]),
            v_arr(vec![v_int(ip)]),
            v_arr(vec![v_int(global)]),
        ])
    };
    assert_eq!(
        call("1", false),
        v_arr(vec![v_int(1), v_int(0), sums([1, 1], 1, 1)])
    );
    // With DETAILS: [sum, remaining, reset_ms]. The 5 s window's increments leave when
    // its newest slot is 5 slots past t's (4.5 s from t); the minute's when the 1 s
    // slots have moved 60 past t's (59.5 s).
    assert_eq!(
        call("1", true),
        v_arr(vec![
            v_int(1),
            v_int(0),
            v_arr(vec![
                v_arr(vec![
                    v_arr(vec![v_int(2), v_int(0), v_int(4_500)]),
                    v_arr(vec![v_int(2), v_int(8), v_int(59_500)]),
                ]),
                v_arr(vec![v_arr(vec![v_int(2), v_int(3), v_int(4_500)])]),
                v_arr(vec![v_arr(vec![v_int(2), v_int(998), v_int(59_500)])]),
            ])
        ])
    );
    // The user's 5 s window is full: refused, 4.5 s to wait, nothing spent anywhere.
    assert_eq!(
        call("1", false),
        v_arr(vec![v_int(0), v_int(4_500), sums([2, 2], 2, 2)])
    );
    for key in ["ip:9", "global", "user:1"] {
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.SUM", key, "1m", "AT", &at]),
            v_int(2),
            "{key}"
        );
    }
    // Above a max: -1. A check (increment 0) writes nothing and creates nothing.
    assert_eq!(
        call("3", false),
        v_arr(vec![v_int(0), v_int(-1), sums([2, 2], 2, 2)])
    );
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.MLIMIT",
            "2",
            "global",
            "nobody",
            "0",
            "1",
            "1m",
            "5",
            "1",
            "1m",
            "5",
            "AT",
            &at
        ]),
        v_arr(vec![
            v_int(1),
            v_int(0),
            v_arr(vec![v_arr(vec![v_int(2)]), v_arr(vec![v_int(0)])])
        ])
    );
    assert!(!exists(&srv, "nobody"));
    // RESP3 answers the same shape.
    assert_eq!(
        srv.cmd_value_resp3(&[
            "TSCOUNTER.MLIMIT",
            "1",
            "global",
            "0",
            "1",
            "1m",
            "5",
            "AT",
            &at,
            "DETAILS"
        ]),
        v_arr(vec![
            v_int(1),
            v_int(0),
            v_arr(vec![v_arr(vec![v_arr(vec![
                v_int(2),
                v_int(3),
                v_int(59_500)
            ])])])
        ])
    );
    // LIMIT's DETAILS: the same element for one key, before or after AT.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.LIMIT", "user:1", "0", "DETAILS", "5s", "2"]),
        v_err("ERR syntax error")
    );
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.LIMIT",
            "user:1",
            "0",
            "5s",
            "2",
            "DETAILS",
            "AT",
            &at
        ]),
        v_arr(vec![
            v_int(1),
            v_int(0),
            v_arr(vec![v_arr(vec![v_int(2), v_int(0), v_int(4_500)])])
        ])
    );
    srv.assert_alive();
}

per_server!(mlimit_rejects_bad_arguments_and_writes_nothing);
/// The contract's errors; none of them writes anything, to any key.
fn mlimit_rejects_bad_arguments_and_writes_nothing(kind: &ServerKind) {
    let srv = Server::start(kind);
    assert_eq!(srv.cmd_value(&["SET", "str", "x"]), v_ok());
    assert_eq!(srv.cmd_value(&["HSET", "plainhash", "f", "v"]), v_int(1));
    let not_int = v_err("ERR value is not an integer or out of range");
    let syntax = v_err("ERR syntax error");
    let wrongtype = v_err("WRONGTYPE Operation against a key holding the wrong kind of value");
    let cases: Vec<(Vec<&str>, Value)> = vec![
        (
            vec!["TSCOUNTER.MLIMIT", "x", "a", "1", "1", "5s", "5"],
            not_int.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "0", "a", "1", "1", "5s", "5"],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "-1", "a", "1", "1", "5s", "5"],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "17", "a", "1", "1", "5s", "5"],
            syntax.clone(),
        ),
        // More keys than arguments.
        (
            vec!["TSCOUNTER.MLIMIT", "9", "a", "1", "1", "5s", "5"],
            syntax.clone(),
        ),
        // A key named twice.
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "2",
                "a",
                "a",
                "1",
                "1",
                "5s",
                "5",
                "1",
                "5s",
                "5",
            ],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "-1", "1", "5s", "5"],
            not_int.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "y", "1", "5s", "5"],
            not_int.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "0", "5s", "5"],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "17", "5s", "5"],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "z", "5s", "5"],
            not_int.clone(),
        ),
        // npairs larger than the pairs given; a pair without its max.
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "2", "5s", "5"],
            syntax.clone(),
        ),
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "1",
                "a",
                "1",
                "2",
                "5s",
                "5",
                "1m",
                "AT",
                "5",
            ],
            syntax.clone(),
        ),
        // The second key's pairs missing.
        (
            vec!["TSCOUNTER.MLIMIT", "2", "a", "b", "1", "1", "5s", "5"],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "1", "5s", "-5"],
            not_int.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "1", "5x", "5"],
            v_err("ERR invalid duration '5x'"),
        ),
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "2",
                "a",
                "b",
                "1",
                "1",
                "5s",
                "5",
                "1",
                "1000d",
                "5",
            ],
            v_err("ERR window '1000d' is longer than any resolution keeps"),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "1", "5s", "5", "NOPE"],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "1", "5s", "5", "AT"],
            syntax.clone(),
        ),
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "1",
                "a",
                "1",
                "1",
                "5s",
                "5",
                "AT",
                "1",
                "AT",
                "1",
            ],
            syntax.clone(),
        ),
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "1",
                "a",
                "1",
                "1",
                "5s",
                "5",
                "DETAILS",
                "DETAILS",
            ],
            syntax.clone(),
        ),
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "1",
                "a",
                "1",
                "1",
                "5s",
                "5",
                "AT",
                "-5",
            ],
            v_err("ERR timestamp is outside the kept range"),
        ),
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "1",
                "a",
                "1",
                "1",
                "5s",
                "5",
                "AT",
                "99999999999999",
            ],
            v_err("ERR timestamp is too far in the future"),
        ),
        // An allowed call at a time no resolution of `a` keeps: INCRBY's error.
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "2",
                "b",
                "a",
                "1",
                "1",
                "5s",
                "5",
                "1",
                "5s",
                "5",
                "AT",
                "1000",
            ],
            v_err("ERR timestamp is outside the kept range"),
        ),
        // Another type on the last key: refused before the first key is written.
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "2",
                "a",
                "str",
                "1",
                "1",
                "5s",
                "5",
                "1",
                "5s",
                "5",
            ],
            wrongtype.clone(),
        ),
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "3",
                "a",
                "b",
                "plainhash",
                "1",
                "1",
                "5s",
                "5",
                "1",
                "5s",
                "5",
                "1",
                "5s",
                "5",
            ],
            wrongtype.clone(),
        ),
    ];
    for (args, want) in cases {
        assert_eq!(srv.cmd_value(&args), want, "{args:?}");
    }
    let arity = srv.cmd_value(&["TSCOUNTER.MLIMIT", "1", "a", "1", "1", "5s"]);
    assert_eq!(
        error_text(&arity).map(|t| t.to_lowercase()),
        Some("err wrong number of arguments for 'tscounter.mlimit' command".into())
    );
    for key in ["a", "b"] {
        assert!(!exists(&srv, key), "no failed call creates {key}");
    }
    // A count that an increment would take past i64 on the second key: refused before
    // the first key is written. `full` keeps 10 s of seconds and an hour of minutes; the
    // minute of `t` holds i64::MAX - 1, written 45 s before `t`, where no 5 s window sees
    // it (the seconds have gone).
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "full", "RESOLUTIONS", "1s:10", "1m:60"]),
        v_ok()
    );
    let minute = (server_ms(&srv) - 120_000) / 60_000 * 60_000;
    let t = (minute + 50_000).to_string();
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.INCRBY",
            "full",
            "9223372036854775806",
            "AT",
            &(minute + 5_000).to_string()
        ]),
        v_int(9_223_372_036_854_775_806)
    );
    let before = hgetall(&srv, "full");
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.MLIMIT",
            "2",
            "a",
            "full",
            "2",
            "1",
            "5s",
            "5",
            "1",
            "5s",
            "5",
            "AT",
            &t
        ]),
        v_err("ERR increment or decrement would overflow")
    );
    assert!(!exists(&srv, "a"));
    assert_eq!(hgetall(&srv, "full"), before);
    srv.assert_alive();
}

per_server!(mlimit_declares_its_keys_and_fires_one_event_per_key_written);
fn mlimit_declares_its_keys_and_fires_one_event_per_key_written(kind: &ServerKind) {
    let srv = Server::start(kind);
    assert_eq!(
        srv.cmd_value(&[
            "COMMAND",
            "GETKEYS",
            "TSCOUNTER.MLIMIT",
            "3",
            "a",
            "b",
            "c",
            "1",
            "1",
            "5s",
            "5",
            "1",
            "5s",
            "5",
            "2",
            "5s",
            "5",
            "1m",
            "9",
            "AT",
            "1",
            "DETAILS"
        ]),
        v_bulks(&["a", "b", "c"])
    );
    assert_eq!(
        srv.cmd_value(&[
            "COMMAND",
            "GETKEYS",
            "TSCOUNTER.MLIMIT",
            "1",
            "k",
            "1",
            "1",
            "5s",
            "5"
        ]),
        v_bulks(&["k"])
    );
    assert_eq!(
        srv.cmd_value(&[
            "COMMAND",
            "GETKEYS",
            "TSCOUNTER.LIMIT",
            "k",
            "1",
            "5s",
            "5",
            "DETAILS"
        ]),
        v_bulks(&["k"])
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
    let call = |increment: &str| {
        srv.cmd_value(&[
            "TSCOUNTER.MLIMIT",
            "2",
            "x",
            "y",
            increment,
            "1",
            "5s",
            "1",
            "1",
            "5s",
            "9",
        ])
    };
    assert!(matches!(call("1"), Value::Array(a) if a[0] == v_int(1))); // applied
    assert!(matches!(call("1"), Value::Array(a) if a[0] == v_int(0))); // refused
    assert!(matches!(call("0"), Value::Array(_))); // check only
    call("x"); // error
    let mut events = Vec::new();
    while let Ok(message) = pubsub.get_message() {
        let payload: String = message.get_payload().expect("payload");
        events.push((message.get_channel_name().to_string(), payload));
    }
    assert_eq!(
        events,
        vec![
            (
                "__keyspace@0__:x".to_string(),
                "tscounter.limit".to_string()
            ),
            (
                "__keyspace@0__:y".to_string(),
                "tscounter.limit".to_string()
            ),
        ]
    );
}

/// Random MLIMIT traffic over five counters (some refused), `AT` in the last minute.
fn mlimit_traffic(srv: &Server, rng: &mut Rng, calls: usize) -> (usize, usize) {
    let now = server_ms(srv);
    let (mut applied, mut refused) = (0, 0);
    for _ in 0..calls {
        let n = 1 + rng.below(3) as usize;
        let mut keys: Vec<String> = Vec::new();
        while keys.len() < n {
            let key = format!("u{}", rng.below(5));
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        let mut args = vec!["TSCOUNTER.MLIMIT".to_string(), n.to_string()];
        args.extend(keys.iter().cloned());
        args.push(rng.below(3).to_string());
        for _ in 0..n {
            args.extend(strings(&[
                "2",
                "10s",
                &rng.below(6).to_string(),
                "1m",
                "20",
            ]));
        }
        args.extend(strings(&["AT", &(now - rng.below(60_000)).to_string()]));
        match srv.cmd_value(&args) {
            Value::Array(a) if a[0] == v_int(1) => applied += 1,
            Value::Array(_) => refused += 1,
            other => panic!("{args:?}: {other:?}"),
        }
    }
    (applied, refused)
}

per_server!(mlimit_replicates_effects_and_refusals_propagate_nothing);
/// A replica equals the primary after MLIMIT traffic; a refused call (and a check)
/// propagates nothing.
fn mlimit_replicates_effects_and_refusals_propagate_nothing(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    assert_eq!(
        primary.cmd_value(&["CONFIG", "SET", "repl-ping-replica-period", "3600"]),
        v_ok()
    );
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    let applied = primary.cmd_value(&[
        "TSCOUNTER.MLIMIT",
        "2",
        "p",
        "q",
        "2",
        "1",
        "1m",
        "2",
        "1",
        "1m",
        "2",
    ]);
    assert_eq!(
        applied.clone(),
        v_arr(vec![
            v_int(1),
            v_int(0),
            v_arr(vec![v_arr(vec![v_int(2)]), v_arr(vec![v_int(2)])])
        ])
    );
    wait_replica_synced(&primary, &replica);
    let offset = repl_offset(&primary);
    for increment in ["1", "0", "5"] {
        let reply = primary.cmd_value(&[
            "TSCOUNTER.MLIMIT",
            "2",
            "p",
            "q",
            increment,
            "1",
            "1m",
            "2",
            "1",
            "1m",
            "9",
        ]);
        assert!(
            matches!(&reply, Value::Array(a) if a.len() == 3),
            "{reply:?}"
        );
    }
    assert_eq!(
        repl_offset(&primary),
        offset,
        "refusals and checks replicate nothing"
    );
    let mut rng = Rng(0x3e91);
    let (applied, refused) = mlimit_traffic(&primary, &mut rng, 300);
    assert!(
        applied > 30 && refused > 30,
        "{applied} applied, {refused} refused"
    );
    wait_replica_synced(&primary, &replica);
    assert_replica_equal(&primary, &replica, "after MLIMIT traffic");
}

per_server!(mlimit_effects_reload_from_the_aof);
/// The effects MLIMIT writes to the AOF rebuild the same data.
fn mlimit_effects_reload_from_the_aof(kind: &ServerKind) {
    let mut srv = Server::start_with(
        kind,
        ServerOptions::new()
            .config("appendonly", "yes")
            .config("appendfsync", "always"),
    );
    let mut rng = Rng(0xa0f);
    let (applied, _) = mlimit_traffic(&srv, &mut rng, 200);
    assert!(applied > 30, "{applied}");
    let before = srv.dump_keyspace();
    assert_eq!(before.len(), 5, "{before:?}");
    srv.restart();
    assert_eq!(srv.dump_keyspace(), before, "AOF reload");
}

per_server!(mlimit_obeys_key_permissions_on_every_key);
/// A user without access to one of the keys is refused, and nothing is written to the
/// keys it may access.
fn mlimit_obeys_key_permissions_on_every_key(kind: &ServerKind) {
    let srv = Server::start(kind);
    let mut own = conn_as_user(&srv, "limiter", &["~rl:*"]);
    assert_eq!(
        conn_value(
            &mut own,
            &[
                "TSCOUNTER.MLIMIT",
                "2",
                "rl:a",
                "rl:b",
                "1",
                "1",
                "5s",
                "5",
                "1",
                "5s",
                "5"
            ]
        ),
        v_arr(vec![
            v_int(1),
            v_int(0),
            v_arr(vec![v_arr(vec![v_int(1)]), v_arr(vec![v_int(1)])])
        ])
    );
    let before = hgetall(&srv, "rl:a");
    for args in [
        vec![
            "TSCOUNTER.MLIMIT",
            "2",
            "rl:a",
            "other",
            "1",
            "1",
            "5s",
            "5",
            "1",
            "5s",
            "5",
        ],
        vec![
            "TSCOUNTER.MLIMIT",
            "2",
            "other",
            "rl:a",
            "1",
            "1",
            "5s",
            "5",
            "1",
            "5s",
            "5",
        ],
    ] {
        let denied = conn_value(&mut own, &args);
        assert!(
            error_text(&denied).is_some_and(|t| t.starts_with("NOPERM")),
            "{args:?}: {denied:?}"
        );
    }
    assert!(!exists(&srv, "other"));
    assert_eq!(hgetall(&srv, "rl:a"), before);
    // Read-only access to a key is not enough: MLIMIT may write every key.
    let mut reader = conn_as_user(&srv, "reader", &["~rl:*", "%R~ro:*"]);
    let denied = conn_value(
        &mut reader,
        &[
            "TSCOUNTER.MLIMIT",
            "2",
            "rl:a",
            "ro:x",
            "0",
            "1",
            "5s",
            "5",
            "1",
            "5s",
            "5",
        ],
    );
    assert!(
        error_text(&denied).is_some_and(|t| t.starts_with("NOPERM")),
        "{denied:?}"
    );
}

/// The server time (µs) of the best of three calls of `args`, by `INFO commandstats`.
fn best_usec(srv: &Server, args: &[String]) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..3 {
        assert_eq!(srv.cmd_value(&["CONFIG", "RESETSTAT"]), v_ok());
        let reply = srv.cmd_value(args);
        assert!(
            matches!(&reply, Value::Array(a) if a.len() == 3),
            "{reply:?}"
        );
        best = best.min(usec_per_call(srv, &args[0].to_lowercase()));
    }
    best
}

per_server!(mlimit_of_many_keys_and_full_counters_answers_in_10ms);
/// The most keys and pairs (16 keys of the default resolutions, busy for the last two
/// minutes, 16 pairs each, DETAILS), and two counters of 5000 one-second slots, every slot
/// stored (too many for a read cache, so their hashes are read), with 16 windows of 4900
/// slots each and DETAILS: under 10 ms at the server. The cost adds up over the keys (each
/// is one LIMIT's read), as the command's documented complexity says.
fn mlimit_of_many_keys_and_full_counters_answers_in_10ms(kind: &ServerKind) {
    let srv = Server::start(kind);
    let now = server_ms(&srv);
    let keys: Vec<String> = (0..16).map(|i| format!("{{s}}:{i}")).collect();
    let mut conn = srv.conn();
    let writes: Vec<Vec<String>> = (0..16 * 2_000)
        .map(|i| {
            let key = &keys[i % 16];
            let at = now - 120_000 + (i as i64 * 7) % 120_000;
            strings(&["TSCOUNTER.INCRBY", key, "1", "AT", &at.to_string()])
        })
        .collect();
    for chunk in writes.chunks(2_000) {
        for reply in pipeline(&mut conn, chunk) {
            assert!(matches!(reply, Value::Int(_)), "{reply:?}");
        }
    }
    let windows = [
        "1s", "5s", "30s", "1m", "90s", "2m", "5m", "10m", "1h", "2h", "5h", "10h", "1d", "2d",
        "5d", "100d",
    ];
    let mut args = vec!["TSCOUNTER.MLIMIT".to_string(), "16".to_string()];
    args.extend(keys.iter().cloned());
    args.push("1".into());
    for _ in &keys {
        args.push("16".into());
        for w in windows {
            args.extend(strings(&[w, "1000000"]));
        }
    }
    args.push("DETAILS".into());
    let us = best_usec(&srv, &args);
    println!("{}: MLIMIT of 16 keys x 16 pairs: {us} us", kind.name);
    assert!(us <= 10_000.0, "{}: {us} us", kind.name);

    for key in ["full:a", "full:b"] {
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.CREATE", key, "RESOLUTIONS", "1s:5000"]),
            v_ok()
        );
        let fill: Vec<Vec<String>> = (0..4_990)
            .rev()
            .map(|back: i64| {
                strings(&[
                    "TSCOUNTER.INCRBY",
                    key,
                    "1",
                    "AT",
                    &(now - back * 1000).to_string(),
                ])
            })
            .collect();
        for chunk in fill.chunks(2_000) {
            for reply in pipeline(&mut conn, chunk) {
                assert!(matches!(reply, Value::Int(_)), "{reply:?}");
            }
        }
    }
    let mut args = strings(&["TSCOUNTER.MLIMIT", "2", "full:a", "full:b", "1"]);
    for _ in 0..2 {
        args.push("16".into());
        for max in 0..16 {
            args.extend(strings(&["4900s", &(10_000 + max).to_string()]));
        }
    }
    args.push("DETAILS".into());
    let us = best_usec(&srv, &args);
    println!(
        "{}: MLIMIT of 2 counters of 5000 slots x 16 windows of 4900 slots: {us} us",
        kind.name
    );
    assert!(us <= 10_000.0, "{}: {us} us", kind.name);
    srv.assert_alive();
}
