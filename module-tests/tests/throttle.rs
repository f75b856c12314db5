//! TSTHROTTLE.ALLOW (GCRA) and CL.THROTTLE: random traffic over real time checked against
//! a model of the contract at both ends of each request (the server's clock read just
//! before and just after it, in one pipeline), exact replies with `AT`, errors that change
//! nothing (a native string that is not a TAT is WRONGTYPE), the stored key and its expiry,
//! replication, AOF and RDB reloads, cluster routing, keyspace events, and redis-cell's
//! documented replies.

use module_tests::*;
use std::time::Duration;

const NS_PER_MS: i128 = 1_000_000;

/// The contract's arithmetic, in ns: `T`, `tau`, and a request's reply at `now`.
#[derive(Clone, Copy, Debug)]
struct Rate {
    interval: i128,
    tau: i128,
    limit: i64,
}

impl Rate {
    fn new(max_burst: i64, count: i64, period_ms: i64) -> Rate {
        let interval = i128::from(period_ms) * NS_PER_MS / i128::from(count);
        Rate {
            interval,
            tau: interval * i128::from(max_burst + 1),
            limit: max_burst + 1,
        }
    }
}

fn ceil_ms(ns: i128) -> i64 {
    if ns < 0 {
        -1
    } else {
        ((ns + NS_PER_MS - 1) / NS_PER_MS) as i64
    }
}

/// `(reply, new TAT if written)` of a request of `q` at `now` against `stored`.
fn model(rate: &Rate, stored: Option<i128>, now: i128, q: i64) -> ([i64; 5], Option<i128>) {
    let tat = stored.map_or(now, |s| s.max(now));
    let increment = rate.interval * i128::from(q);
    let new = tat + increment;
    let (allowed, retry, reset) = if new - rate.tau > now {
        let retry = if increment <= rate.tau {
            new - rate.tau - now
        } else {
            -1
        };
        (false, retry, tat - now)
    } else {
        (true, 0, new - now)
    };
    let remaining = ((rate.tau - reset).div_euclid(rate.interval)).max(0) as i64;
    let reply = [
        i64::from(allowed),
        rate.limit,
        remaining,
        ceil_ms(retry),
        ceil_ms(reset),
    ];
    (reply, (allowed && q > 0).then_some(new))
}

fn ints(v: &Value) -> Vec<i64> {
    match v {
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::Int(n) => *n,
                other => panic!("not an integer: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

fn time_ns(v: &Value) -> i128 {
    match v {
        Value::Array(parts) if parts.len() == 2 => {
            let s: i128 = value_text(&parts[0]).unwrap().parse().unwrap();
            let us: i128 = value_text(&parts[1]).unwrap().parse().unwrap();
            (s * 1_000_000 + us) * 1000
        }
        other => panic!("TIME gave {other:?}"),
    }
}

fn get_i128(srv: &Server, key: &str) -> Option<i128> {
    value_text(&srv.cmd_value(&["GET", key])).map(|t| t.parse().unwrap())
}

fn pexpiretime(srv: &Server, key: &str) -> i64 {
    match srv.cmd_value(&["PEXPIRETIME", key]) {
        Value::Int(n) => n,
        other => panic!("PEXPIRETIME gave {other:?}"),
    }
}

per_server!(one_kind_at_a_time: replies_follow_the_model_at_both_ends_of_each_request);
/// Random requests on a few subjects at a few rates (a million per second among them),
/// without `AT`: each reply equals the model's at the server's clock just before or just
/// after it (bracketing TIMEs in one pipeline), every field between the two; the stored
/// TAT is one the model allows and the key expires at it.
fn replies_follow_the_model_at_both_ends_of_each_request(kind: &ServerKind) {
    let srv = Server::start(kind);
    let mut conn = srv.conn();
    let mut rng = Rng(41);
    // (max_burst, count, period): 5 per 100 ms, bursts of 3; a million per second,
    // bursts of 999; 1 per 50 ms, no burst; 7 per second, bursts of 20.
    let rates = [
        (3, 5, "100ms", 100),
        (999, 1_000_000, "1s", 1000),
        (0, 1, "50ms", 50),
        (20, 7, "1s", 1000),
    ];
    let mut stored: Vec<Option<i128>> = vec![None; rates.len()];
    let (mut allowed, mut refused) = (0, 0);
    for step in 0..1500 {
        let i = rng.below(rates.len() as i64) as usize;
        let (burst, count, period, period_ms) = rates[i];
        let rate = Rate::new(burst, count, period_ms);
        let q = *rng.pick(&[0, 1, 1, 1, 2, 3, burst + 2]);
        let key = format!("t{i}");
        // The request, then the key it left, in one transaction (which judges expiry at
        // its start: a state of a millisecond is still there to read), between two TIMEs.
        let replies: Vec<Value> = redis::pipe()
            .cmd("TIME")
            .cmd("MULTI")
            .cmd("TSTHROTTLE.ALLOW")
            .arg(&key)
            .arg(burst)
            .arg(count)
            .arg(period)
            .arg("QUANTITY")
            .arg(q)
            .cmd("GET")
            .arg(&key)
            .cmd("PEXPIRETIME")
            .arg(&key)
            .cmd("EXEC")
            .cmd("TIME")
            .query(&mut conn)
            .expect("pipeline");
        let (before, after) = (time_ns(&replies[0]), time_ns(&replies[6]));
        let Value::Array(exec) = &replies[5] else {
            panic!("EXEC gave {:?}", replies[5]);
        };
        let [reply, value, expiry] = &exec[..] else {
            panic!("EXEC gave {exec:?}");
        };
        let got = ints(reply);
        let old = stored[i];
        let (lo, _) = model(&rate, old, before, q);
        let (hi, _) = model(&rate, old, after, q);
        let at = format!(
            "{}: step {step} key {key} q {q}: {got:?} vs {lo:?}..{hi:?}",
            kind.name
        );
        assert!(got[0] == lo[0] || got[0] == hi[0], "{at}");
        assert_eq!(got[1], rate.limit, "{at}");
        for f in 2..5 {
            let (a, b) = (lo[f].min(hi[f]), lo[f].max(hi[f]));
            if got[0] == lo[0] && lo[0] == hi[0] {
                assert!(a <= got[f] && got[f] <= b, "{at}: field {f}");
            }
        }
        let tat = value_text(value).map(|t| t.parse::<i128>().unwrap());
        if got[0] == 1 && q > 0 {
            allowed += 1;
            let tat = tat.expect("written");
            // Allowed at the server's now, somewhere between the two TIMEs: the TAT moved
            // from there (or from the old TAT, if later) by the request's increment.
            let increment = rate.interval * i128::from(q);
            let from = |now: i128| old.map_or(now, |tat| tat.max(now)) + increment;
            let (a, b) = (from(before), from(after));
            assert!(a <= tat && tat <= b, "{at}: TAT {tat} not in {a}..{b}");
            // The key expires at its TAT, ms rounded up.
            let expires = match expiry {
                Value::Int(n) => *n,
                other => panic!("{other:?}"),
            };
            assert_eq!(
                i128::from(expires),
                (tat + NS_PER_MS - 1) / NS_PER_MS,
                "{at}"
            );
            stored[i] = Some(tat);
        } else {
            if got[0] == 0 {
                refused += 1;
            }
            // Nothing written: the key holds what it held (or expired meanwhile).
            assert!(
                tat.is_none() || tat == stored[i],
                "{at}: {tat:?} vs {:?}",
                stored[i]
            );
        }
        if step % 100 == 99 {
            std::thread::sleep(Duration::from_millis(rng.below(60) as u64));
        }
    }
    assert!(
        allowed > 300 && refused > 100,
        "{allowed} allowed, {refused} refused"
    );
    srv.assert_alive();
}

per_server!(replies_with_at_are_exact);
/// With `AT` in the past the reply is exact, in RESP2 and RESP3; the key lives as long
/// after the server's now as its TAT is after the request's time; `QUANTITY 0` writes
/// nothing; `-1` for a quantity above the burst.
fn replies_with_at_are_exact(kind: &ServerKind) {
    let srv = Server::start(kind);
    let t = server_ms(&srv) - 10_000;
    let allow = |at: i64, q: i64| {
        ints(&srv.cmd_value(&[
            "TSTHROTTLE.ALLOW",
            "u",
            "15",
            "30",
            "1m",
            "QUANTITY",
            &q.to_string(),
            "AT",
            &at.to_string(),
        ]))
    };
    // 30 per minute, bursts of 15: T = 2 s, tau = 32 s.
    assert_eq!(allow(t, 1), vec![1, 16, 15, 0, 2000]);
    assert_eq!(get_i128(&srv, "u"), Some(i128::from(t + 2000) * NS_PER_MS));
    // The key expires 2 s after the server's now (its TAT is 2 s after `AT`), in ms
    // rounded up (`server_ms` rounds down).
    let after = server_ms(&srv);
    let expires = pexpiretime(&srv, "u");
    assert!(
        (after + 1_000..=after + 2_001).contains(&expires),
        "{expires} vs now {after}"
    );
    assert_eq!(allow(t, 14), vec![1, 16, 1, 0, 30_000]);
    assert_eq!(allow(t, 0), vec![1, 16, 1, 0, 30_000]);
    assert_eq!(allow(t, 2), vec![0, 16, 1, 2_000, 30_000]);
    assert_eq!(allow(t + 500, 2), vec![0, 16, 1, 1_500, 29_500]);
    assert_eq!(allow(t, 17), vec![0, 16, 1, -1, 30_000]);
    assert_eq!(allow(t + 3_000, 2), vec![1, 16, 0, 0, 31_000]);
    // RESP3: the same array.
    let v = srv.cmd_value_resp3(&[
        "TSTHROTTLE.ALLOW",
        "v",
        "0",
        "1",
        "1s",
        "AT",
        &t.to_string(),
    ]);
    assert_eq!(ints(&v), vec![1, 1, 0, 0, 1000]);
    // A check of a missing key creates nothing.
    assert_eq!(
        ints(&srv.cmd_value(&["TSTHROTTLE.ALLOW", "w", "2", "1", "1s", "QUANTITY", "0"])),
        vec![1, 3, 3, 0, 0]
    );
    assert_eq!(srv.cmd_value(&["EXISTS", "w"]), v_int(0));
    // A sub-millisecond interval: a million per second. The state lives a millisecond, so
    // the two requests go in one transaction (which judges expiry at one time).
    let at = t.to_string();
    let allow_million = |q: &str| {
        let mut cmd = redis::cmd("TSTHROTTLE.ALLOW");
        cmd.arg("m")
            .arg(999)
            .arg(1_000_000)
            .arg("1s")
            .arg("QUANTITY")
            .arg(q)
            .arg("AT")
            .arg(&at);
        cmd
    };
    let replies: Vec<Value> = redis::pipe()
        .atomic()
        .add_command(allow_million("1000"))
        .add_command(allow_million("1"))
        .query(&mut srv.conn())
        .expect("transaction");
    assert_eq!(ints(&replies[0]), vec![1, 1000, 0, 0, 1]);
    assert_eq!(ints(&replies[1]), vec![0, 1000, 0, 1, 1]);
    srv.assert_alive();
}

per_server!(errors_change_nothing);
/// Every bad argument and every key that is not a throttle's: the contract's error, and
/// the key (a throttle's, a garbage string, a hash) as it was, its TTL too.
fn errors_change_nothing(kind: &ServerKind) {
    let srv = Server::start(kind);
    // 10 per hour: the key lives 6 minutes, however slow the machine.
    srv.cmd_value(&["TSTHROTTLE.ALLOW", "k", "5", "10", "1h"]);
    srv.cmd_value(&["SET", "garbage", "not a time"]);
    srv.cmd_value(&["SET", "negative", "-5", "PX", "100000"]);
    srv.cmd_value(&["HSET", "h", "f", "1"]);
    let snapshot = |srv: &Server| {
        ["k", "garbage", "negative", "h"]
            .map(|k| (srv.cmd_value(&["DUMP", k]), pexpiretime(srv, k)))
    };
    let before = snapshot(&srv);
    let future = (server_ms(&srv) + 3_600_000).to_string();
    let (not_int, syntax, wrongtype) = (
        "ERR value is not an integer or out of range",
        "ERR syntax error",
        "WRONGTYPE Operation against a key holding the wrong kind of value",
    );
    // (arguments after the command name, error)
    let cases: [(&[&str], &str); 20] = [
        (
            &["k", "5", "10"],
            "ERR wrong number of arguments for 'tsthrottle.allow' command",
        ),
        (&["k", "x", "10", "1s"], &format!("{not_int}: max_burst is an integer >= 0")),
        (&["k", "-1", "10", "1s"], &format!("{not_int}: max_burst is an integer >= 0")),
        (&["k", "5", "0", "1s"], &format!("{not_int}: count is an integer >= 1")),
        (&["k", "5", "10", "0"], "ERR invalid duration '0': TSTHROTTLE.ALLOW's period needs a unit (60s, 1m, 500ms): CL.THROTTLE takes seconds, so a bare number here is refused rather than read as ms"),
        (&["k", "5", "10", "1x"], "ERR invalid duration '1x': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)"),
        (&["k", "5", "10", "1s", "QUANTITY", "-1"], &format!("{not_int}: QUANTITY is an integer >= 0")),
        (&["k", "5", "10", "1s", "QUANTITY"], syntax),
        (
            &["k", "5", "10", "1s", "QUANTITY", "1", "QUANTITY", "1"],
            syntax,
        ),
        (&["k", "5", "10", "1s", "BOGUS", "1"], syntax),
        (
            &["k", "5", "10", "1s", "AT", "-1"],
            "ERR timestamp is outside the kept range",
        ),
        (
            &["k", "5", "10", "1s", "AT", &future],
            "ERR timestamp is too far in the future",
        ),
        (&["k", "5", "2000000", "1ms"], "ERR rate is too high"),
        (&["k", "0", "1", "10000y"], "ERR invalid duration '10000y': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)"),
        (&["k", "0", "1", "3650000d"], "ERR burst window is too long"),
        (
            &["k", "9223372036854775807", "1", "1s"],
            "ERR burst window is too long",
        ),
        (&["garbage", "5", "10", "1s"], wrongtype),
        (&["garbage", "5", "10", "1s", "QUANTITY", "0"], wrongtype),
        (&["negative", "5", "10", "1s"], wrongtype),
        (&["h", "5", "10", "1s"], wrongtype),
    ];
    for (args, error) in cases {
        let mut full = vec!["TSTHROTTLE.ALLOW"];
        full.extend(args);
        assert_eq!(
            srv.cmd_value(&full),
            v_err(error),
            "{}: {args:?}",
            kind.name
        );
    }
    assert_eq!(snapshot(&srv), before);
    // CL.THROTTLE is not registered without throttle-cell-compat.
    let v = srv.cmd_value(&["CL.THROTTLE", "k", "1", "1", "1"]);
    assert!(
        error_text(&v).is_some_and(|e| e.contains("unknown command")),
        "{v:?}"
    );
    srv.assert_alive();
}

per_server!(a_native_edit_is_a_state_or_wrongtype);
/// A user's native SET of a TAT is a state like tally's own (a redis-cell key too: its
/// value is the same integer); a SET of anything else is WRONGTYPE and changes nothing;
/// an integer-encoded value reads as its digits.
fn a_native_edit_is_a_state_or_wrongtype(kind: &ServerKind) {
    let srv = Server::start(kind);
    let now = server_ms(&srv);
    let tat = i128::from(now + 60_000) * NS_PER_MS;
    srv.cmd_value(&["SET", "s", &tat.to_string()]);
    assert_eq!(srv.cmd_value(&["OBJECT", "ENCODING", "s"]), v_bulk("int"));
    let v = ints(&srv.cmd_value(&[
        "TSTHROTTLE.ALLOW",
        "s",
        "0",
        "1",
        "1s",
        "AT",
        &now.to_string(),
    ]));
    assert_eq!(v, vec![0, 1, 0, 60_000, 60_000]);
    assert_eq!(get_i128(&srv, "s"), Some(tat));
    for garbage in ["", "1.5", "0x10", " 1", "99999999999999999999", "tat"] {
        srv.cmd_value(&["SET", "g", garbage]);
        let v = srv.cmd_value(&["TSTHROTTLE.ALLOW", "g", "5", "10", "1s"]);
        assert!(is_wrongtype(&v), "{garbage:?}: {v:?}");
        assert_eq!(
            value_text(&srv.cmd_value(&["GET", "g"])).as_deref(),
            Some(garbage)
        );
        assert_eq!(srv.cmd_value(&["PTTL", "g"]), v_int(-1));
    }
    srv.assert_alive();
}

per_server!(writes_replicate_and_reload_exactly);
/// Random traffic (with and without `AT`): the replica holds the primary's values and
/// expiry times; then an AOF reload and an RDB reload hold them too.
fn writes_replicate_and_reload_exactly(kind: &ServerKind) {
    let mut primary = Server::start_with(kind, ServerOptions::new().config("appendonly", "yes"));
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    let mut rng = Rng(7);
    let now = server_ms(&primary);
    let keys: Vec<String> = (0..8).map(|i| format!("r{i}")).collect();
    for _ in 0..400 {
        let key = rng.pick(&keys);
        let q = rng.below(4).to_string();
        let burst = rng.below(5).to_string();
        // One per minute: every write leaves a key that lives a minute or more.
        let mut args = vec!["TSTHROTTLE.ALLOW", key, &burst, "10", "10m", "QUANTITY", &q];
        let at = (now - rng.below(30_000)).to_string();
        if rng.chance(50) {
            args.extend(["AT", &at]);
        }
        primary.cmd_value(&args);
    }
    let state = |srv: &Server| {
        keys.iter()
            .map(|k| (get_i128(srv, k), pexpiretime(srv, k)))
            .collect::<Vec<_>>()
    };
    wait_replica_synced(&primary, &replica);
    let on_primary = state(&primary);
    assert!(
        on_primary.iter().filter(|(v, _)| v.is_some()).count() >= 6,
        "{on_primary:?}"
    );
    assert_eq!(state(&replica), on_primary, "{}: replica", kind.name);
    assert_replica_equal(&primary, &replica, "after TSTHROTTLE traffic");
    primary.restart();
    assert_eq!(state(&primary), on_primary, "{}: AOF reload", kind.name);
    // The replica, on its own, through an RDB.
    let mut replica = replica;
    replica.cmd_value(&["REPLICAOF", "NO", "ONE"]);
    replica.restart_saving();
    assert_eq!(state(&replica), on_primary, "{}: RDB reload", kind.name);
    primary.assert_alive();
}

per_server!(writes_fire_one_event_and_routes_by_key);
/// One `tsthrottle.allow` event (class `$`) per write, none for refusals, checks or
/// errors; the key spec names the one key.
fn writes_fire_one_event_and_routes_by_key(kind: &ServerKind) {
    let srv = Server::start(kind);
    srv.cmd_value(&["CONFIG", "SET", "notify-keyspace-events", "E$"]);
    let events = events_during(&srv, "__keyevent@0__:*", || {
        srv.cmd_value(&["TSTHROTTLE.ALLOW", "e", "0", "1", "1m"]);
        srv.cmd_value(&["TSTHROTTLE.ALLOW", "e", "0", "1", "1m"]);
        srv.cmd_value(&["TSTHROTTLE.ALLOW", "e", "0", "1", "1m", "QUANTITY", "0"]);
        srv.cmd_value(&["TSTHROTTLE.ALLOW", "e", "x", "1", "1m"]);
        srv.cmd_value(&["TSTHROTTLE.ALLOW", "f", "0", "1", "1m"]);
    });
    assert_eq!(
        events,
        vec![
            (
                "__keyevent@0__:tsthrottle.allow".to_string(),
                "e".to_string()
            ),
            (
                "__keyevent@0__:tsthrottle.allow".to_string(),
                "f".to_string()
            ),
        ]
    );
    assert_eq!(
        srv.cmd_value(&[
            "COMMAND",
            "GETKEYS",
            "TSTHROTTLE.ALLOW",
            "k",
            "1",
            "2",
            "3s",
            "AT",
            "5"
        ]),
        v_bulks(&["k"])
    );
    srv.assert_alive();
}

per_server!(cluster_routes_each_subject_to_its_node);
/// In a cluster each subject's key is served by its slot's node, through a cluster
/// client, and a node refuses a key of another's slot with MOVED.
fn cluster_routes_each_subject_to_its_node(kind: &ServerKind) {
    let cluster = start_cluster(kind, 3, 0);
    let mut client = cluster.cluster_client();
    for i in 0..30 {
        let key = format!("user:{i}");
        let v: Vec<i64> = redis::cmd("TSTHROTTLE.ALLOW")
            .arg(&key)
            .arg(1)
            .arg(1)
            .arg("1m")
            .query(&mut client)
            .expect("allow");
        assert_eq!(v[..3], [1, 2, 1]);
        let node = cluster.node_for_key(&key);
        assert!(value_text(&node.cmd_value(&["GET", &key])).is_some());
        let other = cluster
            .primaries()
            .into_iter()
            .find(|n| n.port() != node.port())
            .unwrap();
        let v = other.cmd_value(&["TSTHROTTLE.ALLOW", &key, "1", "1", "1m"]);
        assert!(
            error_text(&v).is_some_and(|e| e.starts_with("MOVED")),
            "{v:?}"
        );
    }
}

fn cell_server(kind: &ServerKind) -> Server {
    Server::start_with(
        kind,
        ServerOptions::new().module_args(&["throttle-cell-compat", "yes"]),
    )
}

per_server!(cl_throttle_answers_as_redis_cell_documents);
/// Loaded with `throttle-cell-compat yes`: CL.THROTTLE answers redis-cell's README example
/// and the first rows of its own unit test (5 per second as max_burst 4, count 1, period
/// 1), on the keys TSTHROTTLE.ALLOW reads.
fn cl_throttle_answers_as_redis_cell_documents(kind: &ServerKind) {
    let srv = cell_server(kind);
    assert_eq!(
        srv.cmd_value(&["CONFIG", "GET", "tally.throttle-cell-compat"]),
        v_bulks(&["tally.throttle-cell-compat", "yes"])
    );
    let throttle = |args: &[&str]| {
        let mut full = vec!["CL.THROTTLE"];
        full.extend(args);
        ints(&srv.cmd_value(&full))
    };
    assert_eq!(
        throttle(&["user123", "15", "30", "60"]),
        vec![0, 16, 15, -1, 2]
    );
    assert_eq!(
        throttle(&["user123", "15", "30", "60", "1"]),
        vec![0, 16, 14, -1, 4]
    );
    // A quantity above the burst: limited, never fits.
    assert_eq!(throttle(&["big", "4", "1", "1", "6"]), vec![1, 5, 5, -1, 0]);
    // Within one second (each reset rounds up to whole seconds).
    for k in 1..=5 {
        assert_eq!(throttle(&["five", "4", "1", "1"]), vec![0, 5, 5 - k, -1, k]);
    }
    assert_eq!(throttle(&["five", "4", "1", "1"]), vec![1, 5, 0, 1, 5]);
    // The same key read by TSTHROTTLE.ALLOW (5 per second, bursts of 4): full.
    let v = ints(&srv.cmd_value(&["TSTHROTTLE.ALLOW", "five", "4", "1", "1s", "QUANTITY", "0"]));
    assert_eq!(v[..3], [1, 5, 0]);
    // Replies as redis-cell's, errors as tally's.
    assert_eq!(
        srv.cmd_value(&["CL.THROTTLE", "x", "1", "1", "1", "1", "extra"]),
        v_err("ERR wrong number of arguments for 'cl.throttle' command")
    );
    assert_eq!(
        srv.cmd_value(&["CL.THROTTLE", "x", "1", "0", "1"]),
        v_err("ERR value is not an integer or out of range")
    );
    srv.cmd_value(&["SET", "g", "abc"]);
    assert!(is_wrongtype(&srv.cmd_value(&[
        "CL.THROTTLE",
        "g",
        "1",
        "1",
        "1"
    ])));
    assert!(
        error_text(&srv.cmd_value(&["CONFIG", "SET", "tally.throttle-cell-compat", "no"]))
            .is_some()
    );
    srv.assert_alive();
}

per_server!(cell_compat_fails_the_load_when_the_name_is_taken);
/// With another module's CL.THROTTLE loaded (a stub standing for redis-cell,
/// `fixtures/cl_throttle_stub.c`, built here with cc), loading tally with
/// `throttle-cell-compat yes` fails and the log says why; tally then loads without it,
/// and the other module's command is untouched.
fn cell_compat_fails_the_load_when_the_name_is_taken(kind: &ServerKind) {
    let srv = Server::start_without_module(kind);
    let stub = srv.dir().join("cl_throttle_stub.so");
    let source = repo_root().join("module-tests/fixtures/cl_throttle_stub.c");
    let built = std::process::Command::new("cc")
        .args(["-O1", "-fPIC", "-shared", "-o"])
        .arg(&stub)
        .arg(&source)
        .status()
        .expect("cc runs");
    assert!(built.success(), "cc {}", source.display());
    assert_eq!(
        srv.cmd_value(&["MODULE", "LOAD", &stub.to_string_lossy()]),
        v_ok()
    );
    let tally = module_path().to_string_lossy().into_owned();
    let v = srv.cmd_value(&["MODULE", "LOAD", &tally, "throttle-cell-compat", "yes"]);
    assert!(error_text(&v).is_some(), "{}: {v:?}", kind.name);
    let log = std::fs::read_to_string(srv.log_path()).unwrap_or_default();
    assert!(
        log.contains("the name CL.THROTTLE is taken (is redis-cell loaded?"),
        "{}: {}",
        kind.name,
        srv.log_tail(10)
    );
    assert_eq!(srv.cmd_value(&["MODULE", "LOAD", &tally]), v_ok());
    assert_eq!(
        srv.cmd_value(&["CL.THROTTLE", "a", "1", "1", "1"]),
        v_int(42)
    );
    assert_eq!(
        ints(&srv.cmd_value(&["TSTHROTTLE.ALLOW", "a", "1", "1", "1s"]))[..2],
        [1, 2]
    );
    srv.assert_alive();
}
