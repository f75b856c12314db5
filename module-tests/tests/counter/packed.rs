//! Packed runs written by hand (as a user's native edit or a future writer would): a
//! counter whose old slots are packed answers every command exactly as its twin with one
//! field per slot; writes into a packed run go into it; a packed field of garbage holds
//! nothing and the next write into its run replaces it; replica, RDB and AOF reloads hold
//! the same.

use super::*;

const RES: &str = "1m:3000 1h:200";
const MINUTE: i64 = 60_000;
/// Slots a packed field covers.
const RUN: i64 = 240;

fn push_varint(out: &mut Vec<u8>, mut u: u64) {
    loop {
        let byte = (u & 0x7f) as u8;
        u >>= 7;
        if u == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A plain (not zigzag) number of a packed value: a negative one is `80 00` and its
/// magnitude.
fn push_number(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.extend_from_slice(&[0x80, 0x00]);
    }
    push_varint(out, n.unsigned_abs());
}

/// A dense packed value of the run starting at `first`, written by hand from the layout
/// docs/design.md documents.
fn dense_run(first: i64, slots: &BTreeMap<i64, i64>) -> Vec<u8> {
    let mut out = vec![b'd'];
    push_varint(&mut out, RUN as u64);
    push_varint(&mut out, slots.values().filter(|&&c| c != 0).count() as u64);
    push_number(&mut out, slots.values().sum());
    for index in first..first + RUN {
        push_number(&mut out, slots.get(&index).copied().unwrap_or(0));
    }
    out
}

/// The non-zero minutes of the run starting at `first`, by index, as RANGE lists them.
fn run_counts(srv: &Server, key: &str, first: i64) -> BTreeMap<i64, i64> {
    let range = srv.cmd_value(&[
        "TSCOUNTER.RANGE",
        key,
        "1m",
        "FROM",
        &(first * MINUTE).to_string(),
        "TO",
        &((first + RUN) * MINUTE - 1).to_string(),
    ]);
    let Value::Array(pairs) = range else {
        panic!("{range:?}")
    };
    pairs
        .iter()
        .map(|pair| match pair {
            Value::Array(p) => match (&p[0], &p[1]) {
                (Value::Int(start), Value::Int(count)) => (start / MINUTE, *count),
                _ => panic!("{pair:?}"),
            },
            _ => panic!("{pair:?}"),
        })
        .collect()
}

/// Every read of `key` at `t0`, INFO without its memory (the two forms differ in bytes):
/// the same through the read mirrors and from the hash (caches off).
fn reads(srv: &Server, key: &str, t0: i64) -> Vec<Value> {
    let cached = reads_once(srv, key, t0);
    let set = |value: &str| {
        let v = srv.cmd_value(&["CONFIG", "SET", "tally.cache-max-memory", value]);
        assert_eq!(v, v_ok());
    };
    let budget = config_get(srv, "tally.cache-max-memory");
    set("0");
    let uncached = reads_once(srv, key, t0);
    set(&value_text(&budget).unwrap());
    assert_eq!(cached, uncached, "{key}: mirrored and hash reads");
    cached
}

fn reads_once(srv: &Server, key: &str, t0: i64) -> Vec<Value> {
    let at = t0.to_string();
    let from = (t0 - 2800 * MINUTE).to_string();
    let mid = (t0 - 1500 * MINUTE).to_string();
    let mut out = vec![
        srv.cmd_value(&[
            "TSCOUNTER.SUM",
            key,
            "5m",
            "1h",
            "6h",
            "1d",
            "2d",
            "47h",
            "3000m",
            "AT",
            &at,
        ]),
        srv.cmd_value(&[
            "TSCOUNTER.SUM",
            key,
            "1d",
            "AT",
            &(t0 - 700 * MINUTE).to_string(),
        ]),
        srv.cmd_value(&["TSCOUNTER.RANGE", key, "1m", "FROM", &from, "TO", &at]),
        srv.cmd_value(&[
            "TSCOUNTER.RANGE",
            key,
            "1m",
            "FROM",
            &mid,
            "TO",
            &at,
            "EMPTY",
        ]),
        srv.cmd_value(&["TSCOUNTER.RANGE", key, "1h", "FROM", &from, "TO", &at]),
        srv.cmd_value(&["TSCOUNTER.MSUM", "1", key, "1d", "2d", "AT", &at]),
    ];
    let info = srv.cmd_value(&["TSCOUNTER.INFO", key]);
    out.extend(
        map_pairs(&info)
            .into_iter()
            .filter(|(k, _)| k != "memory")
            .map(|(k, v)| v_arr(vec![v_bulk(&k), v])),
    );
    out
}

per_server!(hand_packed_runs_answer_like_slot_fields);
fn hand_packed_runs_answer_like_slot_fields(kind: &ServerKind) {
    let k = kind.name.clone();
    let mut srv = Server::start_with(kind, ServerOptions::new().config("appendonly", "yes"));
    let replica = Server::start(kind);
    replica.replicate_from(&srv);
    wait_replica_synced(&srv, &replica);
    let mut conn = srv.conn();
    // A new run becoming old enough to pack while the test runs would make the timer
    // change the keys between two dumps: start well inside a run.
    let to_next_run = |t: i64| (t / MINUTE / RUN + 1) * RUN * MINUTE - t;
    let t = server_ms(&srv);
    if to_next_run(t) < 120_000 {
        std::thread::sleep(Duration::from_millis(to_next_run(t) as u64 + 1_000));
    }
    let t0 = server_ms(&srv);
    for key in ["plain", "packed"] {
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.CREATE", key, "RESOLUTIONS", "1m:3000", "1h:200"]),
            v_ok(),
            "{k}"
        );
    }
    let _ = RES;
    // The same writes to both: minutes up to 2900 old, counts 1..5000, a few negative.
    let mut rng = Rng(41);
    let mut writes = Vec::new();
    for _ in 0..1500 {
        let ts = t0 - rng.below(2900 * MINUTE);
        let by = if rng.below(20) == 0 {
            -(1 + rng.below(30))
        } else {
            1 + rng.below(5000)
        };
        writes.push((ts, by));
    }
    let cmds = |key: &str, writes: &[(i64, i64)]| -> Vec<Vec<String>> {
        writes
            .iter()
            .map(|(ts, by)| {
                strings(&[
                    "TSCOUNTER.INCRBY",
                    key,
                    &by.to_string(),
                    "AT",
                    &ts.to_string(),
                ])
            })
            .collect()
    };
    let a = pipeline(&mut conn, &cmds("plain", &writes));
    let b = pipeline(&mut conn, &cmds("packed", &writes));
    assert_eq!(a, b, "{k}");
    assert_eq!(reads(&srv, "plain", t0), reads(&srv, "packed", t0), "{k}");

    // The timer packs every old run (older than the two newest) of both, within moments.
    let now_first = (t0 / MINUTE).div_euclid(RUN) * RUN;
    let oldest = (t0 / MINUTE - 2999).div_euclid(RUN) * RUN;
    let unpacked_old = |key: &str| {
        hgetall(&srv, key)
            .keys()
            .filter_map(|name| name.strip_prefix("1m:")?.parse::<i64>().ok())
            .filter(|&index| index.div_euclid(RUN) * RUN <= now_first - 2 * RUN)
            .count()
    };
    assert!(
        wait_until(Duration::from_secs(20), || unpacked_old("plain") == 0
            && unpacked_old("packed") == 0),
        "{k}: old runs left unpacked: {} {}",
        unpacked_old("plain"),
        unpacked_old("packed")
    );
    let packed_runs: Vec<i64> = (0..)
        .map(|i| oldest + i * RUN)
        .take_while(|&first| first <= now_first - 2 * RUN)
        .filter(|first| hgetall(&srv, "plain").contains_key(&format!("1m:p{first}")))
        .collect();
    assert!(packed_runs.len() >= 9, "{k}: {packed_runs:?}");
    let (fields, slots) = (hgetall(&srv, "plain").len(), 1500 * 2);
    assert!(fields < slots / 4, "{k}: {fields} fields");
    assert_eq!(
        reads(&srv, "plain", t0),
        reads(&srv, "packed", t0),
        "{k}: reads of packed runs"
    );
    // By hand: two runs back to one field per slot, and one packed again by the user in
    // another valid shape (every slot's count, dense).
    for (i, &first) in packed_runs.iter().take(3).enumerate() {
        let slots = run_counts(&srv, "plain", first);
        let mut pipe = redis::pipe();
        pipe.atomic();
        if i < 2 {
            pipe.cmd("HDEL").arg("packed").arg(format!("1m:p{first}"));
            for (index, count) in &slots {
                pipe.cmd("HSET")
                    .arg("packed")
                    .arg(format!("1m:{index}"))
                    .arg(count);
            }
        } else {
            pipe.cmd("HSET")
                .arg("packed")
                .arg(format!("1m:p{first}"))
                .arg(dense_run(first, &slots));
        }
        let _: () = pipe.query(&mut conn).unwrap();
    }
    assert_eq!(
        reads(&srv, "plain", t0),
        reads(&srv, "packed", t0),
        "{k}: reads of runs packed by the module, by the user, and unpacked"
    );

    // A write into a run edited by hand: the first write into a run without a packed
    // field (runs 0 and 1) packs the run's slot fields with it, and a write into the
    // user's dense field (run 2) goes into it. Each run is one packed field again.
    // The fields of minutes in the run starting at `first`, packed or not.
    let hand_fields = |key: &str, first: i64| -> BTreeSet<String> {
        hgetall(&srv, key)
            .into_keys()
            .filter(|name| {
                name.strip_prefix("1m:")
                    .map(|index| index.trim_start_matches('p'))
                    .and_then(|index| index.parse::<i64>().ok())
                    .is_some_and(|index| index.div_euclid(RUN) * RUN == first)
            })
            .collect()
    };
    let run0 = run_counts(&srv, "packed", packed_runs[0]);
    let (&kept_index, _) = run0.iter().next().unwrap();
    let new_slot = |first: i64| {
        let counts = run_counts(&srv, "packed", first);
        (first..first + RUN)
            .rev()
            .find(|index| !counts.contains_key(index) && *index > t0 / MINUTE - 2900)
            .unwrap()
    };
    let hand_writes = vec![
        (kept_index * MINUTE + 5, 7),
        (new_slot(packed_runs[1]) * MINUTE, 11),
        (new_slot(packed_runs[2]) * MINUTE, 13),
    ];
    let a = pipeline(&mut conn, &cmds("plain", &hand_writes));
    let b = pipeline(&mut conn, &cmds("packed", &hand_writes));
    assert_eq!(a, b, "{k}: writes into runs edited by hand");
    for first in &packed_runs[..3] {
        assert_eq!(
            hand_fields("packed", *first),
            BTreeSet::from([format!("1m:p{first}")]),
            "{k}: run {first} packed again by the write"
        );
    }
    assert_eq!(
        reads(&srv, "plain", t0),
        reads(&srv, "packed", t0),
        "{k}: reads after writes into runs edited by hand"
    );

    // Writes into packed runs go into them: no field of their own appears.
    let mut old_writes = Vec::new();
    for _ in 0..200 {
        let first = packed_runs[3 + rng.below(packed_runs.len() as i64 - 3) as usize];
        let index = first + rng.below(RUN);
        let ts = index * MINUTE + rng.below(MINUTE);
        if ts > t0 - 2900 * MINUTE {
            old_writes.push((ts, 1 + rng.below(5000)));
        }
    }
    // One write takes a slot back to 0 (it leaves the run).
    let (ts, _) = writes
        .iter()
        .copied()
        .find(|&(ts, _)| packed_runs[3..].contains(&((ts / MINUTE).div_euclid(RUN) * RUN)))
        .unwrap();
    let count = |key: &str| match srv.cmd_value(&[
        "TSCOUNTER.RANGE",
        key,
        "1m",
        "FROM",
        &ts.to_string(),
        "TO",
        &ts.to_string(),
    ]) {
        Value::Array(a) if a.len() == 1 => match &a[0] {
            Value::Array(p) => match p[1] {
                Value::Int(c) => c,
                _ => panic!(),
            },
            _ => panic!(),
        },
        _ => 0,
    };
    let c = count("packed");
    assert_eq!(c, count("plain"), "{k}");
    old_writes.push((ts, -c));
    let a = pipeline(&mut conn, &cmds("plain", &old_writes));
    let b = pipeline(&mut conn, &cmds("packed", &old_writes));
    assert_eq!(a, b, "{k}: INCRBY AT into packed runs");
    let after = hgetall(&srv, "packed");
    for (ts, _) in &old_writes {
        let index = ts / MINUTE;
        assert!(
            !after.contains_key(&format!("1m:{index}")),
            "{k}: a write into a packed run made the field 1m:{index}"
        );
    }
    assert_eq!(
        reads(&srv, "plain", t0),
        reads(&srv, "packed", t0),
        "{k}: reads after writes into packed runs"
    );

    // A user's garbage over a packed field: its run holds nothing (its twin loses the same
    // slots), and the next write into the run replaces it.
    let garbage_run = packed_runs[5];
    srv.cmd_value(&["HSET", "packed", &format!("1m:p{garbage_run}"), "garbage"]);
    srv.cmd_value(&["HDEL", "plain", &format!("1m:p{garbage_run}")]);
    assert_eq!(
        reads(&srv, "plain", t0),
        reads(&srv, "packed", t0),
        "{k}: a garbage packed field holds nothing"
    );
    let ts = ((garbage_run + 7) * MINUTE).to_string();
    let a = srv.cmd_value(&["TSCOUNTER.INCRBY", "plain", "5", "AT", &ts]);
    let b = srv.cmd_value(&["TSCOUNTER.INCRBY", "packed", "5", "AT", &ts]);
    assert_eq!((a, b), (v_int(5), v_int(5)), "{k}");
    let replaced = hgetall(&srv, "packed")
        .get(&format!("1m:p{garbage_run}"))
        .cloned()
        .unwrap_or_default();
    assert!(
        replaced.starts_with('s') || replaced.starts_with('d'),
        "{k}: {replaced:?}"
    );
    assert_eq!(
        reads(&srv, "plain", t0),
        reads(&srv, "packed", t0),
        "{k}: after a write into a garbage run"
    );

    // The current slot, LIMIT and the timer work as before.
    let now = t0.to_string();
    for key in ["plain", "packed"] {
        srv.cmd_value(&["TSCOUNTER.INCRBY", key, "3", "AT", &now]);
    }
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.LIMIT",
            "plain",
            "1",
            "2d",
            "999999999",
            "AT",
            &now
        ]),
        srv.cmd_value(&[
            "TSCOUNTER.LIMIT",
            "packed",
            "1",
            "2d",
            "999999999",
            "AT",
            &now
        ]),
        "{k}"
    );
    let expected = reads(&srv, "plain", t0);
    assert_eq!(reads(&srv, "packed", t0), expected, "{k}");
    drop(conn);

    // The timer has nothing left to do: no old run holds a slot field.
    assert!(
        wait_until(Duration::from_secs(20), || {
            let before = srv.dump_keyspace();
            std::thread::sleep(Duration::from_millis(300));
            unpacked_old("plain") == 0
                && unpacked_old("packed") == 0
                && srv.dump_keyspace() == before
        }),
        "{k}: the timer never settled: {} {}",
        unpacked_old("plain"),
        unpacked_old("packed")
    );
    // The replica holds the same; RDB and AOF reloads answer the same.
    assert_replica_equal(&srv, &replica, "hand-packed counters");
    let packed_before = reads(&srv, "packed", t0);
    assert_eq!(srv.cmd_value(&["DEBUG", "RELOAD"]), v_ok(), "{k}");
    assert_eq!(
        reads(&srv, "packed", t0),
        packed_before,
        "{k}: after DEBUG RELOAD"
    );
    let dump_before = srv.dump_keyspace();
    drop(replica);
    srv.restart();
    assert_eq!(srv.dump_keyspace(), dump_before, "{k}: AOF reload");
    assert_eq!(
        reads(&srv, "packed", t0),
        packed_before,
        "{k}: reads after the AOF reload"
    );
    assert_eq!(reads(&srv, "plain", t0), packed_before, "{k}");
    srv.assert_alive();
}
