//! Upgrade: counters written by the release before packed runs (an RDB its build saved,
//! `module-tests/fixtures/counters-0.1.0.rdb`) load, answer what their writes say (a model
//! at the test's own time: slots kept then, and only those), keep working, and get their
//! old runs packed by the timer without a reply changing.
//!
//! The fixture is written by `write_the_upgrade_fixture` (ignored; run it with
//! `TALLY_MODULE` naming that release's build, on a server clock past [`T_FIX`]) from the
//! writes [`fixture_writes`] lists, which the test replays into its model.

use super::*;

/// The time the fixture's writes end at (2026-12-07, a whole hour).
const T_FIX: i64 = 1_796_680_800_000;
const HOUR: i64 = 3_600_000;
const DAY: i64 = 86_400_000;

const FIXTURE: &str = "module-tests/fixtures/counters-0.1.0.rdb";

/// The fixture's counters and their resolutions.
const COUNTERS: [(&str, &str); 4] = [
    ("v1:hours", "1h:9000 1d:1000"),
    ("v1:days", "1d:3650"),
    ("v1:minutes", "1m:5000 1h:5000"),
    ("v1:default", DEFAULT_RES),
];

/// Every write of the fixture, `(key, ts, increment)`, oldest spans first.
fn fixture_writes() -> Vec<(&'static str, i64, i64)> {
    let mut rng = Rng(2026);
    let mut out = Vec::new();
    let by = |rng: &mut Rng| {
        if rng.below(25) == 0 {
            -(1 + rng.below(40))
        } else {
            1 + rng.below(5000)
        }
    };
    for _ in 0..600 {
        out.push(("v1:hours", T_FIX - rng.below(8500 * HOUR), by(&mut rng)));
    }
    for _ in 0..200 {
        out.push(("v1:days", T_FIX - rng.below(3000 * DAY), by(&mut rng)));
    }
    for _ in 0..300 {
        out.push(("v1:minutes", T_FIX - rng.below(3 * DAY), by(&mut rng)));
    }
    for _ in 0..200 {
        out.push(("v1:default", T_FIX - rng.below(100 * DAY), by(&mut rng)));
    }
    out
}

/// The model: per `(res_ms, index)` the sum of the writes it was kept for (every write of
/// the fixture was kept by every resolution whose span reached back to it at `T_FIX`).
fn model(key: &str) -> (Vec<Res>, BTreeMap<(i64, i64), i64>) {
    let rs = res_list(COUNTERS.iter().find(|(k, _)| *k == key).unwrap().1);
    let mut slots: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    for (k, ts, by) in fixture_writes() {
        if k != key {
            continue;
        }
        for r in &rs {
            if slot(ts, r.ms) >= first_kept(T_FIX, r) {
                *slots.entry((r.ms, slot(ts, r.ms))).or_default() += by;
            }
        }
    }
    slots.retain(|_, c| *c != 0);
    (rs, slots)
}

/// What each read of `key` answers at `now` by the model.
fn expected(key: &str, now: i64) -> Vec<Value> {
    let (rs, slots) = model(key);
    let kept = |r: &Res, index: i64| index >= first_kept(now, r) && index <= slot(now, r.ms);
    let windows = [HOUR, DAY, 7 * DAY, 30 * DAY, 365 * DAY];
    let sums: Vec<Value> = windows
        .iter()
        .map(|&w| match rs.iter().find(|r| r.span() >= w) {
            None => v_err("ERR a window longer than any resolution keeps"),
            Some(r) => {
                let hi = slot(now, r.ms);
                let lo = hi - (w + r.ms - 1) / r.ms + 1;
                v_int(
                    slots
                        .range((r.ms, lo)..=(r.ms, hi))
                        .filter(|(&(_, i), _)| kept(r, i))
                        .map(|(_, c)| c)
                        .sum(),
                )
            }
        })
        .collect();
    let mut out = sums;
    for r in &rs {
        out.push(v_pairs(
            &slots
                .range((r.ms, i64::MIN)..=(r.ms, i64::MAX))
                .filter(|(&(_, i), _)| kept(r, i))
                .map(|(&(_, i), &c)| (i * r.ms, c))
                .collect::<Vec<_>>(),
        ));
    }
    let stored: Vec<i64> = rs
        .iter()
        .flat_map(|r| {
            slots
                .range((r.ms, i64::MIN)..=(r.ms, i64::MAX))
                .filter(move |(&(_, i), _)| kept(r, i))
                .map(move |(&(_, i), _)| i * r.ms)
        })
        .collect();
    out.push(v_int(stored.len() as i64));
    out.push(stored.iter().min().map_or(v_nil(), |&s| v_int(s)));
    out.push(stored.iter().max().map_or(v_nil(), |&s| v_int(s)));
    out
}

/// The same reads as the server answers them at `now`.
fn answered(srv: &Server, key: &str, now: i64) -> Vec<Value> {
    let (rs, _) = model(key);
    let at = now.to_string();
    let mut out: Vec<Value> = ["1h", "1d", "7d", "30d", "365d"]
        .iter()
        .map(|w| {
            let v = srv.cmd_value(&["TSCOUNTER.SUM", key, w, "AT", &at]);
            match error_text(&v) {
                Some(e) if e.contains("is longer than any resolution keeps") => {
                    v_err("ERR a window longer than any resolution keeps")
                }
                _ => v,
            }
        })
        .collect();
    for r in &rs {
        out.push(srv.cmd_value(&["TSCOUNTER.RANGE", key, &label(r.ms), "TO", &at]));
    }
    let info = map_pairs(&srv.cmd_value(&["TSCOUNTER.INFO", key]));
    for field in ["slots", "first", "last"] {
        out.push(
            info.iter()
                .find(|(k, _)| k == field)
                .map(|(_, v)| v.clone())
                .unwrap_or(v_nil()),
        );
    }
    out
}

/// A time at which no slot of the fixture's resolutions starts or leaves for the next
/// minute (reads at `now` and the server's clock then agree on what is kept).
fn quiet_now(srv: &Server) -> i64 {
    loop {
        let now = server_ms(srv);
        if now.rem_euclid(HOUR) < HOUR - 90_000 {
            return now;
        }
        std::thread::sleep(Duration::from_secs(5));
    }
}

per_server!(counters_of_the_previous_release_load_and_answer_the_same);
fn counters_of_the_previous_release_load_and_answer_the_same(kind: &ServerKind) {
    let k = kind.name.clone();
    let srv = Server::start(kind);
    let fixture = repo_root().join(FIXTURE);
    std::fs::copy(&fixture, srv.dir().join("dump.rdb")).expect("copy the fixture");
    assert_eq!(srv.cmd_value(&["DEBUG", "RELOAD", "NOSAVE"]), v_ok(), "{k}");
    // Slots that left while the fixture waited are never counted; INFO's count follows once
    // the timer has trimmed them.
    let all_answer = || {
        let now = quiet_now(&srv);
        COUNTERS
            .iter()
            .all(|(key, _)| answered(&srv, key, now) == expected(key, now))
    };
    wait_until(Duration::from_secs(30), all_answer);
    let now = quiet_now(&srv);
    for (key, _) in COUNTERS {
        assert_eq!(
            answered(&srv, key, now),
            expected(key, now),
            "{k}: {key} as loaded"
        );
    }
    // The timer packs the old runs of the counter of hours (and trims what has left);
    // every reply stays the same.
    let packed = || {
        hgetall(&srv, "v1:hours")
            .keys()
            .filter(|name| name.starts_with("1h:p"))
            .count()
    };
    assert!(
        wait_until(Duration::from_secs(30), || packed() >= 5),
        "{k}: {} packed runs",
        packed()
    );
    let now = quiet_now(&srv);
    for (key, _) in COUNTERS {
        assert_eq!(
            answered(&srv, key, now),
            expected(key, now),
            "{k}: {key} once packed"
        );
    }
    // They keep working: a write now, and one into a packed run of hours.
    let now = quiet_now(&srv);
    for (key, _) in COUNTERS {
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.INCRBY", key, "7", "AT", &now.to_string()]),
            v_int(7 + model_count(key, now)),
            "{k}: {key}"
        );
    }
    let old = model("v1:hours")
        .1
        .keys()
        .find(|&&(r, i)| r == HOUR && i >= first_kept(now, &res_list("1h:9000")[0]) + 10)
        .map(|&(_, i)| i)
        .unwrap();
    let before = srv.cmd_value(&[
        "TSCOUNTER.SUM",
        "v1:hours",
        "1h",
        "AT",
        &(old * HOUR).to_string(),
    ]);
    let Value::Int(before) = before else {
        panic!("{before:?}")
    };
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.INCRBY",
            "v1:hours",
            "5",
            "AT",
            &(old * HOUR).to_string()
        ]),
        v_int(before + 5),
        "{k}"
    );
    assert!(
        !hgetall(&srv, "v1:hours").contains_key(&format!("1h:{old}")),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["DEBUG", "RELOAD"]), v_ok(), "{k}");
    srv.assert_alive();
}

/// The model's count of the finest slot kept at `now` that contains `now`.
fn model_count(key: &str, now: i64) -> i64 {
    let (rs, slots) = model(key);
    let r = &rs[0];
    slots.get(&(r.ms, slot(now, r.ms))).copied().unwrap_or(0)
}

/// Writes the fixture with the build `TALLY_MODULE` names (the previous release's) on
/// Redis 7.0: `cargo test -p module-tests --test counter write_the_upgrade_fixture --
/// --ignored`.
#[test]
#[ignore]
fn write_the_upgrade_fixture() {
    let kind = server_kinds()
        .into_iter()
        .find(|kind| kind.name == "redis")
        .expect("a redis server kind");
    let srv = Server::start(&kind);
    assert!(server_ms(&srv) >= T_FIX);
    let mut conn = srv.conn();
    let mut cmds = Vec::new();
    for (key, res) in COUNTERS {
        let mut cmd = strings(&["TSCOUNTER.CREATE", key, "RESOLUTIONS"]);
        cmd.extend(res.split(' ').map(String::from));
        cmds.push(cmd);
    }
    for (key, ts, by) in fixture_writes() {
        cmds.push(strings(&[
            "TSCOUNTER.INCRBY",
            key,
            &by.to_string(),
            "AT",
            &ts.to_string(),
        ]));
    }
    for reply in pipeline(&mut conn, &cmds) {
        assert!(error_text(&reply).is_none(), "{reply:?}");
    }
    assert_eq!(srv.cmd_value(&["SAVE"]), v_ok());
    std::fs::copy(srv.dir().join("dump.rdb"), repo_root().join(FIXTURE)).expect("write it");
}
