//! The checks after every batch: alive, `reads`, `consistency` (leaderboard totals equal
//! the live slots), `tracked` (`INFO tally` bookkeeping) and `latency`.

use super::*;

impl Fuzz<'_> {
    fn check_alive(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        for (who, s) in [("primary", self.srv), ("replica", self.replica)] {
            if !s.is_alive() {
                problems.push(format!(
                    "{who} is not alive\n--- {who} log ---\n{}",
                    s.log_tail(40)
                ));
            }
            let text = std::fs::read_to_string(s.log_path()).unwrap_or_default();
            let bad: Vec<&str> = text
                .lines()
                .filter(|l| {
                    let l = l.to_lowercase();
                    l.contains("crashed") || l.contains("panic") || l.contains("assertion")
                })
                .take(5)
                .collect();
            if !bad.is_empty() {
                problems.push(format!("{who} log has a crash report: {bad:#?}"));
            }
            // check-caches is on: a stale in-memory meta would have been counted.
            let stale = if s.is_alive() {
                module_tests::info::info_i64(s, "tally", "tally_cache_mismatches")
            } else {
                0
            };
            if stale > 0 {
                problems.push(format!(
                    "{who} used a stale leaderboard meta {stale} time(s)"
                ));
            }
        }
        problems
    }

    fn take_census(&mut self) {
        for db in 0..2u32 {
            self.census[db as usize] = key_census(&mut self.check, db);
        }
        // Objects with no key left are new again: the fuzzer's edits died with them.
        for db in 0..2 {
            let present: BTreeSet<String> = self.census[db]
                .keys()
                .map(|k| owner(&String::from_utf8_lossy(k)).to_string())
                .collect();
            let t = &mut self.taint[db];
            t.not_tally.retain(|o| present.contains(o));
            t.edited.retain(|o| present.contains(o));
            t.overflowing.retain(|o| present.contains(o));
        }
        redis::cmd("SELECT").arg(0).exec(&mut self.check).ok();
    }

    /// Reads answer no error, but for the documented one of a sum beyond a signed 64-bit
    /// integer on an object the fuzzer wrote `i64::MAX` into.
    fn check_reads(&mut self) -> Vec<String> {
        const OVERFLOW: &str = "ERR increment or decrement would overflow";
        let mut problems = Vec::new();
        for db in 0..2usize {
            redis::cmd("SELECT").arg(db).exec(&mut self.check).ok();
            let mut cmds: Vec<Vec<String>> = Vec::new();
            for name in &self.names {
                if !self.taint[db].not_tally.contains(name) {
                    cmds.extend(self.family.reads(name));
                }
            }
            if cmds.is_empty() {
                continue; // a family without reads (TSTHROTTLE)
            }
            let out = pipeline(&mut self.check, &cmds);
            for (c, r) in cmds.iter().zip(&out) {
                // The object read (MSUM names its key after `numkeys`).
                let key = c.iter().skip(1).find(|a| self.names.contains(*a));
                let key = key.map_or("", String::as_str);
                let overflow = error_text(r).as_deref() == Some(OVERFLOW)
                    && self.taint[db].overflowing.contains(key);
                if error_text(r).is_some() && !overflow {
                    let kind = self.census[db]
                        .get(key.as_bytes())
                        .map_or("missing".to_string(), |k| format!("{k:?}"));
                    problems.push(format!(
                        "db{db}: {} -> {} (key at the check: {kind})",
                        show(c),
                        show_value(r)
                    ));
                }
            }
        }
        redis::cmd("SELECT").arg(0).exec(&mut self.check).ok();
        problems
    }

    /// One leaderboard, atomically: `Ok(None)` consistent (or gone whole), `Ok(Some)` the
    /// difference, `Err(())` too close to a slot boundary to judge.
    fn board_snapshot(&mut self, db: usize, board: &str) -> Result<Option<String>, ()> {
        let prefix = format!("{board}|slot|");
        let slots: Vec<String> = self.census[db]
            .keys()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .filter(|k| k.starts_with(&prefix))
            .collect();
        let mut cmds: Vec<Vec<String>> = vec![
            vec!["SELECT".into(), db.to_string()],
            vec!["MULTI".into()],
            vec!["TIME".into()],
            vec!["HGET".into(), format!("{board}|meta"), "_tally".into()],
            vec![
                "TSRANK.TOP".into(),
                board.into(),
                "1000".into(),
                "WITHSCORES".into(),
            ],
        ];
        for s in &slots {
            cmds.push(vec!["HGETALL".into(), s.clone()]);
        }
        cmds.push(vec!["EXEC".into()]);
        cmds.push(vec!["SELECT".into(), "0".into()]);
        let out = pipeline(&mut self.check, &cmds);
        let Some(Value::Array(r)) = out.get(out.len() - 2) else {
            return Ok(Some(format!("EXEC failed: {:?}", out.get(out.len() - 2))));
        };
        let now_us = match &r[0] {
            Value::Array(t) if t.len() == 2 => {
                as_i64(&t[0]).unwrap_or(0) * 1_000_000 + as_i64(&t[1]).unwrap_or(0)
            }
            _ => return Err(()),
        };
        let now = now_us / 1000;
        let meta = value_text(&r[1]);
        if let Some(e) = error_text(&r[2]) {
            return Ok(Some(format!("TSRANK.TOP -> {e}")));
        }
        let top: Vec<(String, i64)> = match &r[2] {
            Value::Array(a) => a
                .chunks(2)
                .map(|c| {
                    let m = value_text(&c[0]).unwrap_or_default();
                    (m, c.get(1).and_then(as_i64).unwrap_or(i64::MIN))
                })
                .collect(),
            other => return Ok(Some(format!("TSRANK.TOP -> {other:?}"))),
        };
        let Some(meta) = meta else {
            return Ok(if top.is_empty() {
                None
            } else {
                Some(format!("no {board}|meta, but TOP lists {top:?}"))
            });
        };
        let parts: Vec<i64> = meta
            .split_whitespace()
            .skip(1)
            .filter_map(|p| p.parse().ok())
            .collect();
        let (Some(&window), Some(&slot)) = (parts.first(), parts.get(1)) else {
            return Ok(Some(format!("{board}|meta _tally is {meta:?}")));
        };
        if slot <= 0 || window < slot {
            return Ok(Some(format!("{board}|meta _tally is {meta:?}")));
        }
        let into_slot = now.rem_euclid(slot);
        if into_slot < 3 || into_slot > slot - 3 {
            return Err(());
        }
        let current = now.div_euclid(slot);
        let oldest = current - window / slot + 1;
        let mut expected: BTreeMap<String, i64> = BTreeMap::new();
        for (name, reply) in slots.iter().zip(&r[3..]) {
            let Some(index) = name[prefix.len()..].parse::<i64>().ok() else {
                continue;
            };
            if index < oldest || index > current {
                continue;
            }
            if let Value::Array(fields) = reply {
                for c in fields.chunks(2) {
                    let m = value_text(&c[0]).unwrap_or_default();
                    let n = c.get(1).and_then(as_i64).unwrap_or(0);
                    *expected.entry(m).or_insert(0) += n;
                }
            }
        }
        expected.retain(|_, n| *n != 0);
        let listed: BTreeMap<String, i64> = top.iter().cloned().collect();
        if listed == expected {
            Ok(None)
        } else {
            Ok(Some(format!(
                "meta {meta:?}, now {now} (slot {current}, live slots {oldest}..={current}, stored slots {:?}): TOP {listed:?} but the live slots sum to {expected:?}",
                slots.iter().map(|s| &s[prefix.len()..]).collect::<Vec<_>>()
            )))
        }
    }

    fn check_consistency(&mut self) -> Vec<String> {
        let deadline = Instant::now() + SETTLE;
        loop {
            let mut problems = Vec::new();
            for db in 0..2usize {
                let boards: Vec<String> = self
                    .names
                    .iter()
                    .filter(|n| {
                        !self.taint[db].not_tally.contains(*n)
                            && !self.taint[db].edited.contains(*n)
                            && (self.census[db].contains_key(n.as_bytes())
                                || self.census[db].contains_key(format!("{n}|meta").as_bytes()))
                    })
                    .cloned()
                    .collect();
                for b in boards {
                    // Up to a few tries when the clock sits on a slot boundary.
                    for _ in 0..5 {
                        match self.board_snapshot(db, &b) {
                            Err(()) => std::thread::sleep(Duration::from_millis(4)),
                            Ok(None) => break,
                            Ok(Some(p)) => {
                                problems.push(format!("db{db} board {b} inconsistent: {p}"));
                                break;
                            }
                        }
                    }
                }
            }
            if problems.is_empty() || Instant::now() > deadline {
                return problems;
            }
            std::thread::sleep(Duration::from_millis(100));
            self.take_census();
        }
    }

    /// `tally_tracked_objects` counts schedule entries, one per tally hash (counter,
    /// stats object, board `|meta`) and database. The bound: tracked - backlog <= live,
    /// where
    /// * live = hashes with a `_tally` field in db 0 and 1 (the only databases used),
    ///   plus hashes without one that are not slot hashes: those were tally objects
    ///   until the fuzzer removed their `_tally`, and an entry for a key that still
    ///   exists is bounded by the keyspace;
    /// * backlog (`tally_expiry_backlog`) = entries already due, which the next ticks
    ///   visit and drop if their key is gone (a key deleted a moment ago, a name that
    ///   arrived by RENAME and is scheduled for a visit now).
    ///
    /// The census comes first: its SCAN deletes logically expired keys, whose events
    /// must drop their entries before INFO is read. A violation must last the whole
    /// settle time (derived keys follow DEL / RENAME within a second) to count.
    fn check_tracked(&mut self) -> Vec<String> {
        let deadline = Instant::now() + SETTLE;
        loop {
            let mut live = 0i64;
            for census in &self.census {
                live += census
                    .iter()
                    .filter(|(k, kind)| {
                        kind.key_type == "hash"
                            && (kind.has_tally_field || !is_slot_hash(&String::from_utf8_lossy(k)))
                    })
                    .count() as i64;
            }
            let info = value_text(
                &redis::cmd("INFO")
                    .arg("tally")
                    .query::<Value>(&mut self.check)
                    .unwrap_or(Value::Nil),
            )
            .map(|t| parse_info(&t))
            .unwrap_or_default();
            let field = |f: &str| info.get(f).and_then(|v| v.trim().parse::<i64>().ok());
            let (Some(tracked), Some(backlog)) = (
                field("tally_tracked_objects"),
                field("tally_expiry_backlog"),
            ) else {
                return vec![format!(
                    "INFO tally lacks tracked_objects / expiry_backlog: {info:?}"
                )];
            };
            if tracked - backlog <= live {
                return Vec::new();
            }
            if Instant::now() > deadline {
                return vec![format!(
                    "tally_tracked_objects {tracked} - tally_expiry_backlog {backlog} > {live} live tally hashes (db0 {} keys, db1 {} keys), for {SETTLE:?}",
                    self.census[0].len(),
                    self.census[1].len()
                )];
            }
            std::thread::sleep(Duration::from_millis(100));
            self.take_census();
        }
    }

    /// `LATENCY LATEST` as `event: latest ms (max ms)`, since the last check.
    fn latency_events(&mut self) -> String {
        let latest = redis::cmd("LATENCY")
            .arg("LATEST")
            .query::<Value>(&mut self.check)
            .unwrap_or(Value::Nil);
        let Value::Array(events) = latest else {
            return format!("{latest:?}");
        };
        let events: Vec<String> = events
            .iter()
            .filter_map(|e| match e {
                Value::Array(f) => Some(format!(
                    "{}: {} ms (max {} ms)",
                    escape_bytes(&value_bytes(f.first()?).unwrap_or_default()),
                    f.get(2).and_then(as_i64)?,
                    f.get(3).and_then(as_i64)?
                )),
                _ => None,
            })
            .collect();
        if events.is_empty() {
            "none".into()
        } else {
            events.join(", ")
        }
    }

    fn check_latency(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        // SLOWLOG and the tick timer time by the wall clock, which runs on while the kernel
        // has the server waiting for a CPU (two fuzzers, each with a primary, a replica and
        // a ping thread, share 2 cores) or the hypervisor steals it: that time during the
        // batch is not tally's doing (see `Lost`).
        let waited_us = self
            .lost_at_slowlog_reset
            .map_or(0, |lost| u64::try_from(lost.server_us()).unwrap_or(0));
        // The maximum is the server's since it started, so only a new one is looked at.
        let max_tick = info_field_i64(&mut self.check, "tally", "tally_max_tick_us").unwrap_or(-1);
        if max_tick > self.max_tick_seen
            && max_tick >= SERVER_STALL_LIMIT_US + i64::try_from(waited_us).unwrap_or(0)
        {
            problems.push(format!(
                "tally_max_tick_us is {max_tick} (limit {SERVER_STALL_LIMIT_US}; the server lost {waited_us} us to other work during the batch)"
            ));
        }
        self.max_tick_seen = self.max_tick_seen.max(max_tick);
        let slow = redis::cmd("SLOWLOG")
            .arg("GET")
            .arg(10)
            .query::<Value>(&mut self.check)
            .unwrap_or(Value::Nil);
        if let Value::Array(entries) = &slow {
            for e in entries {
                if let Value::Array(f) = e {
                    let us = f.get(2).and_then(as_i64).unwrap_or(-1);
                    let args: Vec<String> = match f.get(3) {
                        Some(Value::Array(a)) => a
                            .iter()
                            .map(|x| escape_bytes(&value_bytes(x).unwrap_or_default()))
                            .collect(),
                        _ => Vec::new(),
                    };
                    // The replica's (re)sync forks for a snapshot, and `FLUSHALL SYNC` frees
                    // every key inside the command: the server's time, not tally's (tally's
                    // part of a flush is in `FLUSHALL ASYNC`, which stays checked).
                    let upper: Vec<String> = args.iter().map(|a| a.to_uppercase()).collect();
                    let replication = upper
                        .first()
                        .is_some_and(|c| ["PSYNC", "SYNC"].contains(&c.as_str()))
                        || upper == ["FLUSHALL", "SYNC"];
                    let preempted = u64::try_from(us).is_ok_and(|us| {
                        us < u64::try_from(SERVER_STALL_LIMIT_US).unwrap_or(0) + waited_us
                    });
                    if !replication && !preempted {
                        problems.push(format!(
                            "SLOWLOG: {} took {us} us (the server lost {waited_us} us to other work during the batch)",
                            args.join(" ")
                        ));
                    }
                }
            }
        }
        redis::cmd("SLOWLOG")
            .arg("RESET")
            .exec(&mut self.check)
            .ok();
        self.lost_at_slowlog_reset = Some(Lost::start(self.srv));
        // Client-side: the maximum per batch, the 99th percentile over the whole run so
        // far (a batch may hold only a handful of pings, whose "p99" is their maximum).
        let samples = std::mem::take(&mut *self.pings.lock().unwrap_or_else(|e| e.into_inner()));
        if let Some(max) = samples.iter().max() {
            if *max >= CLIENT_MAX_LIMIT {
                problems.push(format!(
                    "PING took {max:?} (limit {CLIENT_MAX_LIMIT:?}) among {} pings of this batch; the server's latency events of 10 ms or more: {}",
                    samples.len(),
                    self.latency_events()
                ));
            }
        }
        redis::cmd("LATENCY")
            .arg("RESET")
            .exec(&mut self.check)
            .ok();
        self.all_pings.extend(samples);
        if self.all_pings.len() >= 200 {
            let mut sorted = self.all_pings.clone();
            sorted.sort();
            let p99 = sorted[sorted.len() * 99 / 100];
            if p99 >= CLIENT_P99_LIMIT {
                problems.push(format!(
                    "PING p99 {p99:?} over the {} pings so far (limit {CLIENT_P99_LIMIT:?})",
                    sorted.len()
                ));
            }
        }
        problems
    }

    pub(super) fn check(&mut self, workload_problems: Vec<String>) {
        let mut problems = workload_problems;
        problems.extend(self.check_alive());
        if !problems.is_empty() {
            self.fail(&problems);
        }
        self.take_census();
        if !self.skip.contains("reads") {
            problems.extend(self.check_reads());
        }
        if self.family == Family::Rank && !self.skip.contains("consistency") {
            problems.extend(self.check_consistency());
        }
        if !self.skip.contains("tracked") {
            self.take_census();
            problems.extend(self.check_tracked());
        }
        if !self.skip.contains("latency") {
            problems.extend(self.check_latency());
        }
        if !problems.is_empty() {
            self.fail(&problems);
        }
    }
}
