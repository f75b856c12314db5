//! Seeded fault-mode fuzzing: random tally traffic with faults in between, on
//! every server kind, one test per family.
//!
//! Workload: batches of pipelined writes and reads on 30 keys (+5 fresh names) of one
//! family (counter, rank, stats, throttle; `fault_fuzz_covers_every_command` checks that
//! together they run every command of the module's table), with `AT` timestamps up to 1.5 s in the past and small slots / periods
//! (50 ms .. 1 s, so expiry happens during the test; one object in ten gets hour-long
//! settings, so a schedule entry that leaks stays visible).
//!
//! Faults between batches (names for `TALLY_FUZZ_SKIP`): `hdel`, `hset` (bookkeeping
//! fields, real fields picked by a script, new fields; garbage values), `zadd`,
//! `pexpire` (1..300 ms), `del`, `unlink`, `rename` (between the family's keys, onto
//! fresh names, a board's `|meta` / `|slot|<n>` onto another board's), `evict`
//! (`maxmemory` a little above `used_memory` with `allkeys-random`, filler writes,
//! reset), `pause` (`CLIENT PAUSE <ms> WRITE`), `pause-multi` (`MULTI`, `DEL key`,
//! `CLIENT PAUSE 300 WRITE`, `EXEC`), `active-expire` (`DEBUG SET-ACTIVE-EXPIRE 0|1`),
//! `flushall`, `swapdb` (`SWAPDB 0 1`; a second one swaps back). Leaderboard faults hit
//! the main key and the derived keys alike.
//!
//! Checks after every batch (names for `TALLY_FUZZ_SKIP`, for exploring past a known
//! failure; the default runs everything):
//! * alive: the primary and the replica attached for the whole run answer `PING`, and
//!   neither log has a crash report or a panic;
//! * `reads`: every read command of the family on every key of the pool, in both
//!   databases, answers without an error, unless the fuzzer itself made the key a non-
//!   tally value (another type, a hash it created or whose `_tally` it removed or
//!   garbled, a board whose `|meta` it garbled), or answers the documented overflow
//!   error of a sum on an object the fuzzer wrote `i64::MAX` into. A board whose `|meta`
//!   or slot was deleted, renamed away, expired or evicted is no excuse: a leaderboard is
//!   whole or consistent;
//! * `consistency`: every leaderboard the fuzzer did not edit field by field answers
//!   `TOP` with totals equal to the sum of its live slot counts (or is gone whole);
//! * `tracked`: `INFO tally` `tally_tracked_objects` minus `tally_expiry_backlog` is at
//!   most the live tally objects (see [`check_tracked`] for the exact bound);
//! * `latency`: `tally_max_tick_us` < 10 ms and no command in `SLOWLOG` over 10 ms plus
//!   the time the server waited for a CPU during the batch (the kernel's run-queue wait of
//!   its main thread: a command's wall time includes being descheduled), both measured by
//!   the server; a second connection pinging every ~1 ms sees no PING over
//!   50 ms in a batch and a 99th percentile under 10 ms over the run, each less the time
//!   the server and the pinging thread waited for a CPU meanwhile (client-side, looser:
//!   a round trip also holds the client's own work);
//! * `replica` (at the end): the replica ends equal to the primary (both databases).
//!
//! Seed: `TALLY_FUZZ_SEED` (printed). The seed fixes every random choice (keys,
//! commands, faults, sleeps); which slots exist when a fault picks one, and what expiry
//! did meanwhile, follow the clock, so a replay takes the same decisions in a slightly
//! different world. `make test` runs 100 batches per family and server, `TALLY_LONG=1` 1500.
//!
//! Files: `family.rs` (the families' commands), `faults.rs`, `checks.rs`; this file holds
//! the settings, the fuzzer's state and the driver. `large.rs`: the large-object mode
//! (faults on objects of hundreds of thousands of members, slots or periods; the bounded-
//! work rule and memory coming back after deletes and `FLUSHALL`).

use module_tests::redis::ConnectionLike as _;
use module_tests::*;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod checks;
mod family;
mod faults;
mod large;

use family::{commands_run, is_slot_hash, owner, Family};

// ================================================================ settings

fn base_seed() -> u64 {
    std::env::var("TALLY_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xFA_0178)
}

/// Fault and check names listed in `TALLY_FUZZ_SKIP` (comma separated) are left out.
fn skipped() -> HashSet<String> {
    std::env::var("TALLY_FUZZ_SKIP")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

const POOL: usize = 30;
const FRESH: usize = 5;
const BATCH_COMMANDS: usize = 120;
/// The server's own limit for one command or timer tick (SPEC "Bounded work").
const SERVER_STALL_LIMIT_US: i64 = 10_000;
const CLIENT_P99_LIMIT: Duration = Duration::from_millis(10);
const CLIENT_MAX_LIMIT: Duration = Duration::from_millis(50);
/// DEL / RENAME / EXPIRE of a board reach its derived keys "within a second" (SPEC).
const SETTLE: Duration = Duration::from_secs(1);
const INTERNAL: &str = "ERR internal error in tally";
/// Faults a failure message lists (the latest).
const TRAIL_FAULTS: usize = 60;

// ================================================================ state

/// What the fuzzer itself did to the objects of one database.
#[derive(Default, Clone, Debug)]
struct Taint {
    /// Objects the fuzzer turned into something that is not a tally object of the family
    /// (another type, a hash it created, `_tally` removed or garbled, a garbled board
    /// meta): reads may answer WRONGTYPE.
    not_tally: BTreeSet<String>,
    /// Leaderboards whose parts the fuzzer edited field by field (HSET / HDEL / ZADD, a
    /// part renamed onto them): totals need not match the slots any more.
    edited: BTreeSet<String>,
    /// Objects into one of whose fields the fuzzer wrote `i64::MAX`: a sum over that count
    /// and any other (or over the key twice, as the MSUM read does) passes a signed 64-bit
    /// integer, and the documented answer is `ERR increment or decrement would overflow`.
    overflowing: BTreeSet<String>,
}

type Census = BTreeMap<Vec<u8>, KeyKind>;

struct Fuzz<'a> {
    srv: &'a Server,
    replica: &'a Server,
    family: Family,
    seed: u64,
    skip: HashSet<String>,
    names: Vec<String>,
    batch: usize,
    /// The last faults applied, with their replies, for failure messages.
    trail: VecDeque<String>,
    /// When the fuzzer last deleted, renamed away or put a TTL on an object's main key
    /// (db 0): on Redis 7.0 its parts follow from a 1 ms timer, so for a moment the old
    /// meta is still there although the board is gone.
    main_key_left: HashMap<String, Instant>,
    taint: [Taint; 2],
    /// Keys seen at the last check, per database (fault targets for derived keys).
    census: [Census; 2],
    work: redis::Connection,
    faults: redis::Connection,
    check: redis::Connection,
    pings: Arc<Mutex<Vec<Duration>>>,
    all_pings: Vec<Duration>,
    fault_counts: BTreeMap<&'static str, usize>,
    /// The time the primary lost to other work, counted from its SLOWLOG's last reset
    /// (see `check_latency`).
    lost_at_slowlog_reset: Option<Lost>,
    /// The largest `tally_max_tick_us` checked so far.
    max_tick_seen: i64,
}

fn show(args: &[String]) -> String {
    args.iter()
        .map(|a| escape_bytes(a.as_bytes()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn show_value(v: &Value) -> String {
    match v {
        Value::ServerError(_) => format!("(error) {}", error_text(v).unwrap_or_default()),
        other => {
            let s = format!("{other:?}");
            s.chars().take(300).collect()
        }
    }
}

fn as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        other => value_text(other)?.parse().ok(),
    }
}

impl<'a> Fuzz<'a> {
    fn header(&self) -> String {
        format!(
            "{} {:?} fault fuzz, seed {} (TALLY_FUZZ_SEED={}), batch {}",
            self.srv.kind().name,
            self.family,
            self.seed,
            base_seed(),
            self.batch
        )
    }

    fn fail(&self, problems: &[String]) -> ! {
        let trail: Vec<&String> = self.trail.iter().collect();
        // A crash report is long (memory test, INFO): show its key lines, not the tail.
        std::thread::sleep(Duration::from_millis(200));
        let log = std::fs::read_to_string(self.srv.log_path()).unwrap_or_default();
        let crash: Vec<&str> = log
            .lines()
            .filter(|l| {
                l.contains("ASSERTION")
                    || l.contains("==>")
                    || l.contains("crashed")
                    || l.contains("panicked")
                    || l.contains("(propagatePendingCommands")
                    || l.contains("(moduleTimerHandler")
            })
            .take(8)
            .collect();
        panic!(
            "{}: {} problem(s):\n  {}\n--- last faults (oldest first) ---\n  {}\n--- crash report lines ---\n{}\n--- primary log tail ---\n{}",
            self.header(),
            problems.len(),
            problems
                .iter()
                .take(12)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n  "),
            trail
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n  "),
            crash.join("\n"),
            self.srv.log_tail(30)
        );
    }

    fn note(&mut self, what: String) {
        // Enough to see what happened to an object several batches before a failure.
        if self.trail.len() >= TRAIL_FAULTS {
            self.trail.pop_front();
        }
        self.trail
            .push_back(format!("batch {}: {what}", self.batch));
    }

    /// Runs commands on the fault connection, as one pipeline; a lost connection fails
    /// the run with the log tail (that is how a crash inside a fault shows).
    fn run_faults(&mut self, cmds: &[Vec<String>]) -> Vec<Value> {
        let mut pipe = redis::pipe();
        for c in cmds {
            let mut cmd = redis::Cmd::new();
            for a in c {
                cmd.arg(a.as_bytes());
            }
            pipe.add_command(cmd);
        }
        match self
            .faults
            .req_packed_commands(&pipe.get_packed_pipeline(), 0, cmds.len())
        {
            Ok(v) => v,
            Err(e) => {
                let shown: Vec<String> = cmds.iter().map(|c| show(c)).collect();
                self.note(format!("{} -> connection error {e}", shown.join("; ")));
                self.fail(&[format!(
                    "connection lost while applying a fault (server alive: {})",
                    self.srv.process_running()
                )]);
            }
        }
    }

    /// A fault target: an object's main key or (leaderboards) one of its derived keys.
    fn target(&mut self, rng: &mut Rng, derived: bool) -> String {
        let obj = rng.pick(&self.names).clone();
        let part = rng.below(10);
        let pick = rng.below(1 << 20) as usize;
        if self.family != Family::Rank || !derived || part < 4 {
            return obj;
        }
        if part < 6 {
            return format!("{obj}|meta");
        }
        let prefix = format!("{obj}|slot|");
        let slots: Vec<String> = self.census[0]
            .keys()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .filter(|k| k.starts_with(&prefix))
            .collect();
        if slots.is_empty() {
            format!("{prefix}0")
        } else {
            slots[pick % slots.len()].clone()
        }
    }

    /// A key edit at field level: the owner is `edited` (leaderboards), and becomes
    /// `not_tally` when the edit created the key or removed / garbled `_tally`.
    fn field_edit(&mut self, key: &str, created: bool, tally_field_touched: bool) {
        let obj = owner(key).to_string();
        let main_or_meta = !is_slot_hash(key);
        if main_or_meta && (created || tally_field_touched) {
            self.taint[0].not_tally.insert(obj.clone());
        }
        if self.family == Family::Rank {
            self.taint[0].edited.insert(obj);
        }
    }

    fn run_workload(&mut self, rng: &mut Rng) -> Vec<String> {
        let cmds: Vec<Vec<String>> = (0..BATCH_COMMANDS)
            .map(|_| self.family.one_command(rng, &self.names))
            .collect();
        let mut pipe = redis::pipe();
        for c in &cmds {
            let mut cmd = redis::Cmd::new();
            for a in c {
                cmd.arg(a.as_bytes());
            }
            pipe.add_command(cmd);
        }
        let out = match self
            .work
            .req_packed_commands(&pipe.get_packed_pipeline(), 0, cmds.len())
        {
            Ok(v) => v,
            Err(e) => self.fail(&[format!(
                "workload connection lost: {e} (server alive: {})",
                self.srv.process_running()
            )]),
        };
        cmds.iter()
            .zip(&out)
            .filter(|(_, r)| error_text(r).is_some_and(|e| e.starts_with(INTERNAL)))
            .map(|(c, r)| format!("workload {} -> {}", show(c), show_value(r)))
            .collect()
    }
}

// ================================================================== driver

/// Pings `srv` on its own connection about every millisecond until `stop`, recording
/// each round trip less the time the machine took from the server and from this thread
/// meanwhile (see [`Lost`]).
fn spawn_pinger(
    srv: &Server,
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<Duration>>>,
) -> std::thread::JoinHandle<()> {
    let mut conn = srv.conn();
    let pid = srv.pid();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let lost = Lost::start_pid(pid);
            let t = Instant::now();
            if redis::cmd("PING").query::<String>(&mut conn).is_err() {
                return; // the server died: the main thread reports it
            }
            let took = t
                .elapsed()
                .saturating_sub(Duration::from_micros(u64::try_from(lost.us()).unwrap_or(0)));
            samples.lock().unwrap_or_else(|e| e.into_inner()).push(took);
            std::thread::sleep(Duration::from_millis(1));
        }
    })
}

fn fuzz_faults(kind: &ServerKind, family: Family) {
    let batches = if long_run() { 1500 } else { 100 };
    let seed = base_seed() ^ ((family as u64 + 1) << 16) ^ (kind.name.len() as u64) << 8;
    eprintln!(
        "fault fuzz {family:?} on {}: seed {seed} (TALLY_FUZZ_SEED={}), {batches} batches",
        kind.name,
        base_seed()
    );
    let srv = Server::start(kind);
    let replica = Server::start(kind);
    replica.replicate_from(&srv);
    wait_replica_synced(&srv, &replica);
    for (k, v) in [
        ("slowlog-log-slower-than", "10000"),
        ("slowlog-max-len", "128"),
        // The server's own record of what held it outside commands (expiry, eviction,
        // fork, AOF writes), printed with a slow PING.
        ("latency-monitor-threshold", "10"),
        // The replication backlog counts as used memory until it is full: a big one
        // grows with every filler write and eviction DEL, and the "little above
        // used_memory" limit then evicts every key. A small one is full at once.
        ("repl-backlog-size", "16384"),
    ] {
        assert_eq!(
            srv.cmd_value(&["CONFIG", "SET", k, v]),
            v_ok(),
            "{}",
            kind.name
        );
    }
    assert_eq!(
        srv.cmd_value(&["SLOWLOG", "RESET"]),
        v_ok(),
        "{}",
        kind.name
    );
    let stop = Arc::new(AtomicBool::new(false));
    let pings = Arc::new(Mutex::new(Vec::new()));
    let pinger = spawn_pinger(&srv, Arc::clone(&stop), Arc::clone(&pings));
    let mut f = Fuzz {
        srv: &srv,
        replica: &replica,
        family,
        seed,
        skip: skipped(),
        names: family.names(),
        batch: 0,
        trail: VecDeque::new(),
        main_key_left: HashMap::new(),
        taint: Default::default(),
        census: Default::default(),
        work: srv.conn(),
        faults: srv.conn(),
        check: srv.conn(),
        pings,
        all_pings: Vec::new(),
        fault_counts: BTreeMap::new(),
        lost_at_slowlog_reset: Some(Lost::start(&srv)),
        max_tick_seen: 0,
    };
    let mut rng = Rng(seed);
    let t0 = Instant::now();
    for batch in 1..=batches {
        f.batch = batch;
        let internal = f.run_workload(&mut rng);
        for _ in 0..1 + rng.below(4) {
            f.apply_fault(&mut rng);
        }
        f.check(internal);
        std::thread::sleep(Duration::from_millis(rng.below(250) as u64));
    }
    eprintln!(
        "fault fuzz {family:?} on {}: {batches} batches in {:?}; faults {:?}",
        kind.name,
        t0.elapsed(),
        f.fault_counts
    );
    stop.store(true, Ordering::Relaxed);
    let _ = pinger.join();
    // The end: every fault undone, then the replica must hold the primary's data.
    for c in [
        vec!["DEBUG", "SET-ACTIVE-EXPIRE", "1"],
        vec!["CONFIG", "SET", "maxmemory", "0"],
    ] {
        assert_eq!(srv.cmd_value(&c), v_ok(), "{}", kind.name);
    }
    // Let every TTL the faults set (at most 300 ms) run out first: a key expiring between
    // the primary's dump and the replica's would look like a difference (a replica hides
    // a logically expired key before the primary's DEL arrives).
    std::thread::sleep(Duration::from_millis(400));
    if !f.skip.contains("replica") {
        if let Err(difference) = compare_replica(&srv, &replica) {
            f.fail(&[format!("at the end: {difference}")]);
        }
    }
    srv.assert_alive();
    replica.assert_alive();
}

per_server!(fault_fuzz_covers_every_command);
/// The families' workloads together run every command of the module's table.
fn fault_fuzz_covers_every_command(kind: &ServerKind) {
    let srv = Server::start(kind);
    assert_cases_cover(
        &srv,
        "fuzz_faults/family.rs (Family::ALL: create, write, reads)",
        &tally_command_names(&srv),
        Family::ALL.into_iter().flat_map(commands_run),
    );
}

per_server!(fuzz_faults_counter);
fn fuzz_faults_counter(kind: &ServerKind) {
    fuzz_faults(kind, Family::Counter);
}

per_server!(fuzz_faults_rank);
fn fuzz_faults_rank(kind: &ServerKind) {
    fuzz_faults(kind, Family::Rank);
}

per_server!(fuzz_faults_stats);
fn fuzz_faults_stats(kind: &ServerKind) {
    fuzz_faults(kind, Family::Stats);
}

per_server!(fuzz_faults_throttle);
fn fuzz_faults_throttle(kind: &ServerKind) {
    fuzz_faults(kind, Family::Throttle);
}
