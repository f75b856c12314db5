//! The families the fuzzer drives: their object names, how one is created, random
//! writes, every read command, and one random command of the workload. Together they run
//! every command of the module's table (`fault_fuzz_covers_every_command` asks the
//! server for it and fails naming a command none of them runs).

use super::*;

// ================================================================ families

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Family {
    Counter,
    Rank,
    Stats,
    /// TSTHROTTLE: native strings the server expires, with no reads; the faults reach
    /// them as keys of another type (field edits answer WRONGTYPE) and by key.
    Throttle,
}

impl Family {
    pub(super) const ALL: [Family; 4] = [
        Family::Counter,
        Family::Rank,
        Family::Stats,
        Family::Throttle,
    ];

    pub(super) fn prefix(self) -> &'static str {
        match self {
            Family::Counter => "c",
            Family::Rank => "b",
            Family::Stats => "s",
            Family::Throttle => "t",
        }
    }

    /// The object names of the family's pool: `c:0..c:29` and `c:new0..c:new4`.
    pub(super) fn names(self) -> Vec<String> {
        let p = self.prefix();
        (0..POOL)
            .map(|i| format!("{p}:{i}"))
            .chain((0..FRESH).map(|i| format!("{p}:new{i}")))
            .collect()
    }

    /// A CREATE with small settings, or (one in ten) hour-long ones.
    pub(super) fn create(self, rng: &mut Rng, key: &str) -> Vec<String> {
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
            // No CREATE: the first request makes the key, its period its lifetime.
            Family::Throttle => {
                let period = if long_lived {
                    "1h".to_string()
                } else {
                    rng.pick(&["50ms", "100ms", "200ms", "500ms", "1s"])
                        .to_string()
                };
                vec![
                    "TSTHROTTLE.ALLOW".into(),
                    key.into(),
                    rng.below(5).to_string(),
                    (1 + rng.below(20)).to_string(),
                    period,
                ]
            }
        }
    }

    /// A write on `key`; MLIMIT's second key is another of `names`.
    pub(super) fn write(self, rng: &mut Rng, key: &str, names: &[String]) -> Vec<String> {
        let mut v: Vec<String> = match self {
            Family::Counter if rng.chance(20) => vec![
                "TSCOUNTER.LIMIT".into(),
                key.into(),
                (rng.below(5) + 1).to_string(),
                "50ms".into(),
                (rng.below(50) + 10).to_string(),
            ],
            Family::Counter if rng.chance(15) => vec!["TSCOUNTER.INCR".into(), key.into()],
            Family::Counter if rng.chance(12) => {
                let other = rng.pick(names).clone();
                let mut v = vec![
                    "TSCOUNTER.MLIMIT".into(),
                    "2".into(),
                    key.into(),
                    other,
                    (rng.below(5) + 1).to_string(),
                ];
                for _ in 0..2 {
                    v.push("1".into());
                    v.push(rng.pick(&["50ms", "200ms"]).to_string());
                    v.push((rng.below(50) + 10).to_string());
                }
                v
            }
            Family::Counter => vec![
                "TSCOUNTER.INCRBY".into(),
                key.into(),
                (rng.below(5) + 1).to_string(),
            ],
            // REM takes no AT: members only.
            Family::Rank if rng.chance(10) => {
                let mut v = vec!["TSRANK.REM".into(), key.into()];
                for _ in 0..1 + rng.below(3) {
                    v.push(format!("m{}", rng.below(10)));
                }
                return v;
            }
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
            Family::Throttle => {
                let mut v = self.create(rng, key);
                if rng.chance(30) {
                    v.push("QUANTITY".into());
                    v.push(rng.below(4).to_string());
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
    /// key): every error they answer is a defect, but a sum's documented overflow once
    /// the fuzzer wrote `i64::MAX` into a count (see `Taint::overflowing`).
    pub(super) fn reads(self, key: &str) -> Vec<Vec<String>> {
        let c = |args: &[&str]| args.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        match self {
            Family::Counter => vec![
                c(&["TSCOUNTER.SUM", key, "1"]),
                c(&["TSCOUNTER.INFO", key]),
                c(&["TSCOUNTER.MSUM", "2", key, key, "1"]),
            ],
            Family::Rank => vec![
                c(&["TSRANK.TOP", key, "10", "WITHSCORES"]),
                c(&["TSRANK.SCORE", key, "m1"]),
                c(&["TSRANK.RANK", key, "m2"]),
                c(&["TSRANK.RANK", key, "m2", "TIES"]),
                c(&["TSRANK.MSCORE", key, "m1", "m2"]),
                c(&["TSRANK.AROUND", key, "m1", "3", "WITHSCORES"]),
                c(&["TSRANK.INFO", key]),
                c(&["TSRANK.HISTORY", key, "m1"]),
            ],
            Family::Stats => vec![
                c(&["STATS.GET", key]),
                c(&["STATS.QUANTILE", key, "0.5", "0.99"]),
                c(&["STATS.CDF", key, "1", "2.5"]),
                c(&["STATS.RANGE", key]),
                c(&["STATS.INFO", key]),
                c(&["STATS.MGET", "2", key, key]),
                c(&["STATS.MQUANTILE", "1", key, "0.5", "0.99"]),
            ],
            // A throttle has no read: a request with QUANTITY 0 only looks, but it is a
            // write command (refused on a replica, for a read-only user).
            Family::Throttle => vec![],
        }
    }

    /// The reads the workload picks from: [`Family::reads`], and reads whose errors are
    /// documented for some valid objects (only a caught panic counts in the workload):
    /// TSCOUNTER.RANGE of a resolution the counter may not have.
    pub(super) fn workload_reads(self, rng: &mut Rng, key: &str) -> Vec<Vec<String>> {
        let mut reads = self.reads(key);
        if self == Family::Counter {
            let res = rng.pick(&["50ms", "100ms", "200ms", "500ms", "1s", "1m", "1h"]);
            reads.push(vec!["TSCOUNTER.RANGE".into(), key.into(), res.to_string()]);
        }
        reads
    }

    pub(super) fn one_command(self, rng: &mut Rng, names: &[String]) -> Vec<String> {
        let key = rng.pick(names).clone();
        match rng.below(100) {
            0..=9 => self.create(rng, &key),
            10..=64 => self.write(rng, &key, names),
            _ => {
                let reads = self.workload_reads(rng, &key);
                if reads.is_empty() {
                    return self.write(rng, &key, names);
                }
                rng.pick(&reads).clone()
            }
        }
    }
}

/// The object a key belongs to: `b:3|slot|17` and `b:3|meta` belong to `b:3`.
pub(super) fn owner(key: &str) -> &str {
    key.split('|').next().unwrap_or(key)
}

pub(super) fn is_slot_hash(key: &str) -> bool {
    key.contains("|slot|")
}

/// The commands `family`'s workload runs: its reads, and the CREATE and writes of 500
/// seeded draws (each write shape has a chance of one in ten or more).
pub(super) fn commands_run(family: Family) -> BTreeSet<String> {
    let names = family.names();
    let mut rng = Rng(1);
    let mut run: BTreeSet<String> = family
        .workload_reads(&mut rng, &names[0])
        .into_iter()
        .map(|c| c[0].clone())
        .collect();
    for _ in 0..500 {
        run.insert(family.create(&mut rng, &names[0])[0].clone());
        run.insert(family.write(&mut rng, &names[0], &names)[0].clone());
    }
    run
}
