//! Seeded randomized fuzzing of every command of every family, on every server kind.
//!
//! Each family's test (counter, rank, stats, throttle) sends at least 6,000 argument
//! vectors per server kind (24,000 for the four families together; ten times more with `TALLY_LONG=1`), pipelined in
//! batches: random arity, the families' keywords in random case, huge / negative / float
//! numbers, durations with and without units, timestamps near now and absurd ones,
//! resolution specs, empty and binary strings, NUL bytes and very long strings, commands
//! of other families on the same keys, keys of other types, and native commands that
//! corrupt the stored objects (`HSET key _tally garbage`, `ZADD key inf member`, ...).
//!
//! Checks: every vector gets a reply (a value or an error, never a dropped connection);
//! no reply is tally's "internal error" (a caught panic: a bug even if the server lives);
//! `PING` answers after every batch; the server is alive at the end and its log has no
//! crash report or panic; a replica attached during the whole run ends equal to the
//! primary (every effect of every accepted vector replicated deterministically).
//!
//! Seed: `TALLY_FUZZ_SEED` (default fixed); the seed is printed so a failure replays.
//!
//! Commands: each family's are those of the module's table (as the server lists them)
//! with its prefix; `fuzz_covers_every_command` fails on a command of the table that no
//! family takes or that has no grammar in `structured`.
//!
//! Files: `random.rs` (random arguments), `vectors.rs` (families, structured vectors,
//! corruption); this file holds the driver.

use module_tests::redis::ConnectionLike as _;
use module_tests::*;
use std::time::{Duration, Instant};

mod random;
mod vectors;

use random::*;
use vectors::*;

// ================================================================== driver

fn populate(srv: &Server) {
    for c in [
        vec!["SET", "str", "v"],
        vec!["RPUSH", "list", "a"],
        vec!["HSET", "hash", "f", "v"],
        vec!["ZADD", "zset", "1", "a"],
        vec!["HSET", "forged-c", "_tally", "counter 1s:zz", "_state", "x"],
        vec![
            "HSET",
            "forged-r{r}|meta",
            "_tally",
            "rank 5 0 -9223372036854775808 9223372036854775807",
        ],
        vec!["ZADD", "forged-r{r}", "inf", "m1"],
        vec![
            "HSET",
            "forged-s",
            "_tally",
            "stats 1h 24",
            "1:m",
            "garbage",
            "1:q",
            "\x01\x05",
        ],
        vec![
            "TSCOUNTER.CREATE",
            "k{a}",
            "RESOLUTIONS",
            "100ms:10",
            "1s:5",
            "1d:3",
        ],
        vec!["TSRANK.CREATE", "lb{x}", "WINDOW", "1s", "SLOT", "100ms"],
        vec!["STATS.CREATE", "k{c}", "PERIOD", "200ms", "KEEP", "5"],
    ] {
        let v = srv.cmd_value(&c);
        assert!(error_text(&v).is_none(), "{c:?}: {v:?}");
    }
}

const INTERNAL: &str = "ERR internal error in tally";

/// Fails unless every command of the module's table on `srv` belongs to a family of
/// [`FAMILIES`] and has a grammar in [`structured`], naming the ones that do not.
fn assert_fuzz_covers(srv: &Server, table: &[String]) {
    let with_grammar = table.iter().filter(|name| {
        FAMILIES.iter().any(|(_, prefix)| name.starts_with(prefix))
            && structured(&mut Rng(1), name, b"k").is_some()
    });
    assert_cases_cover(
        srv,
        "fuzz/vectors.rs (FAMILIES and structured)",
        table,
        with_grammar,
    );
}

per_server!(fuzz_covers_every_command);
/// Every command of the module's table is fuzzed: it belongs to a family and has a grammar
/// (each family's fuzz checks this too before it starts).
fn fuzz_covers_every_command(kind: &ServerKind) {
    let srv = Server::start(kind);
    assert_fuzz_covers(&srv, &tally_command_names(&srv));
}

fn fuzz(kind: &ServerKind, family_name: &str) {
    let per_kind = if long_run() { 100_000 } else { 10_000 };
    let batch = 200;
    let k = kind.name.clone();
    let base = seed();
    let seed = base ^ family_name.len() as u64 ^ (k.len() as u64) << 8;
    eprintln!(
        "fuzz {family_name} on {k}: seed {seed} (TALLY_FUZZ_SEED={})",
        base
    );
    let srv = Server::start(kind);
    // The family's commands, and every command, from the module's table.
    let table = tally_command_names(&srv);
    assert_fuzz_covers(&srv, &table);
    let prefix = FAMILIES
        .iter()
        .find(|(name, _)| *name == family_name)
        .map(|(_, prefix)| *prefix)
        .unwrap_or_else(|| panic!("no family {family_name}"));
    let all: Vec<&str> = table.iter().map(String::as_str).collect();
    let family: Vec<&str> = all
        .iter()
        .copied()
        .filter(|name| name.starts_with(prefix))
        .collect();
    assert!(!family.is_empty(), "{k}: no {prefix} command");
    eprintln!("fuzz {family_name} on {k}: {family:?}");
    let replica = Server::start(kind);
    replica.replicate_from(&srv);
    wait_replica_synced(&srv, &replica);
    populate(&srv);
    let mut rng = Rng(seed);
    // Every other batch on a RESP3 connection (maps, doubles, nil take other paths).
    let mut conns = [srv.conn(), srv.conn_resp3()];
    let mut batch_no = 0usize;
    let mut internal = Vec::new();
    let mut replies = 0usize;
    // Per command: (non-error replies, error replies).
    let mut stats: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
    let mut errors: std::collections::BTreeMap<String, usize> = Default::default();
    let t0 = Instant::now();
    let mut sent = 0usize;
    while sent < per_kind {
        let vectors: Vec<Vec<Vec<u8>>> = (0..batch)
            .map(|_| one_vector(&mut rng, &family, &all))
            .collect();
        let mut pipe = redis::pipe();
        for v in &vectors {
            let mut cmd = redis::Cmd::new();
            for a in v {
                cmd.arg(&a[..]);
            }
            pipe.add_command(cmd);
        }
        pipe.add_command(redis::cmd("PING"));
        batch_no += 1;
        // Half-way, the timer gets the smallest budget: expiry work is cut into many
        // unfinished visits.
        if sent >= per_kind / 2 && sent < per_kind / 2 + batch {
            let v = srv.cmd_value(&["CONFIG", "SET", "tally.expire-budget-us", "10"]);
            assert_eq!(v, v_ok(), "{k}");
        }
        let conn = &mut conns[batch_no % 2];
        let out = conn
            .req_packed_commands(&pipe.get_packed_pipeline(), 0, vectors.len() + 1)
            .unwrap_or_else(|e| {
                panic!(
                    "{k}: connection lost in batch after {sent} vectors: {e}\n{}",
                    srv.log_tail(60)
                )
            });
        assert_eq!(out.len(), vectors.len() + 1, "{k}: a reply is missing");
        assert_eq!(out.last(), Some(&v_simple("PONG")), "{k}: PING after batch");
        for (v, reply) in vectors.iter().zip(&out) {
            replies += 1;
            let name = String::from_utf8_lossy(&v[0]).to_uppercase();
            let e = stats.entry(name).or_insert((0, 0));
            match error_text(reply) {
                None => e.0 += 1,
                Some(text) => {
                    e.1 += 1;
                    let short: String = text.chars().take(48).collect();
                    *errors.entry(short).or_insert(0) += 1;
                }
            }
            if error_text(reply).is_some_and(|e| e.starts_with(INTERNAL)) {
                let shown: Vec<String> = v
                    .iter()
                    .map(|a| escape_bytes(&a[..a.len().min(60)]))
                    .collect();
                internal.push(format!("{shown:?} -> {reply:?}"));
            }
        }
        sent += vectors.len();
    }
    let elapsed = t0.elapsed();
    eprintln!("fuzz {family_name} on {k}: {sent} vectors, {replies} replies in {elapsed:?}");
    eprintln!("fuzz {family_name} on {k}: (ok, error) per command: {stats:?}");
    let mut top: Vec<(&String, &usize)> = errors.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1));
    eprintln!(
        "fuzz {family_name} on {k}: most frequent errors: {:?}",
        &top[..top.len().min(12)]
    );
    // The structured half must get past parsing: every command of the family
    // succeeds sometimes.
    for c in &family {
        let (ok, _) = stats.get(*c).copied().unwrap_or((0, 0));
        assert!(ok > 0, "{k}: {c} never succeeded: the fuzz is too shallow");
    }
    // A reload makes the start-up scan schedule every hash with a `_tally` field,
    // forged and corrupted ones included: the timer visits all of them.
    assert_eq!(srv.cmd_value(&["DEBUG", "RELOAD"]), v_ok(), "{k}");
    std::thread::sleep(Duration::from_millis(500));
    let scanned = wait_until(Duration::from_secs(10), || {
        srv.info("tally")
            .get("tally_scan_in_progress")
            .map(String::as_str)
            == Some("0")
    });
    assert!(scanned, "{k}: the start-up scan never finished");
    srv.assert_alive();
    for (who, s) in [("primary", &srv), ("replica", &replica)] {
        for file in ["server.log", "stdout.log"] {
            let text = std::fs::read_to_string(s.dir().join(file)).unwrap_or_default();
            let bad: Vec<&str> = text
                .lines()
                .filter(|l| {
                    let l = l.to_lowercase();
                    l.contains("crashed") || l.contains("panic") || l.contains("assertion")
                })
                .take(10)
                .collect();
            assert!(bad.is_empty(), "{k} {who} {file}: {bad:#?}");
        }
    }
    assert!(
        internal.is_empty(),
        "{k}: {} vectors hit an internal error (a caught panic), e.g.:\n{}",
        internal.len(),
        internal
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Every accepted write replicated as deterministic effects: the replica holds
    // exactly the primary's data once expiry settles.
    assert_replica_equal(&srv, &replica, "after fuzzing");
    replica.assert_alive();
}

per_server!(fuzz_counter);
fn fuzz_counter(kind: &ServerKind) {
    fuzz(kind, "counter");
}

per_server!(fuzz_rank);
fn fuzz_rank(kind: &ServerKind) {
    fuzz(kind, "rank");
}

per_server!(fuzz_stats);
fn fuzz_stats(kind: &ServerKind) {
    fuzz(kind, "stats");
}

per_server!(fuzz_throttle);
fn fuzz_throttle(kind: &ServerKind) {
    fuzz(kind, "throttle");
}
