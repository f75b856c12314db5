//! The faults applied between batches (`hdel`, `hset`, `zadd`, `pexpire`, `del`, `unlink`,
//! `rename`, `evict`, `pause`, `pause-multi`, `active-expire`, `flushall`, `swapdb`), picked
//! by weight.

use super::*;

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

/// The largest count a field can hold (see `Taint::overflowing`).
const I64_MAX: &str = "9223372036854775807";

const GARBAGE: &[&str] = &[
    "garbage",
    "-1",
    "0",
    I64_MAX,
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

impl Fuzz<'_> {
    pub(super) fn apply_fault(&mut self, rng: &mut Rng) {
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
                        if op == "set" && garbage == I64_MAX {
                            self.taint[0].overflowing.insert(owner(&key).to_string());
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
                        // A zset created where no board was is not a board; nor is one
                        // created where a board just left (its meta may still be on the
                        // way to the board's new name, or to deletion).
                        let board_left = self
                            .main_key_left
                            .get(owner(&key))
                            .is_some_and(|t| t.elapsed() < SETTLE + Duration::from_millis(300));
                        let created =
                            r[0] == Value::Int(0) && (r[1] == Value::Int(0) || board_left);
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
                if key == owner(&key) {
                    self.main_key_left.insert(key.clone(), Instant::now());
                }
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
                // A board name the fuzzer made "not a board" with a junk `src|meta` that
                // tally never knew as a meta (created garbled: its reads answer WRONGTYPE
                // and nothing is held to put back) keeps that junk when the main key
                // moves: the name stays "not a board" (soak seed 1033986287).
                let junk_meta_stays = self.family == Family::Rank
                    && src == owner(&src)
                    && self.taint[0].not_tally.contains(&src)
                    && {
                        let info = s(&["TSRANK.INFO", &src]);
                        let answer = self.run_faults(std::slice::from_ref(&info));
                        matches!(&answer[0], Value::ServerError(e) if e.code() == "WRONGTYPE")
                    };
                let cmd = s(&["RENAME", &src, &dst]);
                let out = self.run_faults(std::slice::from_ref(&cmd));
                self.note(format!("{} -> {}", show(&cmd), show_value(&out[0])));
                if out[0] == v_ok() && src != dst {
                    let (s_obj, d_obj) = (owner(&src).to_string(), owner(&dst).to_string());
                    if src == s_obj {
                        self.main_key_left.insert(s_obj.clone(), Instant::now());
                        // The whole object moves, with what the fuzzer did to it. A
                        // leaderboard destination that was not a board may still hold the
                        // fuzzer's junk at `dst|meta` (tally then removes the moved board
                        // whole and the junk stays): it stays "not a board".
                        let keep_not_tally =
                            self.family == Family::Rank && self.taint[0].not_tally.contains(&d_obj);
                        let t = &mut self.taint[0];
                        for set in [&mut t.not_tally, &mut t.edited, &mut t.overflowing] {
                            let had = set.remove(&s_obj);
                            set.remove(&d_obj);
                            if had {
                                set.insert(d_obj.clone());
                            }
                        }
                        if keep_not_tally {
                            t.not_tally.insert(d_obj.clone());
                        }
                        if junk_meta_stays {
                            t.not_tally.insert(s_obj.clone());
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
                // Which objects' own keys exist before: eviction may take one, and a key
                // created at that name right after is not that object (as after a DEL).
                let mains: Vec<String> = self
                    .names
                    .iter()
                    .filter(|n| owner(n) == n.as_str())
                    .cloned()
                    .collect();
                let exists = |faults: &mut Self| -> Vec<Value> {
                    let cmds: Vec<Vec<String>> = mains.iter().map(|k| s(&["EXISTS", k])).collect();
                    faults.run_faults(&cmds)
                };
                let before = exists(self);
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
                let after = exists(self);
                for ((key, was), is) in mains.iter().zip(&before).zip(&after) {
                    if *was == Value::Int(1) && *is == Value::Int(0) {
                        self.main_key_left.insert(key.clone(), Instant::now());
                    }
                }
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
                // The board's parts go once the pause is over.
                self.main_key_left.insert(key, Instant::now());
            }
            "active-expire" => {
                let on = if rng.chance(50) { "1" } else { "0" };
                let cmd = s(&["DEBUG", "SET-ACTIVE-EXPIRE", on]);
                let out = self.run_faults(std::slice::from_ref(&cmd));
                self.note(format!("{} -> {}", show(&cmd), show_value(&out[0])));
            }
            "flushall" => {
                // SYNC frees every key inside the command (the server's own work, which
                // the latency rule leaves out); ASYNC leaves only tally's part in it.
                let how = if rng.chance(50) { "SYNC" } else { "ASYNC" };
                let out = self.run_faults(&[s(&["FLUSHALL", how])]);
                self.note(format!("FLUSHALL {how} -> {}", show_value(&out[0])));
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
}
