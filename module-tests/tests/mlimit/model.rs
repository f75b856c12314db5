//! The brute-force model of LIMIT and MLIMIT (a log of every applied increment per key)
//! and seeded random traffic checked against it reply by reply.

use super::*;

pub(crate) fn slot_of(t: i64, res: i64) -> i64 {
    t.div_euclid(res)
}

/// One counter as a log of every applied increment: `(ts, increment)`, with the
/// resolutions that decide which of them a read counts.
pub(crate) struct Model {
    /// (resolution ms, samples), finest first.
    resolutions: Vec<(i64, i64)>,
    /// Every applied increment, with the clock it was applied at.
    log: Vec<(i64, i64, i64)>,
}

impl Model {
    pub(crate) fn new(resolutions: &[(i64, i64)]) -> Model {
        Model {
            resolutions: resolutions.to_vec(),
            log: Vec::new(),
        }
    }

    /// The slot of `t` at resolution `(res, samples)` is kept when the clock is `now`.
    pub(crate) fn keeps((res, samples): (i64, i64), now: i64, t: i64) -> bool {
        slot_of(t, res) > slot_of(now, res) - samples
    }

    /// SUM window at time `t` with the clock at `now`: the increments of the log that
    /// landed in the window's resolution (kept when written) and fall in its slots.
    pub(crate) fn sum(&self, window: i64, t: i64, now: i64) -> i64 {
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

    pub(crate) fn passes(&self, increment: i64, limits: &[(i64, i64)], t: i64, now: i64) -> bool {
        limits
            .iter()
            .all(|&(w, max)| self.sum(w, t, now) + increment <= max)
    }

    /// Every later moment at which some sum of these resolutions may change (a slot
    /// boundary), as delays from `t`, up to `horizon`.
    pub(crate) fn boundaries(&self, t: i64, horizon: i64) -> Vec<i64> {
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
    pub(crate) fn details(&self, (window, max): (i64, i64), t: i64, now: i64) -> Vec<Value> {
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
pub(crate) fn model_call(
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
pub(crate) fn mlimit_args(
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
pub(crate) fn options(args: &mut Vec<String>, at: Option<i64>, details: bool) {
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

pub(crate) const KEYS: [&str; 3] = ["{u}:user", "{u}:ip", "{u}:global"];
pub(crate) const RESOLUTIONS: [&[(i64, i64)]; 3] = [
    &[(1_000, 600), (60_000, 60)],
    &[(2_000, 600), (60_000, 60)],
    &[(5_000, 360), (3_600_000, 24)],
];
pub(crate) const RESOLUTION_TEXTS: [&[&str]; 3] = [
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
        let unit = |res: i64| match res {
            1_000 => "1s".to_string(),
            2_000 => "2s".to_string(),
            5_000 => "5s".to_string(),
            60_000 => "1m".to_string(),
            _ => "1h".to_string(),
        };
        // The stored slots as RANGE lists them (the timer packs runs of old seconds).
        let mut got: BTreeMap<String, String> = BTreeMap::new();
        for &r in resolutions {
            let range = srv.cmd_value(&["TSCOUNTER.RANGE", key, &unit(r.0), "FROM", "0"]);
            let Value::Array(pairs) = range else {
                panic!("{range:?}")
            };
            for pair in pairs {
                let Value::Array(p) = pair else {
                    panic!("{pair:?}")
                };
                let (Value::Int(start), Value::Int(count)) = (&p[0], &p[1]) else {
                    panic!("{p:?}")
                };
                got.insert(format!("{}:{}", unit(r.0), start / r.0), count.to_string());
            }
        }
        for ((res, index), count) in counts {
            if count != 0 {
                want.insert(format!("{}:{index}", unit(res)), count.to_string());
            }
        }
        assert_eq!(got, want, "{key}");
    }
    srv.assert_alive();
}
