//! Argument vectors: the families and their keys, structured vectors (a plausible
//! grammar with random values, one case per command keyed by its name), native commands
//! that corrupt tally objects, and the pick of one vector.

use super::*;

/// The families the fuzz drives, as (name, prefix of their commands): each family's
/// commands are those of the module's table (as the server lists them) with its prefix.
pub(super) const FAMILIES: &[(&str, &str)] = &[
    ("counter", "TSCOUNTER."),
    ("rank", "TSRANK."),
    ("stats", "STATS."),
    ("throttle", "TSTHROTTLE."),
];

/// Keys every family's fuzz shares: tally objects of each family, other types, binary
/// and empty names.
pub(super) const KEYS: &[&[u8]] = &[
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

/// A leaderboard member: one of 30 names, sometimes junk.
fn member(rng: &mut Rng) -> Vec<u8> {
    if rng.chance(80) {
        format!("m{}", rng.below(30)).into_bytes()
    } else {
        junk(rng)
    }
}

/// A structured vector for `cmd`: a plausible grammar with random values, so parsing
/// gets past the first argument and writes happen. `None` for a command without a
/// grammar here (`fuzz_covers_every_command` fails on one in the module's table).
pub(super) fn structured(rng: &mut Rng, cmd: &str, key: &[u8]) -> Option<Vec<Vec<u8>>> {
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
        "TSCOUNTER.CREATE" => {
            if rng.chance(80) {
                s(&mut v, "RESOLUTIONS");
                for _ in 0..rng.below(5) {
                    let r = rng.pick(RESOLUTIONS).to_string();
                    s(&mut v, &r);
                }
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
                if rng.chance(50) {
                    s(&mut v, "BY");
                    let stat = if rng.chance(90) {
                        rng.pick(&["mean", "max", "count", "sum", "p50", "p90", "p99"])
                            .to_string()
                    } else {
                        String::from_utf8_lossy(&junk(rng)).into_owned()
                    };
                    s(&mut v, &stat);
                }
            }
        }
        "TSCOUNTER.INCR" => {
            if rng.chance(50) {
                s(&mut v, "AT");
                let t = timestamp(rng);
                s(&mut v, &t);
            }
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
            if rng.chance(30) {
                s(&mut v, "DETAILS");
            }
        }
        "TSCOUNTER.MLIMIT" => {
            // numkeys (mostly right), the keys (sometimes one twice), the increment, then
            // per key npairs (mostly right) and its pairs, then AT and DETAILS.
            let n = 1 + rng.below(3);
            let numkeys = if rng.chance(90) {
                n.to_string()
            } else {
                num(rng)
            };
            v = vec![cmd.as_bytes().to_vec()];
            s(&mut v, &numkeys);
            v.push(key.to_vec());
            for _ in 1..n {
                v.push(rng.pick(KEYS).to_vec());
            }
            let x = num(rng);
            s(&mut v, &x);
            for _ in 0..n {
                let pairs = 1 + rng.below(3);
                let npairs = if rng.chance(90) {
                    pairs.to_string()
                } else {
                    num(rng)
                };
                s(&mut v, &npairs);
                for _ in 0..pairs {
                    let d = rng.pick(DURATIONS).to_string();
                    s(&mut v, &d);
                    if rng.chance(97) {
                        let x = num(rng);
                        s(&mut v, &x);
                    }
                }
            }
            if rng.chance(40) {
                s(&mut v, "AT");
                let t = timestamp(rng);
                s(&mut v, &t);
            }
            if rng.chance(40) {
                s(&mut v, "DETAILS");
            }
        }
        "TSCOUNTER.MSUM" | "STATS.MGET" | "STATS.MQUANTILE" => {
            // numkeys (mostly right), the keys (sometimes one twice), then the command's
            // values and options.
            let numkeys = if rng.chance(10) { Some(num(rng)) } else { None };
            v = counted_keys(rng, cmd, key, numkeys);
            if cmd == "TSCOUNTER.MSUM" {
                for _ in 0..1 + rng.below(3) {
                    let d = rng.pick(DURATIONS).to_string();
                    s(&mut v, &d);
                }
                if rng.chance(40) {
                    s(&mut v, "AT");
                    let t = timestamp(rng);
                    s(&mut v, &t);
                }
            } else {
                stats_read_args(rng, cmd, &mut v);
            }
        }
        "TSTHROTTLE.ALLOW" => {
            // max_burst, count, period, then QUANTITY and AT in either order.
            for _ in 0..2 {
                let x = num(rng);
                s(&mut v, &x);
            }
            let d = rng.pick(DURATIONS).to_string();
            s(&mut v, &d);
            if rng.chance(40) {
                s(&mut v, "QUANTITY");
                let x = num(rng);
                s(&mut v, &x);
            }
            if rng.chance(30) {
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
            // Boards with CAPACITY: small ones overflow at once, so writes evict.
            if cmd == "TSRANK.CREATE" && rng.chance(40) {
                s(&mut v, "CAPACITY");
                let k = match rng.chance(70) {
                    true => (1 + rng.below(4)).to_string(),
                    false => num(rng),
                };
                s(&mut v, &k);
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
        "TSRANK.REM" | "TSRANK.MSCORE" => {
            let most = if cmd == "TSRANK.REM" { 4 } else { 5 };
            for _ in 0..rng.below(most) {
                v.push(member(rng));
            }
        }
        "TSRANK.AROUND" => {
            v.push(member(rng));
            let count = if rng.chance(70) {
                rng.below(12).to_string()
            } else {
                num(rng)
            };
            s(&mut v, &count);
            if rng.chance(50) {
                s(&mut v, "WITHSCORES");
            }
        }
        "TSRANK.SCORE" | "TSRANK.RANK" | "TSRANK.HISTORY" => {
            v.push(member(rng));
            if cmd == "TSRANK.RANK" && rng.chance(40) {
                s(&mut v, "TIES");
            }
            if cmd == "TSRANK.HISTORY" && rng.chance(40) {
                s(&mut v, "WINDOW");
                let d = rng.pick(DURATIONS).to_string();
                s(&mut v, &d);
            }
        }
        "STATS.GET" | "STATS.QUANTILE" | "STATS.CDF" => stats_read_args(rng, cmd, &mut v),
        // The key alone.
        "TSCOUNTER.INFO" | "TSRANK.INFO" | "STATS.INFO" => {}
        _ => return None,
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
    Some(v)
}

/// What a STATS read takes after its keys: CDF's values, QUANTILE's and MQUANTILE's
/// fractions, then sometimes `WINDOW dur`.
fn stats_read_args(rng: &mut Rng, cmd: &str, v: &mut Vec<Vec<u8>>) {
    if cmd == "STATS.CDF" {
        for _ in 0..1 + rng.below(3) {
            v.push(rng.pick(NUMBERS).as_bytes().to_vec());
        }
    }
    if cmd.ends_with("QUANTILE") {
        for _ in 0..1 + rng.below(3) {
            let q = if rng.chance(60) {
                format!("0.{}", rng.below(100))
            } else {
                rng.pick(NUMBERS).to_string()
            };
            v.push(q.into_bytes());
        }
    }
    if rng.chance(40) {
        v.push(b"WINDOW".to_vec());
        v.push(rng.pick(DURATIONS).as_bytes().to_vec());
    }
}

/// `cmd numkeys key [key ...]` of a read across keys: 1 to 4 keys starting with `key`;
/// `numkeys` their number unless `wrong` gives another.
fn counted_keys(rng: &mut Rng, cmd: &str, key: &[u8], wrong: Option<String>) -> Vec<Vec<u8>> {
    let n = 1 + rng.below(4);
    let numkeys = wrong.unwrap_or_else(|| n.to_string());
    let mut v = vec![cmd.as_bytes().to_vec(), numkeys.into_bytes(), key.to_vec()];
    for _ in 1..n {
        v.push(rng.pick(KEYS).to_vec());
    }
    v
}

/// Scores native ZADDs put into tally's sorted sets.
pub(super) const SCORES: &[&str] = &["inf", "-inf", "1e300", "0.5", "-3"];

/// Native commands that change tally objects behind the module's back: the module must
/// treat whatever it finds as data, never trust it.
pub(super) fn corruption(rng: &mut Rng) -> Vec<Vec<u8>> {
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

/// One vector: mostly a command of `family`, sometimes one of `all` (every command of
/// the module's table), or a corruption.
pub(super) fn one_vector(rng: &mut Rng, family: &[&str], all: &[&str]) -> Vec<Vec<u8>> {
    if rng.chance(4) {
        return corruption(rng);
    }
    let cmd = if rng.chance(85) {
        *rng.pick(family)
    } else {
        *rng.pick(all)
    };
    // Mostly keys that hold (or will hold) objects of the command's family, so parsing
    // and writing get deep; the rest of the pool brings other types and forged objects.
    let own: &[&[u8]] = match cmd.split('.').next() {
        Some("TSCOUNTER") => &[b"k{a}", b"k{b}", b"plain", b"tc{1}"],
        Some("TSRANK") => &[b"lb{x}", b"lb{y}", b"k{b}", b"lb{1}"],
        Some("TSTHROTTLE") => &[b"th{1}", b"th{2}", b"str", b"plain"],
        _ => &[b"k{c}", b"k{d}", b"plain", b"st{1}"],
    };
    let key = if rng.chance(65) {
        rng.pick(own).to_vec()
    } else {
        rng.pick(KEYS).to_vec()
    };
    if rng.chance(75) {
        return structured(rng, cmd, &key)
            .unwrap_or_else(|| panic!("{cmd}: no grammar in structured()"));
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
