//! Exact replies of MLIMIT and LIMIT ... DETAILS in RESP2 and RESP3, and the errors, none
//! of which writes anything.

use super::*;

per_server!(mlimit_allows_refuses_and_waits_exactly);
/// A per-user, per-IP and global limit in one call, with exact replies in both protocols:
/// the user's limit refuses a call, and nothing is spent on the other keys.
fn mlimit_allows_refuses_and_waits_exactly(kind: &ServerKind) {
    let srv = Server::start(kind);
    let now = server_ms(&srv);
    // Half a second into a second that began a whole second ago: known slot edges.
    let t = (now / 1000 - 1) * 1000 + 500;
    let at = t.to_string();
    let call = |increment: &str, details: bool| {
        let mut args = vec![
            "TSCOUNTER.MLIMIT",
            "3",
            "user:1",
            "ip:9",
            "global",
            increment,
            "2",
            "5s",
            "2",
            "1m",
            "10",
            "1",
            "5s",
            "5",
            "1",
            "1m",
            "1000",
            "AT",
            &at,
        ];
        if details {
            args.push("DETAILS");
        }
        srv.cmd_value(&args)
    };
    let sums = |user: [i64; 2], ip: i64, global: i64| {
        v_arr(vec![
            v_arr(vec![v_int(user[0]), v_int(user[1])]),
            v_arr(vec![v_int(ip)]),
            v_arr(vec![v_int(global)]),
        ])
    };
    assert_eq!(
        call("1", false),
        v_arr(vec![v_int(1), v_int(0), sums([1, 1], 1, 1)])
    );
    // With DETAILS: [sum, remaining, reset_ms]. The 5 s window's increments leave when
    // its newest slot is 5 slots past t's (4.5 s from t); the minute's when the 1 s
    // slots have moved 60 past t's (59.5 s).
    assert_eq!(
        call("1", true),
        v_arr(vec![
            v_int(1),
            v_int(0),
            v_arr(vec![
                v_arr(vec![
                    v_arr(vec![v_int(2), v_int(0), v_int(4_500)]),
                    v_arr(vec![v_int(2), v_int(8), v_int(59_500)]),
                ]),
                v_arr(vec![v_arr(vec![v_int(2), v_int(3), v_int(4_500)])]),
                v_arr(vec![v_arr(vec![v_int(2), v_int(998), v_int(59_500)])]),
            ])
        ])
    );
    // The user's 5 s window is full: refused, 4.5 s to wait, nothing spent anywhere.
    assert_eq!(
        call("1", false),
        v_arr(vec![v_int(0), v_int(4_500), sums([2, 2], 2, 2)])
    );
    for key in ["ip:9", "global", "user:1"] {
        assert_eq!(
            srv.cmd_value(&["TSCOUNTER.SUM", key, "1m", "AT", &at]),
            v_int(2),
            "{key}"
        );
    }
    // Above a max: -1. A check (increment 0) writes nothing and creates nothing.
    assert_eq!(
        call("3", false),
        v_arr(vec![v_int(0), v_int(-1), sums([2, 2], 2, 2)])
    );
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.MLIMIT",
            "2",
            "global",
            "nobody",
            "0",
            "1",
            "1m",
            "5",
            "1",
            "1m",
            "5",
            "AT",
            &at
        ]),
        v_arr(vec![
            v_int(1),
            v_int(0),
            v_arr(vec![v_arr(vec![v_int(2)]), v_arr(vec![v_int(0)])])
        ])
    );
    assert!(!exists(&srv, "nobody"));
    // RESP3 answers the same shape.
    assert_eq!(
        srv.cmd_value_resp3(&[
            "TSCOUNTER.MLIMIT",
            "1",
            "global",
            "0",
            "1",
            "1m",
            "5",
            "AT",
            &at,
            "DETAILS"
        ]),
        v_arr(vec![
            v_int(1),
            v_int(0),
            v_arr(vec![v_arr(vec![v_arr(vec![
                v_int(2),
                v_int(3),
                v_int(59_500)
            ])])])
        ])
    );
    // LIMIT's DETAILS: the same element for one key, before or after AT.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.LIMIT", "user:1", "0", "DETAILS", "5s", "2"]),
        v_err("ERR syntax error")
    );
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.LIMIT",
            "user:1",
            "0",
            "5s",
            "2",
            "DETAILS",
            "AT",
            &at
        ]),
        v_arr(vec![
            v_int(1),
            v_int(0),
            v_arr(vec![v_arr(vec![v_int(2), v_int(0), v_int(4_500)])])
        ])
    );
    srv.assert_alive();
}

per_server!(mlimit_rejects_bad_arguments_and_writes_nothing);
/// The contract's errors; none of them writes anything, to any key.
fn mlimit_rejects_bad_arguments_and_writes_nothing(kind: &ServerKind) {
    let srv = Server::start(kind);
    assert_eq!(srv.cmd_value(&["SET", "str", "x"]), v_ok());
    assert_eq!(srv.cmd_value(&["HSET", "plainhash", "f", "v"]), v_int(1));
    let not_int = v_err("ERR value is not an integer or out of range");
    let syntax = v_err("ERR syntax error");
    let wrongtype = v_err("WRONGTYPE Operation against a key holding the wrong kind of value");
    let cases: Vec<(Vec<&str>, Value)> = vec![
        (
            vec!["TSCOUNTER.MLIMIT", "x", "a", "1", "1", "5s", "5"],
            not_int.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "0", "a", "1", "1", "5s", "5"],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "-1", "a", "1", "1", "5s", "5"],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "17", "a", "1", "1", "5s", "5"],
            syntax.clone(),
        ),
        // More keys than arguments.
        (
            vec!["TSCOUNTER.MLIMIT", "9", "a", "1", "1", "5s", "5"],
            syntax.clone(),
        ),
        // A key named twice.
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "2",
                "a",
                "a",
                "1",
                "1",
                "5s",
                "5",
                "1",
                "5s",
                "5",
            ],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "-1", "1", "5s", "5"],
            v_err("ERR value is not an integer or out of range: increment is an integer >= 0"),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "y", "1", "5s", "5"],
            v_err("ERR value is not an integer or out of range: increment is an integer >= 0"),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "0", "5s", "5"],
            v_err("ERR value is not an integer or out of range: npairs (the window/max pairs of the next key) is an integer from 1 to 16"),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "17", "5s", "5"],
            v_err("ERR value is not an integer or out of range: npairs (the window/max pairs of the next key) is an integer from 1 to 16"),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "z", "5s", "5"],
            v_err("ERR value is not an integer or out of range: npairs (the window/max pairs of the next key) is an integer from 1 to 16"),
        ),
        // npairs larger than the pairs given; a pair without its max.
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "2", "5s", "5"],
            syntax.clone(),
        ),
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "1",
                "a",
                "1",
                "2",
                "5s",
                "5",
                "1m",
                "AT",
                "5",
            ],
            syntax.clone(),
        ),
        // The second key's pairs missing.
        (
            vec!["TSCOUNTER.MLIMIT", "2", "a", "b", "1", "1", "5s", "5"],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "1", "5s", "-5"],
            v_err("ERR value is not an integer or out of range: max (of a window max pair) is an integer >= 0"),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "1", "5x", "5"],
            v_err("ERR invalid duration '5x': a duration is a positive integer of milliseconds or with a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)"),
        ),
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "2",
                "a",
                "b",
                "1",
                "1",
                "5s",
                "5",
                "1",
                "1000d",
                "5",
            ],
            v_err("ERR window '1000d' is longer than any resolution keeps (at most 120d)"),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "1", "5s", "5", "NOPE"],
            syntax.clone(),
        ),
        (
            vec!["TSCOUNTER.MLIMIT", "1", "a", "1", "1", "5s", "5", "AT"],
            syntax.clone(),
        ),
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "1",
                "a",
                "1",
                "1",
                "5s",
                "5",
                "AT",
                "1",
                "AT",
                "1",
            ],
            syntax.clone(),
        ),
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "1",
                "a",
                "1",
                "1",
                "5s",
                "5",
                "DETAILS",
                "DETAILS",
            ],
            syntax.clone(),
        ),
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "1",
                "a",
                "1",
                "1",
                "5s",
                "5",
                "AT",
                "-5",
            ],
            v_err("ERR timestamp is outside the kept range"),
        ),
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "1",
                "a",
                "1",
                "1",
                "5s",
                "5",
                "AT",
                "99999999999999",
            ],
            v_err("ERR timestamp is too far in the future"),
        ),
        // An allowed call at a time no resolution of `a` keeps: INCRBY's error.
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "2",
                "b",
                "a",
                "1",
                "1",
                "5s",
                "5",
                "1",
                "5s",
                "5",
                "AT",
                "1000",
            ],
            v_err("ERR timestamp is outside the kept range"),
        ),
        // Another type on the last key: refused before the first key is written.
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "2",
                "a",
                "str",
                "1",
                "1",
                "5s",
                "5",
                "1",
                "5s",
                "5",
            ],
            wrongtype.clone(),
        ),
        (
            vec![
                "TSCOUNTER.MLIMIT",
                "3",
                "a",
                "b",
                "plainhash",
                "1",
                "1",
                "5s",
                "5",
                "1",
                "5s",
                "5",
                "1",
                "5s",
                "5",
            ],
            wrongtype.clone(),
        ),
    ];
    for (args, want) in cases {
        assert_eq!(srv.cmd_value(&args), want, "{args:?}");
    }
    let arity = srv.cmd_value(&["TSCOUNTER.MLIMIT", "1", "a", "1", "1", "5s"]);
    assert_eq!(
        error_text(&arity).map(|t| t.to_lowercase()),
        Some("err wrong number of arguments for 'tscounter.mlimit' command".into())
    );
    for key in ["a", "b"] {
        assert!(!exists(&srv, key), "no failed call creates {key}");
    }
    // A count that an increment would take past i64 on the second key: refused before
    // the first key is written. `full` keeps 10 s of seconds and an hour of minutes; the
    // minute of `t` holds i64::MAX - 1, written 45 s before `t`, where no 5 s window sees
    // it (the seconds have gone).
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "full", "RESOLUTIONS", "1s:10", "1m:60"]),
        v_ok()
    );
    let minute = (server_ms(&srv) - 120_000) / 60_000 * 60_000;
    let t = (minute + 50_000).to_string();
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.INCRBY",
            "full",
            "9223372036854775806",
            "AT",
            &(minute + 5_000).to_string()
        ]),
        v_int(9_223_372_036_854_775_806)
    );
    let before = hgetall(&srv, "full");
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.MLIMIT",
            "2",
            "a",
            "full",
            "2",
            "1",
            "5s",
            "5",
            "1",
            "5s",
            "5",
            "AT",
            &t
        ]),
        v_err("ERR increment or decrement would overflow")
    );
    assert!(!exists(&srv, "a"));
    assert_eq!(hgetall(&srv, "full"), before);
    srv.assert_alive();
}
