//! Keyspace notifications of the counter and stats families: one event per write command
//! that changes a key, named and classed as the contract says, none for refusals, errors
//! or reads; and tally's own events never drop its read caches (reads stay fresh and fast
//! with `notify-keyspace-events KA`, on a replica too).
//!
//! `every_write_command_fires_its_event`: one case per write command of the module's
//! table (`write_cases`, keyed by command name), and a check that every write command the
//! server lists has one.

use module_tests::*;

/// The `(key, event)` pairs of every keyspace event of db 0 published while `work` runs
/// (the subscription is made first, and stragglers are waited for briefly).
fn events_during(srv: &Server, work: impl FnOnce()) -> Vec<(String, String)> {
    module_tests::events_during(srv, "__keyspace@0__:*", work)
        .into_iter()
        .map(|(channel, event)| {
            (
                channel.trim_start_matches("__keyspace@0__:").to_string(),
                event,
            )
        })
        .collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(k, e)| (k.to_string(), e.to_string()))
        .collect()
}

/// The writes of the counter and stats families, then refusals, errors and reads.
fn traffic(srv: &Server) {
    for args in [
        vec!["TSCOUNTER.CREATE", "c"],
        vec!["TSCOUNTER.INCRBY", "c", "3"],
        vec!["TSCOUNTER.INCR", "c"],
        vec!["TSCOUNTER.INCRBY", "c", "0"],
        vec!["TSCOUNTER.LIMIT", "c", "1", "1m", "100"],
        vec!["TSCOUNTER.LIMIT", "c", "1", "1m", "1"],
        vec!["TSCOUNTER.INCRBY", "c", "x"],
        vec!["TSCOUNTER.SUM", "c", "1m"],
        vec!["STATS.CREATE", "s"],
        vec!["STATS.ADD", "s", "1.5", "2.5"],
        vec!["STATS.ADD", "s", "4", "REPORT", "slowest", "/home"],
        vec!["STATS.ADD", "s", "nan"],
        vec!["STATS.GET", "s"],
    ] {
        srv.cmd_value(&args);
    }
}

per_server!(write_commands_fire_one_event_each_in_their_class);
fn write_commands_fire_one_event_each_in_their_class(kind: &ServerKind) {
    let srv = Server::start(kind);
    let all = pairs(&[
        ("c", "tscounter.create"),
        ("c", "tscounter.incrby"),
        ("c", "tscounter.incrby"),
        ("c", "tscounter.limit"),
        ("s", "stats.create"),
        ("s", "stats.add"),
        ("s", "stats.add"),
        ("slowest", "zadd"),
    ]);
    for (flags, want) in [
        ("KA", all.clone()),
        (
            "Kh",
            all.iter().filter(|(_, e)| e != "zadd").cloned().collect(),
        ),
        (
            "Kz",
            all.iter().filter(|(_, e)| e == "zadd").cloned().collect(),
        ),
    ] {
        assert_eq!(srv.cmd_value(&["FLUSHALL"]), v_ok());
        assert_eq!(
            srv.cmd_value(&["CONFIG", "SET", "notify-keyspace-events", flags]),
            v_ok()
        );
        let received = events_during(&srv, || traffic(&srv));
        assert_eq!(received, want, "notify-keyspace-events {flags}");
    }
}

per_server!(own_events_keep_read_caches_fresh_and_fast_on_primary_and_replica);
/// With every event published, a hot counter is still mirrored (its writes do not drop
/// its cache), and reads on the primary and a replica agree with the writes.
fn own_events_keep_read_caches_fresh_and_fast_on_primary_and_replica(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    for srv in [&primary, &replica] {
        assert_eq!(
            srv.cmd_value(&["CONFIG", "SET", "notify-keyspace-events", "KA"]),
            v_ok()
        );
    }
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    assert_eq!(
        primary.cmd_value(&["TSCOUNTER.CREATE", "hot", "RESOLUTIONS", "1h:48", "1d:30"]),
        v_ok()
    );
    let now = server_ms(&primary);
    let mut total = 0;
    for i in 0..60 {
        let at = (now - i * 3_600_000).to_string();
        assert!(matches!(
            primary.cmd_value(&["TSCOUNTER.INCRBY", "hot", "2", "AT", &at]),
            Value::Int(_)
        ));
        total += 2;
        // Reads between writes: each one sees every write so far.
        if i % 10 == 0 {
            let want = if i < 48 { total } else { 96 };
            assert_eq!(
                primary.cmd_value(&["TSCOUNTER.SUM", "hot", "48h"]),
                v_int(want.min(96)),
                "after {i} writes"
            );
        }
    }
    // The counter is mirrored, and stays so across more writes with events on.
    let mirrored = |srv: &Server| info_i64(srv, "tally", "tally_mirrored_slots");
    assert!(mirrored(&primary) > 0, "the hot counter has a read mirror");
    for _ in 0..5 {
        primary.cmd_value(&["TSCOUNTER.INCR", "hot"]);
    }
    assert!(
        mirrored(&primary) > 0,
        "tally's own tscounter.incrby events must not drop the mirror"
    );
    assert_eq!(
        primary.cmd_value(&["TSCOUNTER.SUM", "hot", "30d"]),
        v_int(125)
    );
    // The replica applies HSET effects, whose native events drop its mirrors: its reads
    // stay fresh.
    assert_replica_equal(&primary, &replica, "after hot writes");
    for window in ["1h", "48h", "30d"] {
        let args = ["TSCOUNTER.SUM", "hot", window];
        assert_eq!(
            replica.cmd_value(&args),
            primary.cmd_value(&args),
            "{window}"
        );
    }
    primary.cmd_value(&["TSCOUNTER.INCRBY", "hot", "10"]);
    wait_replica_synced(&primary, &replica);
    assert_eq!(
        replica.cmd_value(&["TSCOUNTER.SUM", "hot", "1h"]),
        primary.cmd_value(&["TSCOUNTER.SUM", "hot", "1h"])
    );
}

// ====================================================== one case per write command

/// One write command's case: `setup` runs first (before the subscription), then `writes`
/// (each answering exactly its reply), then `silent` (refused or changing nothing, any
/// reply); exactly `events` fire, as (key, event, class letter of
/// `notify-keyspace-events`), in order.
struct WriteCase {
    command: &'static str,
    setup: Vec<Vec<&'static str>>,
    writes: Vec<(Vec<&'static str>, Value)>,
    silent: Vec<Vec<&'static str>>,
    events: Vec<(&'static str, &'static str, char)>,
}

/// An array of integers.
fn v_ints(items: &[i64]) -> Value {
    v_arr(items.iter().map(|i| v_int(*i)).collect())
}

/// A case per write command of the module, keyed by its name. Replies: LIMIT and MLIMIT
/// answer allowed, retry-after and each window's count; STATS.ADD the values in the
/// current period; TSTHROTTLE.ALLOW allowed, limit,
/// remaining, retry-after and reset (ms).
fn write_cases() -> Vec<WriteCase> {
    vec![
        WriteCase {
            command: "TSCOUNTER.CREATE",
            setup: vec![],
            writes: vec![(vec!["TSCOUNTER.CREATE", "c"], v_ok())],
            silent: vec![
                vec!["TSCOUNTER.CREATE", "c"],
                vec!["TSCOUNTER.CREATE", "c2", "RESOLUTIONS", "x"],
            ],
            events: vec![("c", "tscounter.create", 'h')],
        },
        WriteCase {
            command: "TSCOUNTER.INCRBY",
            setup: vec![],
            writes: vec![
                (vec!["TSCOUNTER.INCRBY", "c", "3"], v_int(3)),
                (vec!["TSCOUNTER.INCRBY", "c", "-1"], v_int(2)),
            ],
            silent: vec![
                vec!["TSCOUNTER.INCRBY", "c", "0"],
                vec!["TSCOUNTER.INCRBY", "c", "x"],
                vec!["TSCOUNTER.INCRBY", "c", "1", "AT", "1000"],
            ],
            events: vec![
                ("c", "tscounter.incrby", 'h'),
                ("c", "tscounter.incrby", 'h'),
            ],
        },
        WriteCase {
            command: "TSCOUNTER.INCR",
            setup: vec![vec!["TSCOUNTER.CREATE", "c"]],
            writes: vec![(vec!["TSCOUNTER.INCR", "c"], v_int(1))],
            silent: vec![
                vec!["TSCOUNTER.INCR", "c", "AT", "x"],
                vec!["TSCOUNTER.INCR", "c", "AT", "1000"],
            ],
            events: vec![("c", "tscounter.incrby", 'h')],
        },
        WriteCase {
            command: "TSCOUNTER.LIMIT",
            setup: vec![vec!["TSCOUNTER.CREATE", "c"]],
            // Allowed, no retry, the count of each window after it.
            writes: vec![(
                vec!["TSCOUNTER.LIMIT", "c", "1", "1m", "1"],
                v_arr(vec![v_int(1), v_int(0), v_arr(vec![v_int(1)])]),
            )],
            silent: vec![
                vec!["TSCOUNTER.LIMIT", "c", "1", "1m", "1"],
                vec!["TSCOUNTER.LIMIT", "c", "1", "1m"],
            ],
            events: vec![("c", "tscounter.limit", 'h')],
        },
        WriteCase {
            command: "TSCOUNTER.MLIMIT",
            setup: vec![vec!["TSCOUNTER.INCRBY", "b", "5"]],
            writes: vec![(
                vec![
                    "TSCOUNTER.MLIMIT",
                    "2",
                    "a",
                    "b",
                    "1",
                    "1",
                    "1m",
                    "10",
                    "1",
                    "1m",
                    "6",
                ],
                v_arr(vec![
                    v_int(1),
                    v_int(0),
                    v_arr(vec![v_ints(&[1]), v_ints(&[6])]),
                ]),
            )],
            silent: vec![vec![
                "TSCOUNTER.MLIMIT",
                "2",
                "a",
                "b",
                "1",
                "1",
                "1m",
                "10",
                "1",
                "1m",
                "6",
            ]],
            events: vec![("a", "tscounter.limit", 'h'), ("b", "tscounter.limit", 'h')],
        },
        WriteCase {
            command: "TSRANK.CREATE",
            setup: vec![],
            writes: vec![(
                vec!["TSRANK.CREATE", "lb", "WINDOW", "1h", "SLOT", "1m"],
                v_ok(),
            )],
            silent: vec![
                vec!["TSRANK.CREATE", "lb"],
                vec!["TSRANK.CREATE", "lb2", "WINDOW", "90m", "SLOT", "1h"],
            ],
            events: vec![("lb", "tsrank.create", 'z')],
        },
        WriteCase {
            command: "TSRANK.INCRBY",
            setup: vec![],
            writes: vec![(
                vec!["TSRANK.INCRBY", "lb", "3", "a", "2", "b"],
                v_arr(vec![v_int(3), v_int(2)]),
            )],
            silent: vec![
                vec!["TSRANK.INCRBY", "lb", "0", "a"],
                vec!["TSRANK.INCRBY", "lb", "x", "a"],
            ],
            events: vec![("lb", "tsrank.incrby", 'z')],
        },
        WriteCase {
            command: "TSRANK.REM",
            setup: vec![vec!["TSRANK.INCRBY", "lb", "3", "a", "2", "b"]],
            writes: vec![(vec!["TSRANK.REM", "lb", "a", "zz"], v_int(1))],
            silent: vec![
                vec!["TSRANK.REM", "lb", "a"],
                vec!["TSRANK.REM", "none", "a"],
            ],
            events: vec![("lb", "tsrank.rem", 'z')],
        },
        WriteCase {
            command: "STATS.CREATE",
            setup: vec![],
            writes: vec![(vec!["STATS.CREATE", "s"], v_ok())],
            silent: vec![
                vec!["STATS.CREATE", "s"],
                vec!["STATS.CREATE", "s2", "PERIOD", "x"],
            ],
            events: vec![("s", "stats.create", 'h')],
        },
        WriteCase {
            command: "STATS.ADD",
            setup: vec![],
            writes: vec![
                (vec!["STATS.ADD", "s", "1.5", "2.5"], v_int(2)),
                (
                    vec!["STATS.ADD", "s", "4", "REPORT", "slowest", "/home"],
                    v_int(3),
                ),
            ],
            silent: vec![vec!["STATS.ADD", "s", "nan"]],
            events: vec![
                ("s", "stats.add", 'h'),
                ("s", "stats.add", 'h'),
                ("slowest", "zadd", 'z'),
            ],
        },
        WriteCase {
            command: "TSTHROTTLE.ALLOW",
            setup: vec![],
            writes: vec![(
                vec!["TSTHROTTLE.ALLOW", "t", "0", "1", "1m"],
                v_ints(&[1, 1, 0, 0, 60_000]),
            )],
            silent: vec![
                vec!["TSTHROTTLE.ALLOW", "t", "0", "1", "1m"],
                vec!["TSTHROTTLE.ALLOW", "t", "0", "1", "1m", "QUANTITY", "0"],
                vec!["TSTHROTTLE.ALLOW", "t", "x", "1", "1m"],
            ],
            events: vec![("t", "tsthrottle.allow", '$')],
        },
    ]
}

per_server!(every_write_command_fires_its_event);
/// Every write command of the module's table has a case in `write_cases`; each case fires
/// exactly its events with every class on (`KA`) and with only each event's class on,
/// and its refusals and no-ops fire nothing.
fn every_write_command_fires_its_event(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let cases = write_cases();
    assert_cases_cover(
        &srv,
        "notify.rs write_cases",
        &tally_write_commands(&srv),
        cases.iter().map(|c| c.command),
    );
    for case in &cases {
        let name = case.command;
        assert!(
            case.writes.iter().any(|(w, _)| w[0] == name),
            "{k}: the case of {name} does not run it"
        );
        let mut classes: Vec<String> = vec!["KA".into()];
        for (_, _, class) in &case.events {
            let flags = format!("K{class}");
            if !classes.contains(&flags) {
                classes.push(flags);
            }
        }
        for flags in &classes {
            assert_eq!(srv.cmd_value(&["FLUSHALL"]), v_ok(), "{k}");
            assert_eq!(
                srv.cmd_value(&["CONFIG", "SET", "notify-keyspace-events", flags]),
                v_ok(),
                "{k}"
            );
            for args in &case.setup {
                let v = srv.cmd_value(args);
                assert!(error_text(&v).is_none(), "{k}: {name}: {args:?}: {v:?}");
            }
            let received = events_during(&srv, || {
                for (args, want) in &case.writes {
                    assert_eq!(&srv.cmd_value(args), want, "{k}: {name}: {args:?}");
                }
                for args in &case.silent {
                    srv.cmd_value(args);
                }
            });
            let want: Vec<(String, String)> = case
                .events
                .iter()
                .filter(|(_, _, class)| flags == "KA" || flags.ends_with(*class))
                .map(|(key, event, _)| (key.to_string(), event.to_string()))
                .collect();
            assert_eq!(
                received, want,
                "{k}: {name} with notify-keyspace-events {flags}"
            );
        }
    }
    srv.assert_alive();
}
