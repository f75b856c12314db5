//! Latency bounds measured where the contract makes them, less the time the machine took
//! away for other work.
//!
//! The contract bounds what tally makes the server do: no command and no timer tick holds
//! it for 10 ms, a PING answers while a large slot expires. The server's own figures
//! (`SLOWLOG`, `tally_max_tick_us`, a PING's round trip) are wall time, and wall time runs
//! on while the kernel has the server (or the test) waiting for a CPU, which the suite's
//! other servers, a build or a second job on a 2-core machine cause, or while the
//! hypervisor runs something else. [`Lost`] reads those waits from the kernel
//! (`/proc/<pid>/task/<pid>/schedstat`, `/proc/thread-self/schedstat` and the steal
//! column of `/proc/stat`), and every bound here allows exactly them on top, so a bound
//! still fails on tally's own work and never on the machine's.

use crate::{escape_bytes, info_i64, v_ok, value_bytes, Server, Value};
use std::time::{Duration, Instant};

/// What a command, a tick or a PING's wait may hold the server for.
pub const STALL_LIMIT_US: i64 = 10_000;

/// The time the main thread of process `pid` waited for a CPU so far (ns), from the
/// kernel's scheduler statistics; `None` where the file is missing.
pub fn run_queue_wait_ns(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/schedstat")).ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

/// The time the calling thread waited for a CPU so far (ns); `None` where unknown.
fn own_run_queue_wait_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

/// CPU time the hypervisor took from this machine so far, all CPUs together (µs), from
/// `/proc/stat` (in 1/100 s); 0 where unknown.
pub fn steal_us() -> i64 {
    let Ok(text) = std::fs::read_to_string("/proc/stat") else {
        return 0;
    };
    let ticks: i64 = text
        .lines()
        .next()
        .and_then(|cpu| cpu.split_whitespace().nth(8))
        .and_then(|steal| steal.parse().ok())
        .unwrap_or(0);
    ticks * 10_000
}

/// The waits of a server process and of the calling thread, from a starting point on.
#[derive(Clone, Copy, Debug)]
pub struct Lost {
    pid: u32,
    server_ns: Option<u64>,
    own_ns: Option<u64>,
    steal_us: i64,
}

impl Lost {
    /// Starts counting the time the machine takes from `srv` and from this thread.
    pub fn start(srv: &Server) -> Lost {
        Lost::start_pid(srv.pid())
    }

    /// [`Lost::start`] for a server known by its process id.
    pub fn start_pid(pid: u32) -> Lost {
        Lost {
            pid,
            server_ns: run_queue_wait_ns(pid),
            own_ns: own_run_queue_wait_ns(),
            steal_us: steal_us(),
        }
    }

    /// Microseconds lost since the start: the server's wait for a CPU, this thread's
    /// (it times the server from outside) and the hypervisor's steal.
    pub fn us(&self) -> i64 {
        let since = |before: Option<u64>, now: Option<u64>| match (before, now) {
            (Some(before), Some(now)) => {
                i64::try_from(now.saturating_sub(before) / 1000).unwrap_or(0)
            }
            _ => 0,
        };
        since(self.server_ns, run_queue_wait_ns(self.pid))
            + since(self.own_ns, own_run_queue_wait_ns())
            + (steal_us() - self.steal_us).max(0)
    }

    /// Microseconds the server alone lost since the start (its wait and the steal): the
    /// allowance on the server's own wall-time figures (SLOWLOG, ticks).
    pub fn server_us(&self) -> i64 {
        let waited = match (self.server_ns, run_queue_wait_ns(self.pid)) {
            (Some(before), Some(now)) => {
                i64::try_from(now.saturating_sub(before) / 1000).unwrap_or(0)
            }
            _ => 0,
        };
        waited + (steal_us() - self.steal_us).max(0)
    }
}

/// One PING's round trip on `conn`, less the time the machine took from the server and
/// from this thread meanwhile: how long the server kept the PING waiting by its own work.
pub fn ping_held(srv: &Server, conn: &mut redis::Connection) -> Duration {
    let lost = Lost::start(srv);
    let started = Instant::now();
    let _: String = redis::cmd("PING").query(conn).expect("PING");
    let took = started.elapsed();
    took.saturating_sub(Duration::from_micros(u64::try_from(lost.us()).unwrap_or(0)))
}

/// The longest of `n` [`ping_held`] on a connection of its own.
pub fn max_ping_held(srv: &Server, n: usize) -> Duration {
    let mut conn = srv.conn();
    (0..n)
        .map(|_| ping_held(srv, &mut conn))
        .max()
        .unwrap_or_default()
}

/// The server's own `INFO` sections: an `INFO` of these alone runs no tally code. (Valkey
/// 9's `INFO memory` took 11 to 789 ms while a `FLUSHALL ASYNC` of 1.9M plain hashes was
/// freed, with no module loaded: the allocator's statistics wait for the freeing thread.)
const SERVER_INFO_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "commandstats",
    "latencystats",
    "errorstats",
    "cluster",
    "keyspace",
    "keysizes",
];

/// The `SLOWLOG` entries (command words and microseconds) of tally's commands, of `INFO`
/// (tally adds to its reply) and of the flushes (tally forgets its objects in them); not
/// of an `INFO` of server sections only ([`SERVER_INFO_SECTIONS`]).
pub fn slow_tally_entries(srv: &Server) -> Vec<(String, i64)> {
    slow_entries(srv, true)
}

/// [`slow_tally_entries`], with or without `INFO`.
fn slow_entries(srv: &Server, info: bool) -> Vec<(String, i64)> {
    let Value::Array(entries) = srv.cmd_value(&["SLOWLOG", "GET", "1000"]) else {
        panic!("SLOWLOG GET did not answer an array");
    };
    let mut slow = Vec::new();
    for entry in entries {
        let Value::Array(fields) = entry else {
            continue;
        };
        let us = match fields.get(2) {
            Some(Value::Int(us)) => *us,
            _ => -1,
        };
        let words: Vec<String> = match fields.get(3) {
            Some(Value::Array(args)) => args
                .iter()
                .map(|a| escape_bytes(&value_bytes(a).unwrap_or_default()))
                .collect(),
            _ => Vec::new(),
        };
        let command = words.first().map(|c| c.to_uppercase()).unwrap_or_default();
        let server_info_only = command == "INFO"
            && words.len() > 1
            && words[1..]
                .iter()
                .all(|w| SERVER_INFO_SECTIONS.contains(&w.to_lowercase().as_str()));
        if server_info_only || (command == "INFO" && !info) {
            continue;
        }
        if command.starts_with("TSCOUNTER.")
            || command.starts_with("TSRANK.")
            || command.starts_with("STATS.")
            || ["INFO", "FLUSHALL", "FLUSHDB"].contains(&command.as_str())
        {
            slow.push((words.join(" "), us));
        }
    }
    slow
}

/// Checks, interval by interval, that no tally command, no `INFO` and no timer tick held
/// the server for `limit_us`, beyond the time the server lost to other work in that
/// interval. The server must log commands of `limit_us` or more
/// (`slowlog-log-slower-than`); short intervals keep the allowance small.
pub struct StallWatch {
    limit_us: i64,
    lost: Lost,
    max_tick_us: i64,
    /// Whether `INFO` counts (see [`StallWatch::without_info`]).
    info: bool,
}

impl StallWatch {
    /// Empties the SLOWLOG and starts an interval.
    pub fn start(srv: &Server, limit_us: i64) -> StallWatch {
        assert_eq!(srv.cmd_value(&["SLOWLOG", "RESET"]), v_ok());
        StallWatch {
            limit_us,
            lost: Lost::start(srv),
            max_tick_us: info_i64(srv, "tally", "tally_max_tick_us"),
            info: true,
        }
    }

    /// The watch without `INFO`'s own time, for a phase in which the server's allocator
    /// holds any large allocation: a server that runs on glibc's malloc
    /// ([`ServerKind::glibc_malloc`](crate::server::ServerKind::glibc_malloc)),
    /// whose lazy-free thread frees millions of keys after `FLUSHALL ASYNC`, consolidates
    /// the freed chunks inside the main thread's next large allocation, such as an `INFO`
    /// reply (perf: `malloc_consolidate`, `unlink_chunk`), 2-70 ms per `INFO tally` after
    /// 1.9M counters, and 11-789 ms per `INFO memory` after 1.9M plain hashes with no
    /// module loaded. Tally's commands and its timer's ticks still count.
    pub fn without_info(mut self) -> StallWatch {
        self.info = false;
        self
    }

    /// Fails on a stall since the last check (or the start), then starts a new interval.
    pub fn check(&mut self, srv: &Server, what: &str) {
        self.check_inner(srv, what, true);
    }

    /// [`StallWatch::check`] of the commands only, not the timer's ticks.
    pub fn check_commands(&mut self, srv: &Server, what: &str) {
        self.check_inner(srv, what, false);
    }

    fn check_inner(&mut self, srv: &Server, what: &str, ticks: bool) {
        let k = &srv.kind().name;
        let slow = slow_entries(srv, self.info);
        let max_tick_us = info_i64(srv, "tally", "tally_max_tick_us");
        let lost_us = self.lost.server_us();
        let allowed_us = self.limit_us + lost_us;
        let stalls: Vec<_> = slow.iter().filter(|(_, us)| *us >= allowed_us).collect();
        assert!(
            stalls.is_empty(),
            "{k}: {what}: slow commands {stalls:?} (the server lost {lost_us} us to other work)"
        );
        if ticks && max_tick_us > self.max_tick_us {
            assert!(
                max_tick_us < allowed_us,
                "{k}: {what}: a timer tick took {max_tick_us} us (the server lost {lost_us} us to other work)"
            );
        }
        let info = self.info;
        *self = StallWatch::start(srv, self.limit_us);
        self.info = info;
    }
}

/// `INFO commandstats`' time per call of `command` (µs), less the time the server lost
/// to other work since `lost` started, spread over the calls: what the command itself
/// took. `CONFIG RESETSTAT` just before `lost` starts makes both cover the same calls.
pub fn usec_per_call_held(srv: &Server, command: &str, lost: &Lost) -> f64 {
    let stats = srv.info("commandstats");
    let Some(line) = stats.get(&format!("cmdstat_{command}")) else {
        return 0.0;
    };
    let field = |name: &str| -> f64 {
        line.split(',')
            .find_map(|kv| kv.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    let (calls, usec) = (field("calls="), field("usec="));
    if calls <= 0.0 {
        return 0.0;
    }
    (usec - lost.server_us() as f64).max(0.0) / calls
}

/// `tally_max_tick_us` as a bound check: the longest timer tick since the server started
/// is under `limit_us` plus the time the server lost to other work since `lost` started
/// (start `lost` with the server).
pub fn assert_ticks_below(srv: &Server, limit_us: i64, lost: &Lost, what: &str) {
    let max_tick = info_i64(srv, "tally", "tally_max_tick_us");
    let lost_us = lost.server_us();
    assert!(
        max_tick < limit_us + lost_us,
        "{}: {what}: a timer tick took {max_tick} us (limit {limit_us}; the server lost {lost_us} us to other work)",
        srv.kind().name
    );
}
