//! Seeded randomized fuzzing of every command of every family, on every server kind.
//!
//! Each family's test sends at least 6,000 argument vectors per server kind (18,000 for
//! the three families together; ten times more with `TALLY_LONG=1`), pipelined in
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

use module_tests::redis::ConnectionLike as _;
use module_tests::*;
use std::time::{Duration, Instant};

// ================================================================== random

fn seed() -> u64 {
    std::env::var("TALLY_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x7A11_F022)
}

const KEYWORDS: &[&str] = &[
    "AT",
    "FROM",
    "TO",
    "EMPTY",
    "RESOLUTIONS",
    "WINDOW",
    "SLOT",
    "OFFSET",
    "WITHSCORES",
    "PERIOD",
    "KEEP",
    "REPORT",
];

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "7",
    "100",
    "100000",
    "100001",
    "10000",
    "10001",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "-9223372036854775809",
    "4611686018427387904",
    "9007199254740993",
    "-0",
    "01",
    "+1",
    " 1",
    "1 ",
    "1e3",
    "0x10",
    "1.5",
    "-2.5",
    "0.0",
    "-0.0",
    "1e308",
    "-1e308",
    "1e309",
    "4.9e-324",
    "1e-9",
    "1e100",
    "1.0000001e100",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "NaN",
    "infinity",
    "0.5",
    "0.99",
    "1.0000000001",
];

const DURATIONS: &[&str] = &[
    "1",
    "1ms",
    "100ms",
    "500ms",
    "1s",
    "5s",
    "1m",
    "5m",
    "1h",
    "24h",
    "1d",
    "180d",
    "2w",
    "0",
    "0s",
    "-5s",
    "1S",
    "1H",
    "1x",
    "s",
    "ms",
    "1.5s",
    "1e3ms",
    "999999999999999999",
    "9999999999999999999",
    "99999999999999d",
    "106751991167w",
    "1000000000000000000ms",
    "3s ",
    "5 s",
];

const RESOLUTIONS: &[&str] = &[
    "1s:10",
    "1ms:100000",
    "100ms:5",
    "1s:1",
    "5s:120",
    "1m:60",
    "1h:24",
    "1d:365",
    "1s:0",
    "1s:-1",
    "1s:100001",
    "1s",
    ":",
    "0:0",
    "1s:10:10",
    "1s:1e3",
    ":10",
    "1x:10",
    "1w:100000",
    "9223372036854775807:1",
    "1s:9223372036854775807",
];

/// A random timestamp: near now (past, future within and beyond max-future), epoch,
/// negative, extremes.
fn timestamp(rng: &mut Rng) -> String {
    let now = local_ms();
    match rng.below(10) {
        0 => "0".into(),
        1 => "-1".into(),
        2 => i64::MAX.to_string(),
        3 => i64::MIN.to_string(),
        4 => (now + 30_000).to_string(),
        5 => (now + 120_000).to_string(),
        6 => (now - rng.below(1000) * 86_400_000).to_string(),
        _ => (now - rng.below(200_000)).to_string(),
    }
}

fn junk(rng: &mut Rng) -> Vec<u8> {
    match rng.below(8) {
        0 => Vec::new(),
        1 => b"\x00".to_vec(),
        2 => (0..rng.below(40)).map(|_| rng.next_u64() as u8).collect(),
        3 => vec![b'x'; 10_000 + rng.below(90_000) as usize],
        4 => "\u{1F600}\u{e9}{}|:".as_bytes().to_vec(),
        5 => b"1\x002".to_vec(),
        6 => format!("m{}", rng.below(20)).into_bytes(),
        _ => {
            let mut k = rng.pick(KEYWORDS).as_bytes().to_vec();
            k.push(b'X');
            k
        }
    }
}

/// One random argument.
fn arg(rng: &mut Rng) -> Vec<u8> {
    match rng.below(14) {
        0..=2 => {
            let k = rng.pick(KEYWORDS);
            match rng.below(3) {
                0 => k.to_lowercase().into_bytes(),
                _ => k.as_bytes().to_vec(),
            }
        }
        3..=5 => rng.pick(NUMBERS).as_bytes().to_vec(),
        6 | 7 => rng.pick(DURATIONS).as_bytes().to_vec(),
        8 => rng.pick(RESOLUTIONS).as_bytes().to_vec(),
        9 | 10 => timestamp(rng).into_bytes(),
        11 => (rng.next_u64() as i64 >> rng.below(63))
            .to_string()
            .into_bytes(),
        _ => junk(rng),
    }
}

// ================================================================ commands

const COUNTER_CMDS: &[&str] = &[
    "TSCOUNTER.CREATE",
    "TSCOUNTER.INCRBY",
    "TSCOUNTER.INCR",
    "TSCOUNTER.SUM",
    "TSCOUNTER.RANGE",
    "TSCOUNTER.INFO",
    "TSCOUNTER.LIMIT",
];
const RANK_CMDS: &[&str] = &[
    "TSRANK.CREATE",
    "TSRANK.INCRBY",
    "TSRANK.TOP",
    "TSRANK.SCORE",
    "TSRANK.RANK",
    "TSRANK.INFO",
    "TSRANK.HISTORY",
];
const STATS_CMDS: &[&str] = &[
    "STATS.CREATE",
    "STATS.ADD",
    "STATS.GET",
    "STATS.QUANTILE",
    "STATS.RANGE",
    "STATS.INFO",
];

/// Keys every family's fuzz shares: tally objects of each family, other types, binary
/// and empty names.
const KEYS: &[&[u8]] = &[
    b"k{a}",
    b"k{b}",
    b"k{c}",
    b"k{d}",
    b"lb{x}",
    b"lb{y}",
    b"plain",
    b"str",
    b"list",
    b"hash",
    b"zset",
    b"forged-c",
    b"forged-r{r}",
    b"forged-s",
    b"",
    b"\x00\xff{z}",
];

/// A structured vector for `cmd`: a plausible grammar with random values, so parsing
/// gets past the first argument and writes happen.
fn structured(rng: &mut Rng, cmd: &str, key: &[u8]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = vec![cmd.as_bytes().to_vec(), key.to_vec()];
    let s = |v: &mut Vec<Vec<u8>>, x: &str| v.push(x.as_bytes().to_vec());
    let num = |rng: &mut Rng| -> String {
        if rng.chance(85) {
            (rng.below(1000) - 100).to_string()
        } else {
            rng.pick(NUMBERS).to_string()
        }
    };
    match cmd {
        "TSCOUNTER.CREATE" if rng.chance(80) => {
            s(&mut v, "RESOLUTIONS");
            for _ in 0..rng.below(5) {
                let r = rng.pick(RESOLUTIONS).to_string();
                s(&mut v, &r);
            }
        }
        "TSCOUNTER.INCRBY" | "TSRANK.INCRBY" | "STATS.ADD" => {
            let n = 1 + rng.below(4);
            for _ in 0..n {
                let x = num(rng);
                s(&mut v, &x);
                if cmd == "TSRANK.INCRBY" {
                    v.push(if rng.chance(80) {
                        format!("m{}", rng.below(30)).into_bytes()
                    } else {
                        junk(rng)
                    });
                }
            }
            if rng.chance(40) {
                s(&mut v, "AT");
                let t = timestamp(rng);
                s(&mut v, &t);
            }
            if cmd == "STATS.ADD" && rng.chance(30) {
                s(&mut v, "REPORT");
                v.push(rng.pick(KEYS).to_vec());
                v.push(junk(rng));
                if rng.chance(50) {
                    s(&mut v, "KEEP");
                    let x = num(rng);
                    s(&mut v, &x);
                }
            }
        }
        "TSCOUNTER.INCR" if rng.chance(50) => {
            s(&mut v, "AT");
            let t = timestamp(rng);
            s(&mut v, &t);
        }
        "TSCOUNTER.LIMIT" => {
            let x = num(rng);
            s(&mut v, &x);
            for _ in 0..1 + rng.below(4) {
                let d = rng.pick(DURATIONS).to_string();
                s(&mut v, &d);
                if rng.chance(95) {
                    let x = num(rng);
                    s(&mut v, &x);
                }
            }
            if rng.chance(40) {
                s(&mut v, "AT");
                let t = timestamp(rng);
                s(&mut v, &t);
            }
        }
        "TSCOUNTER.SUM" => {
            for _ in 0..1 + rng.below(4) {
                let d = rng.pick(DURATIONS).to_string();
                s(&mut v, &d);
            }
            if rng.chance(30) {
                s(&mut v, "AT");
                let t = timestamp(rng);
                s(&mut v, &t);
            }
        }
        "TSCOUNTER.RANGE" | "STATS.RANGE" => {
            if cmd == "TSCOUNTER.RANGE" {
                let d = rng.pick(DURATIONS).to_string();
                s(&mut v, &d);
            }
            for kw in ["FROM", "TO"] {
                if rng.chance(50) {
                    s(&mut v, kw);
                    let t = timestamp(rng);
                    s(&mut v, &t);
                }
            }
            if cmd == "TSCOUNTER.RANGE" && rng.chance(50) {
                s(&mut v, "EMPTY");
            }
        }
        "TSRANK.CREATE" | "STATS.CREATE" => {
            let (a, b) = if cmd == "TSRANK.CREATE" {
                ("WINDOW", "SLOT")
            } else {
                ("PERIOD", "KEEP")
            };
            for kw in [a, b] {
                if rng.chance(80) {
                    s(&mut v, kw);
                    let d = if kw == "KEEP" {
                        num(rng)
                    } else {
                        rng.pick(DURATIONS).to_string()
                    };
                    s(&mut v, &d);
                }
            }
        }
        "TSRANK.TOP" => {
            let x = num(rng);
            s(&mut v, &x);
            if rng.chance(30) {
                s(&mut v, "OFFSET");
                let x = num(rng);
                s(&mut v, &x);
            }
            if rng.chance(50) {
                s(&mut v, "WITHSCORES");
            }
            if rng.chance(30) {
                s(&mut v, "WINDOW");
                let d = rng.pick(DURATIONS).to_string();
                s(&mut v, &d);
            }
        }
        "TSRANK.SCORE" | "TSRANK.RANK" | "TSRANK.HISTORY" => {
            v.push(if rng.chance(80) {
                format!("m{}", rng.below(30)).into_bytes()
            } else {
                junk(rng)
            });
            if cmd == "TSRANK.HISTORY" && rng.chance(40) {
                s(&mut v, "WINDOW");
                let d = rng.pick(DURATIONS).to_string();
                s(&mut v, &d);
            }
        }
        "STATS.GET" | "STATS.QUANTILE" => {
            if cmd == "STATS.QUANTILE" {
                for _ in 0..1 + rng.below(3) {
                    let q = if rng.chance(60) {
                        format!("0.{}", rng.below(100))
                    } else {
                        rng.pick(NUMBERS).to_string()
                    };
                    s(&mut v, &q);
                }
            }
            if rng.chance(40) {
                s(&mut v, "WINDOW");
                let d = rng.pick(DURATIONS).to_string();
                s(&mut v, &d);
            }
        }
        _ => {}
    }
    // Mutations: drop, duplicate or replace one argument.
    if rng.chance(15) && v.len() > 2 {
        let i = 2 + rng.below(v.len() as i64 - 2) as usize;
        match rng.below(3) {
            0 => {
                v.remove(i);
            }
            1 => {
                let x = v[i].clone();
                v.insert(i, x);
            }
            _ => v[i] = arg(rng),
        }
    }
    v
}

/// Scores native ZADDs put into tally's sorted sets.
const SCORES: &[&str] = &["inf", "-inf", "1e300", "0.5", "-3"];

/// Native commands that change tally objects behind the module's back: the module must
/// treat whatever it finds as data, never trust it.
fn corruption(rng: &mut Rng) -> Vec<Vec<u8>> {
    let key = rng.pick(KEYS).to_vec();
    let b = |s: &str| s.as_bytes().to_vec();
    let field_junk = |rng: &mut Rng| -> Vec<u8> {
        match rng.below(6) {
            0 => b"counter 1s:zz".to_vec(),
            1 => b"rank 0 0 0 0".to_vec(),
            2 => b"stats 1h 0".to_vec(),
            3 => b"counter 1s:10 1s:10".to_vec(),
            4 => format!(
                "rank 3600000 60000 {} {}",
                rng.next_u64() as i64,
                rng.next_u64() as i64
            )
            .into_bytes(),
            _ => junk(rng),
        }
    };
    match rng.below(9) {
        0 => vec![b("HSET"), key, b("_tally"), field_junk(rng)],
        1 => vec![b("HSET"), key, b("_state"), junk(rng)],
        2 => vec![b("HSET"), key, arg(rng), arg(rng)],
        3 => vec![b("HDEL"), key, b("_state")],
        4 => {
            let mut meta = key;
            meta.extend_from_slice(b"|meta");
            vec![b("HSET"), meta, b("_tally"), field_junk(rng)]
        }
        5 => vec![
            b("ZADD"),
            key,
            b(SCORES[rng.below(SCORES.len() as i64) as usize]),
            junk(rng),
        ],
        6 => vec![b("DEL"), key],
        7 => vec![b("PEXPIRE"), key, b(&(1 + rng.below(300)).to_string())],
        _ => {
            let to = rng.pick(KEYS).to_vec();
            vec![b("RENAME"), key, to]
        }
    }
}

fn one_vector(rng: &mut Rng, family: &[&str]) -> Vec<Vec<u8>> {
    if rng.chance(4) {
        return corruption(rng);
    }
    let all: Vec<&str> = COUNTER_CMDS
        .iter()
        .chain(RANK_CMDS)
        .chain(STATS_CMDS)
        .copied()
        .collect();
    let cmd = if rng.chance(85) {
        *rng.pick(family)
    } else {
        *rng.pick(&all)
    };
    // Mostly keys that hold (or will hold) objects of the command's family, so parsing
    // and writing get deep; the rest of the pool brings other types and forged objects.
    let own: &[&[u8]] = match cmd.split('.').next() {
        Some("TSCOUNTER") => &[b"k{a}", b"k{b}", b"plain", b"tc{1}"],
        Some("TSRANK") => &[b"lb{x}", b"lb{y}", b"k{b}", b"lb{1}"],
        _ => &[b"k{c}", b"k{d}", b"plain", b"st{1}"],
    };
    let key = if rng.chance(65) {
        rng.pick(own).to_vec()
    } else {
        rng.pick(KEYS).to_vec()
    };
    if rng.chance(75) {
        return structured(rng, cmd, &key);
    }
    // Fully random arity and tokens (sometimes no key at all).
    let mut v = vec![cmd.as_bytes().to_vec()];
    if rng.chance(95) {
        v.push(key);
    }
    let n = match rng.below(10) {
        0 => 0,
        1 => 20 + rng.below(60),
        _ => rng.below(8),
    };
    for _ in 0..n {
        v.push(arg(rng));
    }
    v
}

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

fn fuzz(kind: &ServerKind, family_name: &str, family: &[&str]) {
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
        let vectors: Vec<Vec<Vec<u8>>> = (0..batch).map(|_| one_vector(&mut rng, family)).collect();
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
    for c in family {
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
    fuzz(kind, "counter", COUNTER_CMDS);
}

per_server!(fuzz_rank);
fn fuzz_rank(kind: &ServerKind) {
    fuzz(kind, "rank", RANK_CMDS);
}

per_server!(fuzz_stats);
fn fuzz_stats(kind: &ServerKind) {
    fuzz(kind, "stats", STATS_CMDS);
}
