//! The model-based random workload: pipelined INCRBY/INCR with `AT`, SUM and RANGE reads
//! compared with the reference model written here, for several resolution sets, then the
//! stored hash itself.

use super::*;

/// The contract, as a model: per resolution an increment lands in slot floor(ts/res) iff
/// that slot is kept at write time; a read counts only slots kept at read time.
/// Timestamps are only generated where "kept" is the same for every server time in
/// `t0 .. t0 + MARGIN_MS`, so `kept` can be evaluated at `t0`.
struct Model {
    rs: Vec<Res>,
    t0: i64,
    counts: BTreeMap<(i64, i64), i64>,
}

impl Model {
    /// True if `ts` is classified the same (kept or not) at every resolution for every
    /// server time in the margin.
    fn stable(&self, ts: i64) -> bool {
        self.rs.iter().all(|r| {
            let i = slot(ts, r.ms);
            !(first_kept(self.t0, r) <= i && i < first_kept(self.t0 + MARGIN_MS, r))
        })
    }

    fn kept(&self, r: &Res, i: i64) -> bool {
        i >= first_kept(self.t0, r)
    }

    fn incr(&mut self, ts: i64, by: i64) -> Value {
        let mut reply = None;
        for r in self.rs.clone() {
            let i = slot(ts, r.ms);
            if self.kept(&r, i) {
                let c = self.counts.entry((r.ms, i)).or_default();
                *c += by;
                reply.get_or_insert(*c);
            }
        }
        reply.map_or_else(|| v_err(OUTSIDE), v_int)
    }

    fn count(&self, r: &Res, i: i64) -> i64 {
        if self.kept(r, i) {
            self.counts.get(&(r.ms, i)).copied().unwrap_or(0)
        } else {
            0
        }
    }

    fn sum(&self, t: i64, window: i64) -> i64 {
        let r = *self.rs.iter().find(|r| r.span() >= window).unwrap();
        let hi = slot(t, r.ms);
        let k = (window + r.ms - 1) / r.ms;
        (hi - k + 1..=hi).map(|i| self.count(&r, i)).sum()
    }

    /// Non-zero kept slots of `r` with index in `lo..=hi`, oldest first.
    fn nonzero(&self, r: &Res, lo: i64, hi: i64) -> Vec<(i64, i64)> {
        self.counts
            .range((r.ms, lo)..=(r.ms, hi))
            .filter(|(&(_, i), &c)| c != 0 && self.kept(r, i))
            .map(|(&(_, i), &c)| (i * r.ms, c))
            .collect()
    }
}

/// A read whose expected reply is only known after the batch ran (needs the server time
/// at the end): RANGE with EMPTY and no FROM/TO lists exactly the kept range of the moment.
enum Expect {
    Exact(Value),
    /// The resolution and its non-zero kept counts (index -> count) when the read was sent.
    KeptRangeEmpty(Res, BTreeMap<i64, i64>),
}

/// One resolution set: thousands of pipelined writes with reads interleaved, all compared
/// with the model; then the stored hash itself.
fn run_model(srv: &Server, seed: u64, text: &str, writes: usize) {
    let kind = &srv.kind().name;
    let key = format!("model:{seed}");
    let rs = res_list(text);
    let mut create = vec![
        "TSCOUNTER.CREATE".to_string(),
        key.clone(),
        "RESOLUTIONS".into(),
    ];
    create.extend(text.split_whitespace().map(String::from));
    assert_eq!(srv.cmd_value(&create), v_ok(), "{kind}");
    let mut conn = srv.conn();
    let t0 = server_ms(srv);
    let mut m = Model {
        rs: rs.clone(),
        t0,
        counts: BTreeMap::new(),
    };
    let mut rng = Rng(seed);
    let widest = rs.iter().map(Res::span).max().unwrap();
    let (mut batch, mut expect): (Vec<Vec<Vec<u8>>>, Vec<Expect>) = (Vec::new(), Vec::new());
    let (mut n_ok, mut n_outside, mut n_reads) = (0, 0, 0);
    for step in 0..writes {
        // A timestamp: mostly inside one resolution's span, sometimes exactly on the
        // oldest stable kept slot or just before the kept range, sometimes far too old.
        let mut ts = None;
        for _ in 0..100 {
            let r = rs[rng.below(rs.len() as i64) as usize];
            let cand = match rng.below(20) {
                0 => t0 - rng.below(widest * 2),
                1 => first_kept(t0 + MARGIN_MS, &r) * r.ms,
                2 => first_kept(t0, &r) * r.ms - 1,
                _ => t0 - rng.below(r.span() + r.span() / 5),
            };
            if cand <= t0 && m.stable(cand) {
                ts = Some(cand);
                break;
            }
        }
        let Some(ts) = ts else { continue };
        let (cmd, by) = match rng.below(10) {
            0 => (args(&["TSCOUNTER.INCR", &key, "AT", &ts.to_string()]), 1),
            1 => {
                let by = (rng.below(2_000_000_001) - 1_000_000_000) * 1000;
                let c = args(&[
                    "TSCOUNTER.INCRBY",
                    &key,
                    &by.to_string(),
                    "at",
                    &ts.to_string(),
                ]);
                (c, by)
            }
            _ => {
                let by = rng.below(21) - 10;
                let c = args(&[
                    "TSCOUNTER.INCRBY",
                    &key,
                    &by.to_string(),
                    "AT",
                    &ts.to_string(),
                ]);
                (c, by)
            }
        };
        let want = m.incr(ts, by);
        if want == v_err(OUTSIDE) {
            n_outside += 1;
        } else {
            n_ok += 1;
        }
        batch.push(cmd);
        expect.push(Expect::Exact(want));

        if step % 12 == 0 {
            n_reads += 2;
            // SUM: 1 to 4 windows ending with the slot of t (t <= t0).
            let t = t0
                - match rng.below(3) {
                    0 => rng.below(2_000),
                    1 => rng.below(widest / 3),
                    _ => rng.below(widest),
                };
            let nwin = 1 + rng.below(4);
            let mut cmd = vec!["TSCOUNTER.SUM".to_string(), key.clone()];
            let mut sums = Vec::new();
            for _ in 0..nwin {
                let r = rs[rng.below(rs.len() as i64) as usize];
                let (w, text) = match rng.below(3) {
                    0 => {
                        let w = r.ms * (1 + rng.below(r.samples));
                        (w, label(w))
                    }
                    1 => {
                        let w = 1 + rng.below(r.span());
                        (w, w.to_string())
                    }
                    _ => {
                        let w = 1000 * (1 + rng.below(r.span() / 1000));
                        (w, format!("{}s", w / 1000))
                    }
                };
                cmd.push(text);
                sums.push(m.sum(t, w));
            }
            cmd.extend(["AT".to_string(), t.to_string()]);
            batch.push(args(&cmd));
            expect.push(Expect::Exact(if sums.len() == 1 {
                v_int(sums[0])
            } else {
                v_ints(&sums)
            }));

            // RANGE, in one of four shapes.
            let r = rs[rng.below(rs.len() as i64) as usize];
            let res_arg = if rng.below(2) == 0 {
                label(r.ms)
            } else {
                r.ms.to_string()
            };
            let mut cmd = vec!["TSCOUNTER.RANGE".to_string(), key.clone(), res_arg];
            let lo_stable = first_kept(t0 + MARGIN_MS, &r);
            let hi0 = slot(t0, r.ms);
            match rng.below(4) {
                0 => {
                    let lo = first_kept(t0, &r);
                    expect.push(Expect::Exact(v_pairs(&m.nonzero(&r, lo, hi0))));
                }
                1 if lo_stable <= hi0 => {
                    // EMPTY between FROM and TO, both inside the range kept all along.
                    let a = lo_stable + rng.below(hi0 - lo_stable + 1);
                    let b = a + rng.below(hi0 - a + 1);
                    let from = a * r.ms + rng.below(r.ms);
                    let to = (b * r.ms + rng.below(r.ms)).min(t0);
                    let b = slot(to, r.ms);
                    cmd.extend(["FROM".into(), from.to_string(), "TO".into(), to.to_string()]);
                    cmd.push(if rng.below(2) == 0 { "EMPTY" } else { "empty" }.into());
                    let rows: Vec<(i64, i64)> =
                        (a..=b).map(|i| (i * r.ms, m.count(&r, i))).collect();
                    expect.push(Expect::Exact(v_pairs(&rows)));
                }
                2 | 1 => {
                    // Without EMPTY: any FROM / TO, either may be left out, in any order.
                    let from = (rng.below(2) == 0).then(|| t0 - rng.below(r.span() * 2));
                    let to = (rng.below(2) == 0).then(|| t0 - rng.below(r.span() * 2));
                    let mut opts = Vec::new();
                    if let Some(f) = from {
                        opts.push(vec!["FROM".to_string(), f.to_string()]);
                    }
                    if let Some(t) = to {
                        opts.push(vec!["TO".to_string(), t.to_string()]);
                    }
                    if rng.below(2) == 0 {
                        opts.reverse();
                    }
                    cmd.extend(opts.into_iter().flatten());
                    let lo = from
                        .map_or(i64::MIN, |f| slot(f, r.ms))
                        .max(first_kept(t0, &r));
                    let hi = to.map_or(hi0, |t| slot(t, r.ms)).min(hi0);
                    let rows = if lo <= hi {
                        m.nonzero(&r, lo, hi)
                    } else {
                        Vec::new()
                    };
                    expect.push(Expect::Exact(v_pairs(&rows)));
                }
                _ => {
                    cmd.push("EMPTY".into());
                    let snapshot = m
                        .nonzero(&r, i64::MIN, i64::MAX)
                        .into_iter()
                        .map(|(start, c)| (start / r.ms, c))
                        .collect();
                    expect.push(Expect::KeptRangeEmpty(r, snapshot));
                }
            }
            batch.push(args(&cmd));
        }

        if batch.len() >= 400 || step + 1 == writes {
            let got = pipeline(&mut conn, &batch);
            let t_end = server_ms(srv);
            assert!(
                t_end - t0 < MARGIN_MS,
                "{kind}: the batch ended {} ms after t0, past the {MARGIN_MS} ms margin that \
                 keeps this test deterministic (machine overloaded?)",
                t_end - t0
            );
            for ((cmd, want), got) in batch.iter().zip(&expect).zip(got) {
                let shown: Vec<String> = cmd
                    .iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                match want {
                    Expect::Exact(v) => {
                        assert_eq!(&got, v, "{kind} seed {seed} ({text}): {shown:?}")
                    }
                    Expect::KeptRangeEmpty(r, snapshot) => {
                        check_kept_range(snapshot, r, t0, t_end, &got, &format!("{kind} {shown:?}"))
                    }
                }
            }
            batch.clear();
            expect.clear();
        }
    }
    assert!(
        n_ok > writes / 2 && n_outside > 0 && n_reads > 100,
        "{n_ok} {n_outside}"
    );

    // The stored hash is exactly the model: settings, bookkeeping, non-zero kept slots.
    let h = hgetall(srv, key.as_bytes());
    let canon: Vec<String> = rs
        .iter()
        .map(|r| format!("{}:{}", label(r.ms), r.samples))
        .collect();
    assert_eq!(
        h.get("_tally"),
        Some(&format!("counter {}", canon.join(" "))),
        "{kind}"
    );
    let mut want_fields = BTreeMap::new();
    for (&(ms, i), &c) in &m.counts {
        if c != 0 {
            want_fields.insert(format!("{}:{i}", label(ms)), c.to_string());
        }
    }
    assert_eq!(
        slot_fields(srv, key.as_bytes()),
        want_fields,
        "{kind} seed {seed}"
    );
    let state = parse_state(&h["_state"], &rs);
    assert_eq!(state.len(), rs.len(), "{kind}: {h:?}");
    for (r, (lo, n)) in rs.iter().zip(state) {
        let idx: Vec<i64> = m
            .counts
            .iter()
            .filter(|(&(ms, _), &c)| ms == r.ms && c != 0)
            .map(|(&(_, i), _)| i)
            .collect();
        assert_eq!(n, idx.len() as i64, "{kind}: _state of {r:?}");
        if let (Some(first), Some(last)) = (idx.first(), idx.last()) {
            assert!(
                lo <= *first && *last < lo + r.samples,
                "{kind}: _state lo {lo} for {idx:?}"
            );
        }
    }
}

/// RANGE key res EMPTY (no FROM/TO) answers the kept range of the moment it ran: exactly
/// `samples` rows ending with the slot of some server time in `t0 ..= t_end`, with the
/// model's counts.
fn check_kept_range(
    counts: &BTreeMap<i64, i64>,
    r: &Res,
    t0: i64,
    t_end: i64,
    got: &Value,
    what: &str,
) {
    let Value::Array(rows) = got else {
        panic!("{what}: {got:?}")
    };
    assert_eq!(rows.len() as i64, r.samples, "{what}: {got:?}");
    let start = |v: &Value| match v {
        Value::Array(p) if p.len() == 2 => match p[0] {
            Value::Int(s) => s,
            _ => panic!("{what}: {v:?}"),
        },
        _ => panic!("{what}: {v:?}"),
    };
    let hi = slot(start(rows.last().unwrap()), r.ms);
    assert!(
        slot(t0, r.ms) <= hi && hi <= slot(t_end, r.ms),
        "{what}: last slot {hi} outside the server's clock range"
    );
    let lo = hi - r.samples + 1;
    let want: Vec<(i64, i64)> = (lo..=hi)
        .map(|i| (i * r.ms, counts.get(&i).copied().unwrap_or(0)))
        .collect();
    assert_eq!(got, &v_pairs(&want), "{what}");
}

per_server!(model_based_workload_matches_reference);
fn model_based_workload_matches_reference(kind: &ServerKind) {
    let srv = Server::start(kind);
    for (seed, text, writes) in [
        (11u64, DEFAULT_RES, 3000),
        (12, "1s:60 1m:60 1h:24 1d:365", 3000),
        (13, "13s:11 1500ms:50 7s:20", 1500),
    ] {
        run_model(&srv, seed, text, writes);
    }
    srv.assert_alive();
}
