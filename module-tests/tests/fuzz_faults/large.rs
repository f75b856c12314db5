//! Large-object mode: the fault fuzzer's faults on objects of hundreds of thousands of
//! members or slots (`TALLY_LONG=1`; `make test` runs the same with a few thousand),
//! checking the bounded-work rule and that memory comes back.
//!
//! Objects (one of each, recreated whenever a fault removed it):
//! * `{L}c`, a counter `1000ms:3300 1001ms:3300 1003ms:3300` (9900 slots, near the 10000
//!   a counter may keep) with an event in each of its last `slots` seconds (three slots
//!   each);
//! * `{L}b`, a board `WINDOW 24h SLOT 1h` with `members` members in one slot;
//! * `{L}s`, a STATS key `PERIOD 1s KEEP 2000` (the most `KEEP` allows) with a value in
//!   each of its last `periods` periods;
//! * `{L}x`, a board `WINDOW 3s SLOT 1s` (`TALLY_LONG=1`: 30s, longer than its fill) with
//!   `members` members in one slot, which leaves the window a few seconds after the fault
//!   that fills it: the timer expires it while the other faults go on.
//!
//! Faults, in seeded random rounds: `writes` (increments of every object), `reads` (the
//! bounded reads below), `hdel` (a native HDEL of one of the counter's slot fields),
//! `quarantine` (a native HSET of one member in the board's slot hash), `rename` (an
//! object renamed away and back), `pexpire` (an object expires after 1-100 ms), `del`,
//! `expire-slot` (`{L}x` filled again), `flushall`.
//!
//! Checks after every fault: the server is alive; no command in `SLOWLOG` over 10 ms
//! and no timer tick over 10 ms (`tally_max_tick_us`), each plus the time the server
//! waited for a CPU meanwhile (as the main fuzzer allows SLOWLOG). After `del` of every object and after `flushall`,
//! `used_memory` comes back to within [`MEMORY_SLACK`] of what the empty server used at
//! the start.
//!
//! Left out of the 10 ms rule until they do bounded work (other changes are making them
//! so): every command on `{L}x` while its big slot expires (only the timer works on it,
//! and the timer is checked), and the reads of long windows (`TSCOUNTER.SUM` / `LIMIT`
//! of thousands of seconds, `STATS.GET` / `QUANTILE` of thousands of periods, `STATS.INFO`)
//! that find no cached answer: the `reads` fault asks short windows only. `TSCOUNTER.INFO`
//! is documented O(F) once a native edit put the counter's bookkeeping out of step with
//! its hash: it is not asked after `hdel` until the counter is created again. The
//! counter's other reads and the STATS reads run in every round, the first ones after
//! `hdel` or `rename` included (`scale_first_reads.rs` times those first reads alone).

use super::*;
use module_tests::info::info_i64;

/// How far `used_memory` may stay above the empty server's after everything is deleted:
/// the allocator's and the server's own bookkeeping move by a few MB.
const MEMORY_SLACK: i64 = 4 << 20;
/// Commands per pipeline while filling an object.
const FILL_PIPELINE: usize = 500;
/// Members per `TSRANK.INCRBY` while filling a board (~1 ms of work each).
const FILL_PAIRS: usize = 200;

struct Sizes {
    /// Seconds of the counter with events (three slots each).
    slots: usize,
    members: usize,
    periods: usize,
    rounds: usize,
    /// `{L}x`'s window: its slot must stay in it while the fill runs.
    expiring_window: &'static str,
}

fn sizes() -> Sizes {
    if long_run() {
        Sizes {
            slots: 3_300,
            members: 300_000,
            // Short of KEEP 2000: the oldest period stays in range while the fill runs.
            periods: 1_990,
            rounds: 80,
            expiring_window: "30s",
        }
    } else {
        Sizes {
            slots: 1_000,
            members: 5_000,
            periods: 500,
            rounds: 20,
            expiring_window: "3s",
        }
    }
}

const COUNTER: &str = "{L}c";
const BOARD: &str = "{L}b";
const STATS: &str = "{L}s";
const EXPIRING: &str = "{L}x";
const OBJECTS: [&str; 4] = [COUNTER, BOARD, STATS, EXPIRING];

struct Large<'a> {
    srv: &'a Server,
    conn: redis::Connection,
    sizes: Sizes,
    round: usize,
    trail: VecDeque<String>,
    wait_at_slowlog_reset: Option<u64>,
    /// `used_memory` of the empty server at the start.
    baseline: i64,
    /// The counter had a slot field deleted natively, or was renamed, since it was last
    /// created (`TSCOUNTER.INFO` is then O(F), and left out).
    counter_edited: bool,
    /// `tally_max_tick_us` at the last check.
    max_tick_seen: i64,
}

impl Large<'_> {
    fn fail(&self, problems: &[String]) -> ! {
        panic!(
            "{} large-object fuzz, seed {} (TALLY_FUZZ_SEED), round {}:\n  {}\n--- last faults ---\n  {}\n--- log tail ---\n{}",
            self.srv.kind().name,
            base_seed(),
            self.round,
            problems.join("\n  "),
            self.trail.iter().cloned().collect::<Vec<_>>().join("\n  "),
            self.srv.log_tail(30)
        );
    }

    fn note(&mut self, what: String) {
        if self.trail.len() >= TRAIL_FAULTS {
            self.trail.pop_front();
        }
        self.trail
            .push_back(format!("round {}: {what}", self.round));
    }

    /// Sends `cmds` in pipelines; any error reply fails the run (all these commands are
    /// valid on the objects they name).
    fn send(&mut self, cmds: &[Vec<String>]) {
        for chunk in cmds.chunks(FILL_PIPELINE) {
            let replies = pipeline(&mut self.conn, chunk);
            if replies.len() != chunk.len() {
                self.fail(&["connection lost".to_string()]);
            }
            for (c, r) in chunk.iter().zip(&replies) {
                if let Some(e) = error_text(r) {
                    self.fail(&[format!("{} -> (error) {e}", show(c))]);
                }
            }
        }
    }

    fn exists(&mut self, key: &str) -> bool {
        matches!(conn_value(&mut self.conn, &["EXISTS", key]), Value::Int(1))
    }

    fn fill_counter(&mut self) {
        let now = server_ms(self.srv);
        let mut cmds = vec![strings(&[
            "TSCOUNTER.CREATE",
            COUNTER,
            "RESOLUTIONS",
            "1000ms:3300",
            "1001ms:3300",
            "1003ms:3300",
        ])];
        for back in (0..self.sizes.slots as i64).rev() {
            let at = (now - back * 1000).to_string();
            cmds.push(strings(&["TSCOUNTER.INCRBY", COUNTER, "1", "AT", &at]));
        }
        self.send(&cmds);
    }

    fn fill_board(&mut self, key: &str, window: &str, slot: &str) {
        let now = server_ms(self.srv);
        let mut cmds = vec![strings(&[
            "TSRANK.CREATE",
            key,
            "WINDOW",
            window,
            "SLOT",
            slot,
        ])];
        for start in (0..self.sizes.members).step_by(FILL_PAIRS) {
            let mut cmd = strings(&["TSRANK.INCRBY", key]);
            for i in start..(start + FILL_PAIRS).min(self.sizes.members) {
                cmd.push((1 + i % 1000).to_string());
                cmd.push(format!("m{i}"));
            }
            cmd.push("AT".into());
            cmd.push(now.to_string());
            cmds.push(cmd);
        }
        self.send(&cmds);
    }

    fn fill_stats(&mut self) {
        let now = server_ms(self.srv);
        let mut cmds = vec![strings(&[
            "STATS.CREATE",
            STATS,
            "PERIOD",
            "1s",
            "KEEP",
            "2000",
        ])];
        for back in (0..self.sizes.periods as i64).rev() {
            let value = (1 + back % 1000).to_string();
            let at = (now - back * 1000).to_string();
            cmds.push(strings(&["STATS.ADD", STATS, &value, "AT", &at]));
        }
        self.send(&cmds);
    }

    /// Creates again the objects a fault removed (`{L}x` only when asked: its expiry is
    /// a fault of its own).
    fn refill(&mut self, with_expiring: bool) {
        if !self.exists(COUNTER) {
            self.fill_counter();
            self.counter_edited = false;
        }
        if !self.exists(BOARD) {
            self.fill_board(BOARD, "24h", "1h");
        }
        if !self.exists(STATS) {
            self.fill_stats();
        }
        if with_expiring && !self.exists(EXPIRING) {
            self.fill_board(EXPIRING, self.sizes.expiring_window, "1s");
        }
    }

    fn writes(&mut self, rng: &mut Rng) {
        let mut cmds = Vec::new();
        for _ in 0..50 {
            let m = format!("m{}", rng.below(self.sizes.members as i64));
            let v = (1 + rng.below(100)).to_string();
            cmds.push(strings(&["TSCOUNTER.INCRBY", COUNTER, &v]));
            cmds.push(strings(&["TSRANK.INCRBY", BOARD, &v, &m]));
            cmds.push(strings(&["STATS.ADD", STATS, &v]));
        }
        self.send(&cmds);
    }

    /// The reads that do bounded work today (see the module comment for those left out).
    fn reads(&mut self, rng: &mut Rng) {
        let m = format!("m{}", rng.below(self.sizes.members as i64));
        let mut cmds: Vec<Vec<&str>> = Vec::new();
        // The counter's reads, also right after a native HDEL or a RENAME (the first read
        // then finds no read cache). TSCOUNTER.INFO is O(F) by its documented complexity
        // once a native edit put the counter's bookkeeping out of step with its hash: it
        // is asked only until such a fault.
        cmds.push(vec!["TSCOUNTER.SUM", COUNTER, "10s", "1m"]);
        cmds.push(vec!["TSCOUNTER.LIMIT", COUNTER, "1", "10s", "1000000"]);
        if !self.counter_edited {
            cmds.push(vec!["TSCOUNTER.INFO", COUNTER]);
        }
        cmds.extend([
            vec!["TSRANK.TOP", BOARD, "10", "WITHSCORES"],
            vec!["TSRANK.SCORE", BOARD, &m],
            vec!["TSRANK.RANK", BOARD, &m],
            vec!["TSRANK.RANK", BOARD, &m, "TIES"],
            vec!["TSRANK.AROUND", BOARD, &m, "3", "WITHSCORES"],
            vec!["TSRANK.MSCORE", BOARD, &m, "m1"],
            vec!["TSRANK.INFO", BOARD],
            vec!["TSRANK.HISTORY", BOARD, &m],
        ]);
        cmds.extend([
            vec!["STATS.GET", STATS],
            vec!["STATS.GET", STATS, "WINDOW", "10s"],
            vec!["STATS.QUANTILE", STATS, "0.5", "0.99", "WINDOW", "10s"],
        ]);
        let cmds: Vec<Vec<String>> = cmds.iter().map(|c| strings(c)).collect();
        self.send(&cmds);
    }

    /// One random fault; returns its name.
    fn fault(&mut self, rng: &mut Rng) -> &'static str {
        const FAULTS: &[&str] = &[
            "writes",
            "writes",
            "reads",
            "reads",
            "hdel",
            "quarantine",
            "rename",
            "pexpire",
            "del",
            "expire-slot",
            "flushall",
        ];
        let fault = *rng.pick(FAULTS);
        let target = *rng.pick(&[COUNTER, BOARD, STATS]);
        // Each fault finds the objects there (a write would otherwise create one with the
        // default settings, a native HSET a stray slot hash).
        self.refill(false);
        match fault {
            "writes" => self.writes(rng),
            "reads" => self.reads(rng),
            "hdel" => {
                let field = conn_value(&mut self.conn, &["HRANDFIELD", COUNTER]);
                let field = value_text(&field).unwrap_or_default();
                if !field.is_empty() && !field.starts_with('_') {
                    self.counter_edited = true;
                    let r = conn_value(&mut self.conn, &["HDEL", COUNTER, &field]);
                    self.note(format!("HDEL {COUNTER} {field} -> {}", show_value(&r)));
                }
            }
            "quarantine" => {
                let slot = server_ms(self.srv) / 3_600_000;
                let part = format!("{BOARD}|slot|{slot}");
                let m = format!("m{}", rng.below(self.sizes.members as i64));
                let r = conn_value(&mut self.conn, &["HSET", &part, &m, "5000"]);
                self.note(format!("HSET {part} {m} 5000 -> {}", show_value(&r)));
            }
            "rename" => {
                if target == COUNTER {
                    self.counter_edited = true;
                }
                let away = format!("{target}.away");
                let a = conn_value(&mut self.conn, &["RENAME", target, &away]);
                let b = conn_value(&mut self.conn, &["RENAME", &away, target]);
                self.note(format!(
                    "RENAME {target} away and back -> {} {}",
                    show_value(&a),
                    show_value(&b)
                ));
                // A board's parts follow its main key within a second.
                std::thread::sleep(SETTLE);
            }
            "pexpire" => {
                let ms = (1 + rng.below(100)).to_string();
                let r = conn_value(&mut self.conn, &["PEXPIRE", target, &ms]);
                self.note(format!("PEXPIRE {target} {ms} -> {}", show_value(&r)));
                std::thread::sleep(SETTLE);
            }
            "del" => {
                let r = conn_value(&mut self.conn, &["DEL", target]);
                self.note(format!("DEL {target} -> {}", show_value(&r)));
            }
            "expire-slot" => {
                self.refill(true);
                let window = self.sizes.expiring_window;
                self.note(format!(
                    "{EXPIRING} filled: its slot leaves within {window}"
                ));
            }
            _ => {
                let r = conn_value(&mut self.conn, &["FLUSHALL"]);
                self.note(format!("FLUSHALL -> {}", show_value(&r)));
                self.check_memory_returns("FLUSHALL");
            }
        }
        fault
    }

    /// `used_memory` comes back to within [`MEMORY_SLACK`] of the empty server's (lazy
    /// frees and the schedule's retired entries are released in the background).
    fn check_memory_returns(&mut self, after: &str) {
        let mut used = 0;
        let back = wait_until(Duration::from_secs(15), || {
            used = info_i64(self.srv, "memory", "used_memory");
            used <= self.baseline + MEMORY_SLACK
        });
        if !back {
            let tally = self.srv.info("tally");
            let stats = format!("{:?}", conn_value(&mut self.conn, &["MEMORY", "STATS"]));
            self.fail(&[format!(
                "after {after}: used_memory {used}, {} above the empty server's {}; INFO tally {tally:?}; MEMORY STATS {stats}",
                used - self.baseline,
                self.baseline
            )]);
        }
        self.note(format!(
            "after {after}: used_memory {used} ({:+} from the start)",
            used - self.baseline
        ));
    }

    /// No command over 10 ms (beyond the time the server waited for a CPU) and no tick.
    fn check_latency(&mut self) {
        let mut problems = Vec::new();
        let waited_us = match (
            self.wait_at_slowlog_reset,
            run_queue_wait_ns(self.srv.pid()),
        ) {
            (Some(before), Some(now)) => now.saturating_sub(before) / 1000,
            _ => 0,
        };
        // A tick is timed by the wall clock too: the same allowance as SLOWLOG's. The
        // maximum is the server's since it started, so only a new one is looked at.
        let max_tick = info_i64(self.srv, "tally", "tally_max_tick_us");
        if max_tick > self.max_tick_seen
            && max_tick >= SERVER_STALL_LIMIT_US + i64::try_from(waited_us).unwrap_or(0)
        {
            problems.push(format!(
                "tally_max_tick_us is {max_tick} (limit {SERVER_STALL_LIMIT_US}; the server waited {waited_us} us for a CPU meanwhile)"
            ));
        }
        self.max_tick_seen = self.max_tick_seen.max(max_tick);
        if let Value::Array(entries) = conn_value(&mut self.conn, &["SLOWLOG", "GET", "128"]) {
            for e in &entries {
                let Value::Array(f) = e else { continue };
                let us = f.get(2).and_then(as_i64).unwrap_or(-1);
                let args: Vec<String> = match f.get(3) {
                    Some(Value::Array(a)) => a
                        .iter()
                        .map(|x| escape_bytes(&value_bytes(x).unwrap_or_default()))
                        .collect(),
                    _ => Vec::new(),
                };
                let preempted =
                    u64::try_from(us).is_ok_and(|us| us < SERVER_STALL_LIMIT_US as u64 + waited_us);
                // The test's own probes: Valkey 9 (built with the C library's allocator)
                // answers `INFO memory` in tens of ms with a big heap.
                let probe = args
                    .first()
                    .is_some_and(|c| ["INFO", "MEMORY"].contains(&c.to_uppercase().as_str()));
                if !preempted && !probe {
                    problems.push(format!(
                        "SLOWLOG: {} took {us} us (the server waited {waited_us} us for a CPU meanwhile)",
                        args.join(" ")
                    ));
                }
            }
        }
        conn_value(&mut self.conn, &["SLOWLOG", "RESET"]);
        self.wait_at_slowlog_reset = run_queue_wait_ns(self.srv.pid());
        if !self.srv.is_alive() {
            problems.push("the server is not alive".into());
        }
        if !problems.is_empty() {
            self.fail(&problems);
        }
    }
}

fn fuzz_large_objects(kind: &ServerKind) {
    let srv = Server::start(kind);
    let sizes = sizes();
    let seed = base_seed() ^ 0x1A46E ^ (kind.name.len() as u64) << 8;
    eprintln!(
        "large-object fuzz on {}: seed {seed}, {} rounds, {} counter seconds, {} members, {} periods",
        kind.name, sizes.rounds, sizes.slots, sizes.members, sizes.periods
    );
    for (k, v) in [
        ("slowlog-log-slower-than", "10000"),
        ("slowlog-max-len", "128"),
        // Freeing a native hash of 300k fields inside DEL, FLUSHALL or the server's own
        // expiry takes the server tens of ms whoever holds it: free in the background.
        ("lazyfree-lazy-user-del", "yes"),
        ("lazyfree-lazy-expire", "yes"),
        ("lazyfree-lazy-server-del", "yes"),
        ("lazyfree-lazy-user-flush", "yes"),
    ] {
        assert_eq!(
            srv.cmd_value(&["CONFIG", "SET", k, v]),
            v_ok(),
            "{}",
            kind.name
        );
    }
    // The empty server's memory, once tally has run its first commands and ticks.
    srv.cmd_value(&["TSCOUNTER.INCR", "warm"]);
    srv.cmd_value(&["DEL", "warm"]);
    std::thread::sleep(Duration::from_millis(300));
    let baseline = info_i64(&srv, "memory", "used_memory");
    let mut l = Large {
        srv: &srv,
        conn: srv.conn(),
        sizes,
        round: 0,
        trail: VecDeque::new(),
        wait_at_slowlog_reset: None,
        baseline,
        counter_edited: false,
        max_tick_seen: 0,
    };
    let mut rng = Rng(seed);
    let t0 = Instant::now();
    l.refill(true);
    l.note(format!("filled in {:?}", t0.elapsed()));
    conn_value(&mut l.conn, &["SLOWLOG", "RESET"]);
    l.wait_at_slowlog_reset = run_queue_wait_ns(srv.pid());
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for round in 1..=l.sizes.rounds {
        l.round = round;
        for _ in 0..1 + rng.below(3) {
            *counts.entry(l.fault(&mut rng)).or_default() += 1;
            l.check_latency();
        }
        l.refill(false);
        l.check_latency();
    }
    // Every object deleted: memory comes back too.
    for key in OBJECTS {
        conn_value(&mut l.conn, &["DEL", key]);
    }
    l.check_memory_returns("DEL of every object");
    l.check_latency();
    eprintln!(
        "large-object fuzz on {}: {} rounds in {:?}; faults {counts:?}",
        kind.name,
        l.sizes.rounds,
        t0.elapsed()
    );
    srv.assert_alive();
}

per_server!(one_kind_at_a_time: fuzz_large_objects);
