//! Seeded fault-mode fuzzing (issue 8): random tally traffic with faults in between, on
//! every server kind, one test per family.
//!
//! Workload: batches of pipelined writes and reads on 30 keys (+5 fresh names) of one
//! family, with `AT` timestamps up to 1.5 s in the past and small slots / periods
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
//!   garbled, a board whose `|meta` it garbled). A board whose `|meta` or slot was
//!   deleted, renamed away, expired or evicted is no excuse: a leaderboard is whole or
//!   consistent;
//! * `consistency`: every leaderboard the fuzzer did not edit field by field answers
//!   `TOP` with totals equal to the sum of its live slot counts (or is gone whole);
//! * `tracked`: `INFO tally` `tally_tracked_objects` minus `tally_expiry_backlog` is at
//!   most the live tally objects (see [`check_tracked`] for the exact bound);
//! * `latency`: `tally_max_tick_us` < 10 ms and no command in `SLOWLOG` (> 10 ms), both
//!   measured by the server; a second connection pinging every ~1 ms sees no PING over
//!   50 ms in a batch and a 99th percentile under 10 ms over the run (client-side,
//!   looser because the test machine is shared and the client thread gets preempted);
//! * `replica` (at the end): the replica ends equal to the primary (both databases).
//!
//! Seed: `TALLY_FUZZ_SEED` (printed). The seed fixes every random choice (keys,
//! commands, faults, sleeps); which slots exist when a fault picks one, and what expiry
//! did meanwhile, follow the clock, so a replay takes the same decisions in a slightly
//! different world. `TALLY_LONG=1` runs ten times more batches.

use module_tests::redis::ConnectionLike as _;
use module_tests::*;
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

// ================================================================ families

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Family {
    Counter,
    Rank,
    Stats,
}

impl Family {
    fn prefix(self) -> &'static str {
        match self {
            Family::Counter => "c",
            Family::Rank => "b",
            Family::Stats => "s",
        }
    }

    /// The object names of the family's pool: `c:0..c:29` and `c:new0..c:new4`.
    fn names(self) -> Vec<String> {
        let p = self.prefix();
        (0..POOL)
            .map(|i| format!("{p}:{i}"))
            .chain((0..FRESH).map(|i| format!("{p}:new{i}")))
            .collect()
    }

    /// A CREATE with small settings, or (one in ten) hour-long ones.
    fn create(self, rng: &mut Rng, key: &str) -> Vec<String> {
        let long_lived = rng.chance(10);
        match self {
            Family::Counter => {
                let mut v = vec!["TSCOUNTER.CREATE".into(), key.into(), "RESOLUTIONS".into()];
                if long_lived {
                    v.push("1m:10".into());
                } else {
                    const RES: &[&str] = &["50ms:20", "100ms:10", "200ms:5", "500ms:3", "1s:2"];
                    let first = rng.below(RES.len() as i64) as usize;
                    let n = 1 + rng.below(3) as usize;
                    v.extend((first..(first + n).min(RES.len())).map(|i| RES[i].to_string()));
                }
                v
            }
            Family::Rank => {
                let (window, slot) = if long_lived {
                    (3_600_000, 60_000)
                } else {
                    let slot = *rng.pick(&[50, 100, 200, 500]);
                    (slot * (1 + rng.below(8)), slot)
                };
                vec![
                    "TSRANK.CREATE".into(),
                    key.into(),
                    "WINDOW".into(),
                    window.to_string(),
                    "SLOT".into(),
                    slot.to_string(),
                ]
            }
            Family::Stats => {
                let (period, keep) = if long_lived {
                    (3_600_000, 3)
                } else {
                    (*rng.pick(&[100, 200, 500, 1000]), 1 + rng.below(5))
                };
                vec![
                    "STATS.CREATE".into(),
                    key.into(),
                    "PERIOD".into(),
                    period.to_string(),
                    "KEEP".into(),
                    keep.to_string(),
                ]
            }
        }
    }

    fn write(self, rng: &mut Rng, key: &str) -> Vec<String> {
        let mut v: Vec<String> = match self {
            Family::Counter if rng.chance(20) => vec![
                "TSCOUNTER.LIMIT".into(),
                key.into(),
                (rng.below(5) + 1).to_string(),
                "50ms".into(),
                (rng.below(50) + 10).to_string(),
            ],
            Family::Counter => vec![
                "TSCOUNTER.INCRBY".into(),
                key.into(),
                (rng.below(5) + 1).to_string(),
            ],
            Family::Rank => {
                let mut v = vec!["TSRANK.INCRBY".into(), key.into()];
                for _ in 0..1 + rng.below(3) {
                    v.push((1 + rng.below(4)).to_string());
                    v.push(format!("m{}", rng.below(10)));
                }
                v
            }
            Family::Stats => {
                let mut v = vec!["STATS.ADD".into(), key.into()];
                for _ in 0..1 + rng.below(3) {
                    v.push(format!("{:.3}", rng.lognormal()));
                }
                v
            }
        };
        if rng.chance(60) {
            v.push("AT".into());
            v.push((local_ms() - rng.below(1500)).to_string());
        }
        v
    }

    /// Read commands that always succeed on a valid object of the family (or a missing
    /// key): every error they answer is a defect.
    fn reads(self, key: &str) -> Vec<Vec<String>> {
        let c = |args: &[&str]| args.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        match self {
            Family::Counter => vec![c(&["TSCOUNTER.SUM", key, "1"]), c(&["TSCOUNTER.INFO", key])],
            Family::Rank => vec![
                c(&["TSRANK.TOP", key, "10", "WITHSCORES"]),
                c(&["TSRANK.SCORE", key, "m1"]),
                c(&["TSRANK.RANK", key, "m2"]),
                c(&["TSRANK.INFO", key]),
            ],
            Family::Stats => vec![
                c(&["STATS.GET", key]),
                c(&["STATS.QUANTILE", key, "0.5", "0.99"]),
                c(&["STATS.RANGE", key]),
                c(&["STATS.INFO", key]),
            ],
        }
    }

    fn one_command(self, rng: &mut Rng, names: &[String]) -> Vec<String> {
        let key = rng.pick(names).clone();
        match rng.below(100) {
            0..=9 => self.create(rng, &key),
            10..=64 => self.write(rng, &key),
            _ => {
                let reads = self.reads(&key);
                rng.pick(&reads).clone()
            }
        }
    }
}

/// The object a key belongs to: `b:3|slot|17` and `b:3|meta` belong to `b:3`.
fn owner(key: &str) -> &str {
    key.split('|').next().unwrap_or(key)
}

fn is_slot_hash(key: &str) -> bool {
    key.contains("|slot|")
}

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
    taint: [Taint; 2],
    /// Keys seen at the last check, per database (fault targets for derived keys).
    census: [Census; 2],
    work: redis::Connection,
    faults: redis::Connection,
    check: redis::Connection,
    pings: Arc<Mutex<Vec<Duration>>>,
    all_pings: Vec<Duration>,
    fault_counts: BTreeMap<&'static str, usize>,
}

const FAULTS: &[(&str, i64)] = &[
    ("hdel", 12),
    ("hset", 12),
    ("zadd", 8),
    ("pexpire", 10),
    ("del", 7),
    ("unlink", 4),
    ("rename", 10),
    ("evict", 4),
    ("pause", 5),
    ("pause-multi", 3),
    ("active-expire", 5),
    ("flushall", 1),
    ("swapdb", 3),
];

const GARBAGE: &[&str] = &[
    "garbage",
    "-1",
    "0",
    "9223372036854775807",
    "99999999999999999999",
    "1.5",
    "",
    "x\u{0}y",
    "counter 1s:zz",
    "rank 0 0 0 0",
    "stats 1h 0",
];

/// Picks the `ARGV[1]`-th field (modulo the count) of the hash `KEYS[1]` and deletes it
/// (`ARGV[2]` = `del`) or sets it to `ARGV[3]`; returns the field, or nil.
const EDIT_FIELD: &str = "local f = redis.call('HKEYS', KEYS[1]) \
    if #f == 0 then return false end \
    local name = f[(tonumber(ARGV[1]) % #f) + 1] \
    if ARGV[2] == 'del' then redis.call('HDEL', KEYS[1], name) \
    else redis.call('HSET', KEYS[1], name, ARGV[3]) end \
    return name";

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
        if self.trail.len() >= 16 {
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

    fn apply_fault(&mut self, rng: &mut Rng) {
        let total: i64 = FAULTS.iter().map(|f| f.1).sum();
        let name = loop {
            let mut r = rng.below(total);
            let name = FAULTS
                .iter()
                .find(|(_, w)| {
                    r -= w;
                    r < 0
                })
                .map_or("del", |f| f.0);
            if !self.skip.contains(name) {
                break name;
            }
        };
        *self.fault_counts.entry(name).or_insert(0) += 1;
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
        match name {
            "hdel" | "hset" => {
                let key = self.target(rng, true);
                let how = rng.below(4);
                let garbage = rng.pick(GARBAGE).to_string();
                let index = rng.below(1000).to_string();
                let new_field = format!("zz{}", rng.below(3));
                let op = if name == "hdel" { "del" } else { "set" };
                let edit = match how {
                    0 | 1 => {
                        let field = if how == 0 { "_tally" } else { "_state" };
                        if op == "del" {
                            s(&["HDEL", &key, field])
                        } else {
                            s(&["HSET", &key, field, &garbage])
                        }
                    }
                    2 => s(&["EVAL", EDIT_FIELD, "1", &key, &index, op, &garbage]),
                    _ => s(&["HSET", &key, &new_field, &garbage]),
                };
                let cmds = vec![
                    s(&["MULTI"]),
                    s(&["EXISTS", &key]),
                    edit.clone(),
                    s(&["EXEC"]),
                ];
                let out = self.run_faults(&cmds);
                let exec = out.last().cloned().unwrap_or(Value::Nil);
                self.note(format!(
                    "MULTI; EXISTS; {}; EXEC -> {}",
                    show(&edit),
                    show_value(&exec)
                ));
                if let Value::Array(r) = &exec {
                    let existed = r.first() == Some(&Value::Int(1));
                    let reply = r.get(1).cloned().unwrap_or(Value::Nil);
                    if error_text(&reply).is_none() && reply != Value::Nil {
                        let field = match how {
                            0 => "_tally".to_string(),
                            1 => "_state".to_string(),
                            2 => value_text(&reply).unwrap_or_default(),
                            _ => new_field,
                        };
                        let changed = !(op == "del" && reply == Value::Int(0));
                        if changed {
                            self.field_edit(&key, !existed, field == "_tally");
                        }
                    }
                }
            }
            "zadd" => {
                let derived = rng.chance(20);
                let key = self.target(rng, derived);
                let score = rng
                    .pick(&["1", "3", "0", "-2", "0.5", "1e300", "inf"])
                    .to_string();
                let member = format!("m{}", rng.below(11));
                let meta = format!("{}|meta", owner(&key));
                let cmds = vec![
                    s(&["MULTI"]),
                    s(&["EXISTS", &key]),
                    s(&["EXISTS", &meta]),
                    s(&["ZADD", &key, &score, &member]),
                    s(&["EXEC"]),
                ];
                let out = self.run_faults(&cmds);
                let exec = out.last().cloned().unwrap_or(Value::Nil);
                self.note(format!(
                    "ZADD {key} {score} {member} -> {}",
                    show_value(&exec)
                ));
                if let Value::Array(r) = &exec {
                    if r.len() == 3 && error_text(&r[2]).is_none() {
                        // A zset created where no board was is not a board.
                        let created = r[0] == Value::Int(0) && r[1] == Value::Int(0);
                        self.field_edit(&key, created || self.family != Family::Rank, false);
                    }
                }
            }
            "pexpire" | "del" | "unlink" => {
                let key = self.target(rng, true);
                let cmd = match name {
                    "pexpire" => s(&["PEXPIRE", &key, &(1 + rng.below(300)).to_string()]),
                    "del" => s(&["DEL", &key]),
                    _ => s(&["UNLINK", &key]),
                };
                let out = self.run_faults(std::slice::from_ref(&cmd));
                self.note(format!("{} -> {}", show(&cmd), show_value(&out[0])));
            }
            "rename" => {
                let src = self.target(rng, true);
                let other = rng.pick(&self.names).clone();
                let junk = format!("x:{}", rng.below(5));
                let to_junk = rng.chance(25);
                let dst = if src == owner(&src) {
                    other.clone()
                } else if to_junk {
                    junk
                } else if src.ends_with("|meta") {
                    format!("{other}|meta")
                } else {
                    format!("{other}{}", &src[owner(&src).len()..])
                };
                let cmd = s(&["RENAME", &src, &dst]);
                let out = self.run_faults(std::slice::from_ref(&cmd));
                self.note(format!("{} -> {}", show(&cmd), show_value(&out[0])));
                if out[0] == v_ok() && src != dst {
                    let (s_obj, d_obj) = (owner(&src).to_string(), owner(&dst).to_string());
                    if src == s_obj {
                        // The whole object moves, with what the fuzzer did to it.
                        let t = &mut self.taint[0];
                        for set in [&mut t.not_tally, &mut t.edited] {
                            let had = set.remove(&s_obj);
                            set.remove(&d_obj);
                            if had {
                                set.insert(d_obj.clone());
                            }
                        }
                    } else if self.names.contains(&d_obj) {
                        // A part of one board lands in another one.
                        let garbled_meta =
                            dst.ends_with("|meta") && self.taint[0].not_tally.contains(&s_obj);
                        self.field_edit(&dst, false, garbled_meta);
                    }
                }
            }
            "evict" => {
                // A limit a little above what is used, then a few more filler bytes than
                // that: each filler beyond the limit evicts about its size in random keys
                // (fillers and tally keys alike). Fillers go a few at a time: a big
                // pipeline's query buffer would itself count as used memory.
                // The margin covers the 16 KB query buffer Redis allocates when an idle
                // connection sends its next command.
                let extra = 40_960 + rng.below(4) * 8_192;
                let over = 8 + rng.below(40);
                // Twice: the first INFO on a connection grows its buffers by tens of KB,
                // which would put the server over the limit at once (evicting every key).
                info_field_i64(&mut self.faults, "memory", "used_memory");
                let used = info_field_i64(&mut self.faults, "memory", "used_memory").unwrap_or(0);
                let limit = (used + extra).to_string();
                self.run_faults(&[
                    s(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]),
                    s(&["CONFIG", "SET", "maxmemory", &limit]),
                ]);
                let fillers: Vec<String> = (0..extra / 500 + over)
                    .map(|i| format!("fill:{i}"))
                    .collect();
                let value = "f".repeat(500);
                let mut refused = 0;
                for chunk in fillers.chunks(4) {
                    let cmds: Vec<Vec<String>> =
                        chunk.iter().map(|f| s(&["SET", f, &value])).collect();
                    refused += self
                        .run_faults(&cmds)
                        .iter()
                        .filter(|v| error_text(v).is_some())
                        .count();
                }
                let mut del = vec!["DEL".to_string()];
                del.extend(fillers.iter().cloned());
                self.run_faults(&[
                    s(&["CONFIG", "SET", "maxmemory", "0"]),
                    s(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]),
                    del,
                ]);
                let evicted =
                    info_field_i64(&mut self.faults, "stats", "evicted_keys").unwrap_or(-1);
                self.note(format!(
                    "eviction: maxmemory {limit} (used_memory + {extra}), allkeys-random, {} filler SETs of 500 B ({refused} refused), reset; evicted_keys now {evicted}",
                    fillers.len()
                ));
            }
            "pause" => {
                let ms = (50 + rng.below(251)).to_string();
                let cmd = s(&["CLIENT", "PAUSE", &ms, "WRITE"]);
                let out = self.run_faults(std::slice::from_ref(&cmd));
                self.note(format!("{} -> {}", show(&cmd), show_value(&out[0])));
            }
            "pause-multi" => {
                // Prefer a key that exists: deleting a live object is the dangerous case.
                let live: Vec<String> = self
                    .names
                    .iter()
                    .filter(|n| self.census[0].contains_key(n.as_bytes()))
                    .cloned()
                    .collect();
                let pick = rng.below(1 << 20) as usize;
                let fallback = rng.pick(&self.names).clone();
                let key = if live.is_empty() {
                    fallback
                } else {
                    live[pick % live.len()].clone()
                };
                let cmds = vec![
                    s(&["MULTI"]),
                    s(&["DEL", &key]),
                    s(&["CLIENT", "PAUSE", "300", "WRITE"]),
                    s(&["EXEC"]),
                ];
                let out = self.run_faults(&cmds);
                self.note(format!(
                    "MULTI; DEL {key}; CLIENT PAUSE 300 WRITE; EXEC -> {}",
                    show_value(out.last().unwrap_or(&Value::Nil))
                ));
            }
            "active-expire" => {
                let on = if rng.chance(50) { "1" } else { "0" };
                let cmd = s(&["DEBUG", "SET-ACTIVE-EXPIRE", on]);
                let out = self.run_faults(std::slice::from_ref(&cmd));
                self.note(format!("{} -> {}", show(&cmd), show_value(&out[0])));
            }
            "flushall" => {
                let out = self.run_faults(&[s(&["FLUSHALL"])]);
                self.note(format!("FLUSHALL -> {}", show_value(&out[0])));
                self.taint = Default::default();
                self.census = Default::default();
            }
            _ => {
                let out = self.run_faults(&[s(&["SWAPDB", "0", "1"])]);
                self.note(format!("SWAPDB 0 1 -> {}", show_value(&out[0])));
                if out[0] == v_ok() {
                    self.taint.swap(0, 1);
                    self.census.swap(0, 1);
                }
            }
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

    // ------------------------------------------------------------ checks

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
        }
        redis::cmd("SELECT").arg(0).exec(&mut self.check).ok();
    }

    fn check_reads(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        for db in 0..2usize {
            redis::cmd("SELECT").arg(db).exec(&mut self.check).ok();
            let mut cmds: Vec<Vec<String>> = Vec::new();
            for name in &self.names {
                if !self.taint[db].not_tally.contains(name) {
                    cmds.extend(self.family.reads(name));
                }
            }
            let out = pipeline(&mut self.check, &cmds);
            for (c, r) in cmds.iter().zip(&out) {
                if error_text(r).is_some() {
                    let kind = self.census[db]
                        .get(c[1].as_bytes())
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

    fn check_latency(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        let max_tick = info_field_i64(&mut self.check, "tally", "tally_max_tick_us").unwrap_or(-1);
        if max_tick >= SERVER_STALL_LIMIT_US {
            problems.push(format!(
                "tally_max_tick_us is {max_tick} (limit {SERVER_STALL_LIMIT_US})"
            ));
        }
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
                    // The replica's (re)sync forks for a snapshot: not tally's time.
                    let replication = args
                        .first()
                        .is_some_and(|c| ["PSYNC", "SYNC"].contains(&c.to_uppercase().as_str()));
                    if !replication {
                        problems.push(format!("SLOWLOG: {} took {us} us", args.join(" ")));
                    }
                }
            }
        }
        redis::cmd("SLOWLOG")
            .arg("RESET")
            .exec(&mut self.check)
            .ok();
        // Client-side: the maximum per batch, the 99th percentile over the whole run so
        // far (a batch may hold only a handful of pings, whose "p99" is their maximum).
        let samples = std::mem::take(&mut *self.pings.lock().unwrap_or_else(|e| e.into_inner()));
        if let Some(max) = samples.iter().max() {
            if *max >= CLIENT_MAX_LIMIT {
                problems.push(format!(
                    "PING took {max:?} (limit {CLIENT_MAX_LIMIT:?}) among {} pings of this batch",
                    samples.len()
                ));
            }
        }
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

    fn check(&mut self, workload_problems: Vec<String>) {
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

// ================================================================== driver

/// Pings `srv` on its own connection about every millisecond until `stop`, recording
/// each round trip.
fn spawn_pinger(
    srv: &Server,
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<Duration>>>,
) -> std::thread::JoinHandle<()> {
    let mut conn = srv.conn();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            if redis::cmd("PING").query::<String>(&mut conn).is_err() {
                return; // the server died: the main thread reports it
            }
            let took = t.elapsed();
            samples.lock().unwrap_or_else(|e| e.into_inner()).push(took);
            std::thread::sleep(Duration::from_millis(1));
        }
    })
}

fn fuzz_faults(kind: &ServerKind, family: Family) {
    let batches = if long_run() { 1500 } else { 150 };
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
        taint: Default::default(),
        census: Default::default(),
        work: srv.conn(),
        faults: srv.conn(),
        check: srv.conn(),
        pings,
        all_pings: Vec::new(),
        fault_counts: BTreeMap::new(),
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
    if !f.skip.contains("replica") {
        if let Err(difference) = compare_replica(&srv, &replica) {
            f.fail(&[format!("at the end: {difference}")]);
        }
    }
    srv.assert_alive();
    replica.assert_alive();
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
