//! Server-level behaviour of the module (every `server_kinds()`): loading (config file
//! and MODULE LOAD, with arguments), configs, `INFO tally`, `maxmemory`.

use module_tests::*;
use std::collections::BTreeMap;

const DEFAULT_RES: &str = "1s:120 5s:120 1m:120 5m:120 1h:120 5h:120 1d:120";
const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// `MODULE LIST` as one name -> (field -> value) map per module.
fn modules(srv: &Server) -> BTreeMap<String, BTreeMap<String, Value>> {
    let v = srv.cmd_value(&["MODULE", "LIST"]);
    let Value::Array(mods) = v else {
        panic!("MODULE LIST gave {v:?}")
    };
    mods.iter()
        .map(|m| {
            let Value::Array(fields) = m else {
                panic!("{m:?}")
            };
            let f: BTreeMap<String, Value> = fields
                .chunks(2)
                .map(|c| (value_text(&c[0]).unwrap(), c[1].clone()))
                .collect();
            (value_text(&f["name"]).unwrap(), f)
        })
        .collect()
}

/// Every `tally.*` config, from `CONFIG GET tally.*`.
fn tally_configs(srv: &Server) -> BTreeMap<String, String> {
    let v = srv.cmd_value(&["CONFIG", "GET", "tally.*"]);
    let Value::Array(items) = v else {
        panic!("CONFIG GET gave {v:?}")
    };
    items
        .chunks(2)
        .map(|c| (value_text(&c[0]).unwrap(), value_text(&c[1]).unwrap()))
        // The test harness turns check-caches on in every server it starts from a config
        // file (see `check_caches_is_off_by_default`).
        .filter(|(name, _)| name != "tally.check-caches")
        .collect()
}

per_server!(check_caches_is_off_by_default);
fn check_caches_is_off_by_default(kind: &ServerKind) {
    let k = &kind.name;
    let srv = Server::start_with(kind, ServerOptions::new().without_module());
    let path = module_path().to_string_lossy().into_owned();
    assert_eq!(srv.cmd_value(&["MODULE", "LOAD", &path]), v_ok(), "{k}");
    assert_eq!(
        srv.cmd_value(&["CONFIG", "GET", "tally.check-caches"]),
        v_bulks(&["tally.check-caches", "no"]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.check-caches", "yes"]),
        v_ok(),
        "{k}"
    );
}

fn defaults() -> BTreeMap<String, String> {
    [
        ("tally.counter-resolutions", DEFAULT_RES),
        ("tally.max-future", "1m"),
        ("tally.rank-window", "24h"), // shown as set
        ("tally.rank-slot", "1h"),
        ("tally.stats-period", "1h"),
        ("tally.stats-keep", "24"),
        ("tally.expire-budget-us", "1000"),
        ("tally.cache-max-memory", "4194304"),
        ("tally.throttle-cell-compat", "no"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

per_server!(module_list_and_default_configs);
fn module_list_and_default_configs(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let mods = modules(&srv);
    let tally = mods.get("tally").unwrap_or_else(|| panic!("{k}: {mods:?}"));
    // Cargo.toml's 0.1.0 as major * 10000 + minor * 100 + patch (checked against
    // Cargo.toml itself in the dist tests).
    assert_eq!(tally["ver"], v_int(100), "{k}");
    assert_eq!(
        value_text(&tally["path"]).map(std::path::PathBuf::from),
        Some(module_path()),
        "{k}"
    );
    assert_eq!(tally["args"], v_arr(vec![]), "{k}");
    assert_eq!(tally_configs(&srv), defaults(), "{k}");
    // Bounds and validation of CONFIG SET.
    for (name, bad) in [
        ("tally.expire-budget-us", "5"),
        ("tally.expire-budget-us", "abc"),
        ("tally.cache-max-memory", "-1"),
        ("tally.stats-keep", "0"),
        ("tally.max-future", "soon"),
        ("tally.rank-window", "0"),
        ("tally.rank-slot", "1x"),
        ("tally.stats-period", ""),
        ("tally.counter-resolutions", "1s:5 1s:6"),
    ] {
        let v = srv.cmd_value(&["CONFIG", "SET", name, bad]);
        assert!(
            error_text(&v).is_some(),
            "{k}: {name}={bad:?} accepted: {v:?}"
        );
    }
    assert_eq!(
        tally_configs(&srv),
        defaults(),
        "{k}: refused sets changed nothing"
    );
    for (name, good, shown) in [
        ("tally.expire-budget-us", "2000", "2000"),
        ("tally.cache-max-memory", "64mb", "67108864"),
        ("tally.max-future", "90s", "90s"),
        ("tally.rank-window", "48h", "48h"),
        ("tally.stats-period", "60000", "60000"),
    ] {
        assert_eq!(
            srv.cmd_value(&["CONFIG", "SET", name, good]),
            v_ok(),
            "{k}: {name}"
        );
        assert_eq!(tally_configs(&srv)[name], shown, "{k}: {name}");
    }
}

per_server!(module_loads_with_arguments);
fn module_loads_with_arguments(kind: &ServerKind) {
    let args = [
        "counter-resolutions",
        "1s:5 1m:5",
        "max-future",
        "5s",
        "expire-budget-us",
        "500",
        "stats-keep",
        "48",
    ];
    let k = &kind.name;
    let mut want = defaults();
    want.insert("tally.counter-resolutions".into(), "1s:5 1m:5".into());
    want.insert("tally.max-future".into(), "5s".into());
    want.insert("tally.expire-budget-us".into(), "500".into());
    want.insert("tally.stats-keep".into(), "48".into());

    // From the config file's loadmodule line.
    let srv = Server::start_with(kind, ServerOptions::new().module_args(&args));
    assert_eq!(tally_configs(&srv), want, "{k}: loadmodule arguments");
    let mods = modules(&srv);
    assert_eq!(mods["tally"]["args"], v_bulks(&args), "{k}");
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCR", "c"]), v_int(1), "{k}");
    drop(srv);

    // With MODULE LOAD at run time.
    let srv = Server::start_without_module(kind);
    assert!(!modules(&srv).contains_key("tally"), "{k}");
    let path = module_path().to_string_lossy().into_owned();
    let mut load = vec!["MODULE", "LOAD", &path];
    load.extend(args);
    assert_eq!(srv.cmd_value(&load), v_ok(), "{k}: MODULE LOAD");
    assert!(modules(&srv).contains_key("tally"), "{k}");
    assert_eq!(tally_configs(&srv), want, "{k}: MODULE LOAD arguments");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "c", "2"]),
        v_int(2),
        "{k}"
    );
    // The timer runs in a module loaded at run time too.
    let ticks = |srv: &Server| -> i64 { srv.info("tally")["tally_timer_ticks"].parse().unwrap() };
    let t0 = ticks(&srv);
    assert!(
        wait_until(std::time::Duration::from_secs(5), || ticks(&srv) > t0),
        "{k}"
    );

    drop(srv);

    // A bad argument value refuses the load cleanly: an error, no half-loaded module,
    // the server alive, and a later correct load works.
    for bad_args in [
        &["max-future", "soon"][..],
        &["counter-resolutions", "1s:0"],
        &["stats-keep", "abc"],
    ] {
        let srv = Server::start_without_module(kind);
        let mut load = vec!["MODULE", "LOAD", &path];
        load.extend(bad_args);
        let v = srv.cmd_value(&load);
        assert!(
            srv.is_alive(),
            "{k}: MODULE LOAD {bad_args:?} crashed the server:\n{}",
            srv.log_tail(60)
        );
        assert!(error_text(&v).is_some(), "{k}: {bad_args:?} loaded: {v:?}");
        let mods = modules(&srv);
        assert!(
            !mods.contains_key("tally"),
            "{k}: {bad_args:?} left the module loaded: {mods:?}"
        );
        assert_eq!(
            srv.cmd_value(&["MODULE", "LOAD", &path, "max-future", "5s"]),
            v_ok(),
            "{k}: a correct load after the refused one"
        );
        assert_eq!(tally_configs(&srv)["tally.max-future"], "5s", "{k}");
    }

    // On the loadmodule line, a bad value stops the server from starting.
    let refused = std::panic::catch_unwind(|| {
        Server::start_with(
            kind,
            ServerOptions::new().module_args(&["max-future", "soon"]),
        )
    });
    assert!(
        refused.is_err(),
        "{k}: a server started with max-future soon"
    );
}

per_server!(info_tally_reports_the_timer);
fn info_tally_reports_the_timer(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let info = srv.info("tally");
    for field in [
        "tracked_objects",
        "timer_ticks",
        "keys_visited",
        "slots_expired",
        "last_tick_us",
        "max_tick_us",
        "expiry_backlog",
        "scan_in_progress",
    ] {
        let v = info
            .get(&format!("tally_{field}"))
            .unwrap_or_else(|| panic!("{k}: no tally_{field} in {info:?}"));
        assert!(v.parse::<u64>().is_ok(), "{k}: tally_{field}:{v}");
    }
    // The section is also part of INFO everything / INFO modules.
    let all = value_text(&srv.cmd_value(&["INFO", "everything"])).unwrap();
    assert!(all.contains("# tally\r\n"), "{k}");
    assert!(all.contains("tally_timer_ticks:"), "{k}");
    let modules = value_text(&srv.cmd_value(&["INFO", "modules"])).unwrap();
    assert!(modules.contains("tally_timer_ticks:"), "{k}");
    // Tracked objects: a counter with slots is tracked for expiry.
    let get = |f: &str| -> i64 { srv.info("tally")[&format!("tally_{f}")].parse().unwrap() };
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "a", "RESOLUTIONS", "100ms:2", "1h:2"]),
        v_ok()
    );
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCR", "a"]), v_int(1));
    assert!(get("tracked_objects") >= 1, "{k}");
    assert!(
        wait_until(std::time::Duration::from_secs(10), || get("slots_expired")
            >= 1),
        "{k}"
    );
    assert!(get("max_tick_us") >= get("last_tick_us"), "{k}");
    assert!(get("keys_visited") >= 1, "{k}");
    assert_eq!(
        get("scan_in_progress"),
        0,
        "{k}: the start-up scan of an empty server ends"
    );
}

per_server!(writes_are_refused_under_maxmemory_while_reads_work);
fn writes_are_refused_under_maxmemory_while_reads_work(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "c", "RESOLUTIONS", "1m:60", "1h:24"]),
        v_ok()
    );
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCRBY", "c", "5"]), v_int(5));
    let before = srv.cmd_value(&["DUMP", "c"]);
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]),
        v_ok()
    );
    assert_eq!(srv.cmd_value(&["CONFIG", "SET", "maxmemory", "1"]), v_ok());
    for cmd in [
        &["TSCOUNTER.INCR", "c"][..],
        &["TSCOUNTER.INCRBY", "c", "3"],
        &["TSCOUNTER.INCRBY", "new", "3"],
        &["TSCOUNTER.CREATE", "new"],
        &["TSRANK.INCRBY", "{r}", "1", "m"],
        &["STATS.ADD", "s", "1.5"],
    ] {
        assert_eq!(srv.cmd_value(cmd), v_err(OOM), "{k}: {cmd:?}");
    }
    assert_eq!(srv.cmd_value(&["DUMP", "c"]), before, "{k}");
    assert_eq!(srv.cmd_value(&["EXISTS", "new"]), v_int(0), "{k}");
    // Reads still work.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "c", "1h"]),
        v_int(5),
        "{k}"
    );
    let range = srv.cmd_value(&["TSCOUNTER.RANGE", "c", "1h"]);
    assert!(
        matches!(&range, Value::Array(a) if a.len() == 1),
        "{k}: {range:?}"
    );
    assert!(
        matches!(srv.cmd_value(&["TSCOUNTER.INFO", "c"]), Value::Array(_)),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["CONFIG", "SET", "maxmemory", "0"]), v_ok());
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCR", "c", "AT", "0"]),
        v_err("ERR timestamp is outside the kept range"),
        "{k}"
    );
    let v = srv.cmd_value(&["TSCOUNTER.INCR", "c"]);
    assert!(
        matches!(v, Value::Int(1 | 6)),
        "{k}: writes work again: {v:?}"
    );
}

per_server!(a_plain_load_logs_no_warning);
/// Loading the module logs nothing at warning level (`#`): on Redis 7.0, which lacks defrag
/// callbacks, the line that says so is a verbose one.
fn a_plain_load_logs_no_warning(kind: &ServerKind) {
    let srv = Server::start(kind);
    srv.assert_alive();
    let log = std::fs::read_to_string(srv.log_path()).unwrap_or_default();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" # <tally>") || (l.contains(" # ") && l.contains("tally:")))
        .collect();
    assert!(
        warnings.is_empty(),
        "{}: tally logged warnings at load:\n{}",
        kind.name,
        warnings.join("\n")
    );
    assert!(
        log.contains("Module 'tally' loaded"),
        "{}: {log}",
        kind.name
    );
}
