//! The first read after a native edit stays within 10 ms: a user's `HDEL` of one field,
//! or a `RENAME` of the key away and back, drops the object's read cache, and the read
//! that follows must not pay for a rebuild of it in proportion to the object.
//!
//! * Counters near the 10000 slots a counter keeps (three resolutions of 3300, the large
//!   fault fuzzer's counter; never mirrored), at the largest size a mirror holds (4096) and
//!   at the largest one mirrored where the field-TTL question names every field (1024, on
//!   Valkey): the first `TSCOUNTER.SUM`, `LIMIT` and `RANGE` after each edit.
//! * A statistics object stored with `KEEP 10000` by an earlier version, ~10k periods (20k
//!   fields): the first `STATS.GET`, `QUANTILE` and `CDF` after each edit (on Valkey the
//!   question whether a hash has field TTLs may name every field: it must not).
//!
//! Each read is timed by the server's own clock (`usec` of its line in `INFO commandstats`
//! after `CONFIG RESETSTAT`), and its reply is checked against a model of what was written.
//! The edit is made again before each of a few tries and the best try counts, so a moment
//! without CPU on a loaded machine does not fail the test while a read that rebuilds its
//! cache in proportion to the object's size always does. The objects are built with
//! explicit timestamps in a second or two, so the full sizes run in `make test`.

use std::collections::BTreeMap;

use module_tests::*;

/// The rule: no command holds the server longer than this.
const MAX_COMMAND_US: f64 = 10_000.0;

/// Edits (each followed by its first read) per timed read; the best counts.
const TRIES: usize = 3;

/// The native edits that drop a read cache.
#[derive(Clone, Copy, Debug)]
enum Edit {
    /// `HDEL` of one field tally wrote.
    Hdel,
    /// `RENAME` away and back.
    Rename,
}

fn rename_away_and_back(srv: &Server, key: &str) {
    let away = format!("{key}.away");
    assert_eq!(srv.cmd_value(&["RENAME", key, &away]), v_ok());
    assert_eq!(srv.cmd_value(&["RENAME", &away, key]), v_ok());
}

/// Runs `read` (one command, whose reply it checks) as the first command after `edit`,
/// [`TRIES`] times, and asserts the best server time is within [`MAX_COMMAND_US`].
fn assert_first_read_fast(
    srv: &Server,
    what: &str,
    command: &str,
    mut edit: impl FnMut(),
    mut read: impl FnMut(),
) {
    let mut best = f64::MAX;
    for _ in 0..TRIES {
        edit();
        assert_eq!(srv.cmd_value(&["CONFIG", "RESETSTAT"]), v_ok());
        read();
        best = best.min(usec_per_call(srv, command));
    }
    println!("{}: {what}: {best} us", srv.kind().name);
    assert!(
        best <= MAX_COMMAND_US,
        "{}: {what} took {best} us at the server",
        srv.kind().name
    );
}

// ----------------------------------------------------------------------------- counters

/// A counter under test and the model of its finest resolution (`1s`): slot index ->
/// count. Every read asks that resolution, `AT` the last second filled.
struct CounterCase {
    key: &'static str,
    /// Slot index of the last second filled (the reads' `AT`).
    last: i64,
    /// Seconds filled.
    seconds: i64,
    counts: BTreeMap<i64, i64>,
}

impl CounterCase {
    /// `key` with `resolutions` (the first one `1s`), one event in each of the latest
    /// `seconds` seconds.
    fn fill(srv: &Server, key: &'static str, resolutions: &[&str], seconds: i64) -> Self {
        let mut create = vec!["TSCOUNTER.CREATE", key, "RESOLUTIONS"];
        create.extend(resolutions);
        assert_eq!(srv.cmd_value(&create), v_ok());
        let last = server_ms(srv) / 1000;
        let cmds: Vec<Vec<String>> = (0..seconds)
            .rev()
            .map(|back| {
                let at = ((last - back) * 1000).to_string();
                strings(&["TSCOUNTER.INCRBY", key, "1", "AT", &at])
            })
            .collect();
        let mut conn = srv.conn();
        for chunk in cmds.chunks(2_000) {
            for reply in pipeline(&mut conn, chunk) {
                assert_eq!(reply, v_int(1), "{key}");
            }
        }
        CounterCase {
            key,
            last,
            seconds,
            counts: (last - seconds + 1..=last).map(|i| (i, 1)).collect(),
        }
    }

    fn at(&self) -> String {
        (self.last * 1000).to_string()
    }

    /// The model's sum of the `seconds` latest slots.
    fn sum(&self, seconds: i64) -> i64 {
        self.counts
            .range(self.last - seconds + 1..)
            .map(|(_, c)| c)
            .sum()
    }

    /// The edit, made on the server and in the model. `HDEL` takes a slot of the finest
    /// resolution among the latest `near` seconds, so the reads see it gone.
    fn edit(&mut self, srv: &Server, edit: Edit, near: i64) {
        match edit {
            Edit::Hdel => {
                let index = self
                    .counts
                    .range(self.last - near + 1..self.last)
                    .next_back()
                    .map(|(&i, _)| i)
                    .expect("a slot left to delete");
                let field = format!("1s:{index}");
                assert_eq!(srv.cmd_value(&["HDEL", self.key, &field]), v_int(1));
                self.counts.remove(&index);
            }
            Edit::Rename => rename_away_and_back(srv, self.key),
        }
    }

    /// The first `SUM`, `LIMIT` and `RANGE` after `edit`, each within 10 ms and right.
    fn check_first_reads(&mut self, srv: &Server, edit: Edit) {
        let case = std::cell::RefCell::new(self);
        let key = case.borrow().key;
        // A long window that stays within the kept range while the test runs.
        let long_s = case.borrow().seconds / 2;
        let long = format!("{long_s}s");
        assert_first_read_fast(
            srv,
            &format!("{key}: first SUM 10s 1m {long} after {edit:?}"),
            "tscounter.sum",
            || case.borrow_mut().edit(srv, edit, 60),
            || {
                let c = case.borrow();
                let got = srv.cmd_value(&["TSCOUNTER.SUM", key, "10s", "1m", &long, "AT", &c.at()]);
                let want = Value::Array(vec![
                    v_int(c.sum(10)),
                    v_int(c.sum(60)),
                    v_int(c.sum(long_s)),
                ]);
                assert_eq!(got, want, "{key} after {edit:?}");
            },
        );
        assert_first_read_fast(
            srv,
            &format!("{key}: first LIMIT 1 10s 1000000 after {edit:?}"),
            "tscounter.limit",
            || case.borrow_mut().edit(srv, edit, 60),
            || {
                let mut c = case.borrow_mut();
                let (at, last) = (c.at(), c.last);
                let got =
                    srv.cmd_value(&["TSCOUNTER.LIMIT", key, "1", "10s", "1000000", "AT", &at]);
                *c.counts.entry(last).or_insert(0) += 1;
                let want = Value::Array(vec![
                    v_int(1),
                    v_int(0),
                    Value::Array(vec![v_int(c.sum(10))]),
                ]);
                assert_eq!(got, want, "{key} after {edit:?}");
            },
        );
        assert_first_read_fast(
            srv,
            &format!("{key}: first RANGE 1s of a minute after {edit:?}"),
            "tscounter.range",
            || case.borrow_mut().edit(srv, edit, 60),
            || {
                let c = case.borrow();
                let (from, to) = ((c.last - 59) * 1000, c.last * 1000);
                let got = srv.cmd_value(&[
                    "TSCOUNTER.RANGE",
                    key,
                    "1s",
                    "FROM",
                    &from.to_string(),
                    "TO",
                    &to.to_string(),
                ]);
                let want = Value::Array(
                    c.counts
                        .range(c.last - 59..=c.last)
                        .map(|(&i, &n)| Value::Array(vec![v_int(i * 1000), v_int(n)]))
                        .collect(),
                );
                assert_eq!(got, want, "{key} after {edit:?}");
            },
        );
    }
}

per_server!(the_first_counter_read_after_a_native_edit_answers_in_10ms);
/// A counter of ~9900 slots (the large fuzz's), one of 4090 (the largest mirrored) and one
/// of 1020 (the largest mirrored on Valkey): after a native `HDEL` of one slot field, and
/// after a `RENAME` away and back, the first `SUM`, `LIMIT` and `RANGE` answer within
/// 10 ms and count exactly what the hash holds.
fn the_first_counter_read_after_a_native_edit_answers_in_10ms(kind: &ServerKind) {
    let srv = Server::start(kind);
    let cases: [(&str, &[&str], i64); 3] = [
        ("big", &["1s:3300", "1001ms:3300", "1003ms:3300"], 3_300),
        ("mirrored", &["1s:4096"], 4_090),
        ("asked", &["1s:1022"], 1_020),
    ];
    for (key, resolutions, seconds) in cases {
        let mut case = CounterCase::fill(&srv, key, resolutions, seconds);
        // Read once, so whatever cache the counter gets exists before the first edit.
        let sum = srv.cmd_value(&["TSCOUNTER.SUM", key, "1m", "AT", &case.at()]);
        assert_eq!(sum, v_int(60), "{key}");
        for edit in [Edit::Hdel, Edit::Rename] {
            case.check_first_reads(&srv, edit);
        }
    }
    srv.assert_alive();
}

// -------------------------------------------------------------------------------- STATS

/// Periods of the statistics object (`PERIOD 1h`, stored with `KEEP 10000`): each holds
/// one value, `1 + back % 1000` for the period `back` hours before the current one.
const STATS_PERIODS: i64 = 9_990;
const HOUR: i64 = 3_600_000;

/// A window's expected `count`, `sum`, `min` and `max`.
type Expected = (i64, f64, f64, f64);
/// A check of a reply against the window it should describe.
type Check<'a> = &'a dyn Fn(&Value, Expected);

/// The expected `count`, `sum`, `min` and `max` of the window of the `periods` latest
/// periods at hour index `now_hour`, for an object filled at hour index `filled_hour`.
fn stats_model(filled_hour: i64, now_hour: i64, periods: i64) -> Option<Expected> {
    let values: Vec<f64> = (now_hour - periods + 1..=now_hour)
        .filter(|h| *h <= filled_hour && filled_hour - *h < STATS_PERIODS)
        .map(|h| (1 + (filled_hour - h) % 1000) as f64)
        .collect();
    if values.is_empty() {
        return None;
    }
    let sum: f64 = values.iter().sum();
    let min = values.iter().copied().fold(f64::MAX, f64::min);
    let max = values.iter().copied().fold(f64::MIN, f64::max);
    Some((values.len() as i64, sum, min, max))
}

fn number(v: &Value) -> f64 {
    value_text(v)
        .and_then(|t| t.parse().ok())
        .or(match v {
            Value::Int(n) => Some(*n as f64),
            Value::Double(d) => Some(*d),
            _ => None,
        })
        .unwrap_or_else(|| panic!("not a number: {v:?}"))
}

per_server!(the_first_stats_read_of_a_big_object_answers_in_10ms);
/// A statistics object stored with `KEEP 10000` by an earlier version (~10k periods, 20k
/// fields): after a native `HDEL` of an old period, and after a `RENAME` away and back, the
/// first `STATS.GET` (current period and a 10-period window), `QUANTILE` and `CDF` answer
/// within 10 ms and agree with what was written.
fn the_first_stats_read_of_a_big_object_answers_in_10ms(kind: &ServerKind) {
    let srv = Server::start(kind);
    // Created at today's limits, then given the settings an earlier version stored.
    assert_eq!(
        srv.cmd_value(&["STATS.CREATE", "s", "PERIOD", "1h"]),
        v_ok()
    );
    assert_eq!(
        srv.cmd_value(&["HSET", "s", "_tally", "stats 1h 10000"]),
        v_int(0)
    );
    let filled_hour = server_ms(&srv) / HOUR;
    let cmds: Vec<Vec<String>> = (0..STATS_PERIODS)
        .rev()
        .map(|back| {
            let value = (1 + back % 1000).to_string();
            let at = ((filled_hour - back) * HOUR).to_string();
            strings(&["STATS.ADD", "s", &value, "AT", &at])
        })
        .collect();
    let mut conn = srv.conn();
    for chunk in cmds.chunks(2_000) {
        for reply in pipeline(&mut conn, chunk) {
            assert_eq!(reply, v_int(1));
        }
    }
    assert_eq!(srv.cmd_value(&["HLEN", "s"]), v_int(2 * STATS_PERIODS + 1));

    // The HDEL edits delete old periods, outside every window read.
    let mut deleted = 0;
    let mut edit = |edit: Edit| match edit {
        Edit::Hdel => {
            let hour = filled_hour - 5_000 - deleted;
            let start = hour * HOUR;
            let (m, q) = (format!("{start}:m"), format!("{start}:q"));
            assert_eq!(srv.cmd_value(&["HDEL", "s", &m, &q]), v_int(2));
            deleted += 1;
        }
        Edit::Rename => rename_away_and_back(&srv, "s"),
    };
    // Each read is checked against the model at the hour it ran in (asked again when the
    // hour turned meanwhile).
    let checked = |args: &[&str], periods: i64, check: Check| loop {
        let before = server_ms(&srv) / HOUR;
        let reply = srv.cmd_value(args);
        if server_ms(&srv) / HOUR != before {
            continue;
        }
        match stats_model(filled_hour, before, periods) {
            Some(want) => check(&reply, want),
            None => assert_eq!(reply, Value::Nil, "{args:?}"),
        }
        return;
    };
    let get_matches = |reply: &Value, (count, sum, min, max): Expected| {
        let fields: BTreeMap<String, Value> = map_pairs(reply).into_iter().collect();
        assert_eq!(fields.get("count"), Some(&v_int(count)), "{reply:?}");
        assert_eq!(number(&fields["sum"]), sum, "{reply:?}");
        assert_eq!(number(&fields["min"]), min, "{reply:?}");
        assert_eq!(number(&fields["max"]), max, "{reply:?}");
    };
    let within_sketch = |reply: &Value, (_, _, min, max): Expected| {
        let Value::Array(values) = reply else {
            panic!("{reply:?}")
        };
        for v in values {
            let v = number(v);
            assert!(v >= min * 0.99 && v <= max * 1.01, "{reply:?}");
        }
    };
    for kind_of_edit in [Edit::Hdel, Edit::Rename] {
        let reads: [(&str, &[&str], i64, Check); 4] = [
            ("stats.get", &["STATS.GET", "s"], 1, &get_matches),
            (
                "stats.get",
                &["STATS.GET", "s", "WINDOW", "10h"],
                10,
                &get_matches,
            ),
            (
                "stats.quantile",
                &["STATS.QUANTILE", "s", "0.5", "0.99", "WINDOW", "10h"],
                10,
                &within_sketch,
            ),
            (
                "stats.cdf",
                &["STATS.CDF", "s", "1000000", "WINDOW", "10h"],
                10,
                &|r, _| {
                    assert!(
                        matches!(r, Value::Array(v) if v.len() == 1 && number(&v[0]) == 1.0),
                        "{r:?}"
                    )
                },
            ),
        ];
        for (command, args, periods, check) in reads {
            assert_first_read_fast(
                &srv,
                &format!("first {args:?} after {kind_of_edit:?}"),
                command,
                || edit(kind_of_edit),
                || checked(args, periods, check),
            );
        }
    }
    srv.assert_alive();
}
