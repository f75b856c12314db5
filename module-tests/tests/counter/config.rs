//! Creation and settings: auto-create from the configured resolutions, module arguments
//! setting the configs, and missing keys reading as empty.

use super::*;

per_server!(auto_create_uses_the_configured_resolutions);
fn auto_create_uses_the_configured_resolutions(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        config_get(&srv, "tally.counter-resolutions"),
        v_bulk(DEFAULT_RES),
        "{k}"
    );
    assert_eq!(config_get(&srv, "tally.max-future"), v_bulk("1m"), "{k}");
    let default_pairs: Vec<(i64, i64)> = res_list(DEFAULT_RES)
        .iter()
        .map(|r| (r.ms, r.samples))
        .collect();
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCR", "a"]), v_int(1), "{k}");
    assert_eq!(info_resolutions(&srv, "a"), v_pairs(&default_pairs), "{k}");

    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.counter-resolutions", "1m:5 1s:5"]),
        v_ok(),
        "{k}"
    );
    // Shown in canonical form, finest first.
    assert_eq!(
        config_get(&srv, "tally.counter-resolutions"),
        v_bulk("1s:5 1m:5"),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "b", "4"]),
        v_int(4),
        "{k}"
    );
    assert_eq!(
        info_resolutions(&srv, "b"),
        v_pairs(&[(1000, 5), (60_000, 5)]),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["TSCOUNTER.CREATE", "b2"]), v_ok(), "{k}");
    assert_eq!(
        info_resolutions(&srv, "b2"),
        v_pairs(&[(1000, 5), (60_000, 5)]),
        "{k}"
    );
    assert_eq!(
        hgetall(&srv, b"b").get("_tally").map(String::as_str),
        Some("counter 1s:5 1m:5"),
        "{k}"
    );
    // Existing counters keep their own settings.
    assert_eq!(info_resolutions(&srv, "a"), v_pairs(&default_pairs), "{k}");
    // A missing key is read as an empty counter with the configured resolutions.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "none", "5m"]),
        v_int(0),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "none", "6m"]),
        v_err("ERR window '6m' is longer than any resolution keeps (at most 5m)"),
        "{k}"
    );

    // Invalid values are refused and change nothing.
    for (name, value) in [
        ("tally.counter-resolutions", "1s:0"),
        ("tally.counter-resolutions", "5x:5"),
        ("tally.counter-resolutions", "1s"),
        ("tally.counter-resolutions", ""),
        ("tally.counter-resolutions", "1s:5 1000:5"),
        ("tally.max-future", "5x"),
        ("tally.max-future", "0"),
        ("tally.max-future", "-1s"),
    ] {
        let before = config_get(&srv, name);
        let got = srv.cmd_value(&["CONFIG", "SET", name, value]);
        let text = error_text(&got).unwrap_or_else(|| panic!("{k}: {name}={value:?}: {got:?}"));
        assert!(text.starts_with("ERR"), "{k}: {text}");
        assert_eq!(config_get(&srv, name), before, "{k}: {name}={value:?}");
    }

    // max-future follows its config at once.
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.max-future", "5s"]),
        v_ok()
    );
    let t0 = server_ms(&srv);
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCR", "b", "AT", &(t0 + 30_000).to_string()]),
        v_err(FUTURE),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.max-future", "1m"]),
        v_ok()
    );
    let v = srv.cmd_value(&["TSCOUNTER.INCR", "b", "AT", &(t0 + 30_000).to_string()]);
    assert!(
        matches!(v, Value::Int(1 | 5)),
        "{k}: within max-future: {v:?}"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "b", "5m"]),
        v_int(5),
        "{k}"
    );
}

per_server!(module_arguments_set_the_configs);
fn module_arguments_set_the_configs(kind: &ServerKind) {
    let srv = Server::start_with(
        kind,
        ServerOptions::new().module_args(&["counter-resolutions", "1s:5 1m:5", "max-future", "5s"]),
    );
    let k = &kind.name;
    assert_eq!(
        config_get(&srv, "tally.counter-resolutions"),
        v_bulk("1s:5 1m:5"),
        "{k}"
    );
    assert_eq!(config_get(&srv, "tally.max-future"), v_bulk("5s"), "{k}");
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCR", "x"]), v_int(1), "{k}");
    assert_eq!(
        info_resolutions(&srv, "x"),
        v_pairs(&[(1000, 5), (60_000, 5)]),
        "{k}"
    );
    let t0 = server_ms(&srv);
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCR", "x", "AT", &(t0 + 30_000).to_string()]),
        v_err(FUTURE),
        "{k}: 30 s ahead is refused with max-future 5s"
    );
    let v = srv.cmd_value(&["TSCOUNTER.INCR", "x", "AT", &(t0 + 2_000).to_string()]);
    assert!(
        matches!(v, Value::Int(1 | 2)),
        "{k}: 2 s ahead is accepted as now: {v:?}"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "x", "5m"]),
        v_int(2),
        "{k}"
    );
}

per_server!(missing_keys_read_as_empty);
fn missing_keys_read_as_empty(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    for (cmd, want) in [
        (&["TSCOUNTER.INFO", "m"][..], v_nil()),
        (&["TSCOUNTER.SUM", "m", "1m"], v_int(0)),
        (&["TSCOUNTER.SUM", "m", "1m", "AT", "1000"], v_int(0)),
        (
            &["TSCOUNTER.SUM", "m", "1s", "1h", "120d"],
            v_ints(&[0, 0, 0]),
        ),
        (&["TSCOUNTER.RANGE", "m", "1s"], v_arr(vec![])),
        (&["TSCOUNTER.RANGE", "m", "1m", "EMPTY"], v_arr(vec![])),
        (
            &[
                "TSCOUNTER.RANGE",
                "m",
                "1m",
                "FROM",
                "0",
                "TO",
                "100000",
                "EMPTY",
            ],
            v_arr(vec![]),
        ),
    ] {
        assert_eq!(srv.cmd_value(cmd), want, "{k}: {cmd:?}");
        assert_eq!(srv.cmd_value_resp3(cmd), want, "{k}: RESP3 {cmd:?}");
    }
    // INCRBY 0 on a missing key answers 0 and creates nothing.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "m", "0"]),
        v_int(0),
        "{k}"
    );
    assert!(
        !exists(&srv, b"m"),
        "{k}: reads and INCRBY 0 create nothing"
    );
    assert_eq!(srv.cmd_value(&["DBSIZE"]), v_int(0), "{k}");
}
