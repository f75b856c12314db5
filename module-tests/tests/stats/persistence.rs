//! Replica, AOF and RDB reloads hold the same data; the timer expires idle periods on the primary and the replica.

use super::*;

per_server!(replica_and_reloads_hold_the_same_data);
/// Writes of every kind reach a replica as effects, and the AOF and RDB reload to the
/// same data (dump_keyspace equality).
fn replica_and_reloads_hold_the_same_data(kind: &ServerKind) {
    let k = kind.name.as_str();
    let mut primary = Server::start_with(kind, ServerOptions::new().config("appendonly", "yes"));
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    let now = server_ms(&primary);
    let mut rng = Rng(99);
    assert_eq!(
        primary.cmd_value(&["STATS.CREATE", "created", "PERIOD", "1m", "KEEP", "5"]),
        v_ok(),
        "{k}"
    );
    for i in 0..40 {
        let key = format!("s:{}", i % 4);
        let vals: Vec<String> = (0..25)
            .map(|_| format!("{}", rng.lognormal() - 10.0))
            .collect();
        let at = (now - (i % 3) as i64 * HOUR).to_string();
        let member = format!("m{}", i % 7);
        let mut args = vec!["STATS.ADD", key.as_str()];
        args.extend(vals.iter().map(String::as_str));
        args.extend([
            "AT",
            at.as_str(),
            "REPORT",
            "rank",
            member.as_str(),
            "KEEP",
            "4",
        ]);
        assert!(matches!(primary.cmd_value(&args), Value::Int(_)), "{k}");
    }
    primary.query::<i64, _>(&["STATS.ADD", "created", "0.1", "-0.1", "0"]);
    let dump = assert_replica_equal(&primary, &replica, "after the writes");
    assert!(dump.len() >= 6, "{k}: {dump:?}");
    for args in [
        vec!["STATS.GET", "s:1", "WINDOW", "3h"],
        vec!["STATS.RANGE", "s:2"],
        vec![
            "STATS.QUANTILE",
            "s:3",
            "0.1",
            "0.5",
            "0.9",
            "WINDOW",
            "24h",
        ],
    ] {
        assert_eq!(
            replica.cmd_value(&args),
            primary.cmd_value(&args),
            "{k}: {args:?}"
        );
    }
    primary.restart();
    assert_eq!(primary.dump_keyspace(), dump, "{k}: AOF reload differs");

    let mut rdb = Server::start(kind);
    for (key, _) in dump.iter() {
        let name = key.strip_prefix("db0:").unwrap();
        let payload: Vec<u8> = primary.query(&["DUMP", name]);
        assert_eq!(
            rdb.cmd_value(&[
                b"RESTORE".as_slice(),
                name.as_bytes(),
                b"0".as_slice(),
                payload.as_slice()
            ]),
            v_ok(),
            "{k}"
        );
    }
    assert_eq!(rdb.dump_keyspace(), dump, "{k}: RESTORE differs");
    rdb.restart_saving();
    assert_eq!(rdb.dump_keyspace(), dump, "{k}: RDB reload differs");
    assert_eq!(
        rdb.cmd_value(&["STATS.GET", "s:0", "WINDOW", "3h"]),
        primary.cmd_value(&["STATS.GET", "s:0", "WINDOW", "3h"])
    );
    primary.assert_alive();
}

per_server!(timer_expires_idle_periods_on_primary_and_replica);
/// The timer drops periods of an idle key as they leave (200 ms periods, KEEP 2), the key
/// disappears with its last period, and the replica follows.
fn timer_expires_idle_periods_on_primary_and_replica(kind: &ServerKind) {
    let k = kind.name.as_str();
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    assert_eq!(
        primary.cmd_value(&["STATS.CREATE", "e", "PERIOD", "200ms", "KEEP", "2"]),
        v_ok(),
        "{k}"
    );
    assert_eq!(
        primary.cmd_value(&["STATS.CREATE", "idle", "PERIOD", "200ms", "KEEP", "2"]),
        v_ok(),
        "{k}"
    );
    // One value at the start of the previous period (retried if the clock moved to
    // the next period between TIME and ADD), two in the current one.
    assert!(
        (0..5).any(|_| {
            let prev = server_ms(&primary).div_euclid(200) * 200 - 200 + 10;
            primary.cmd_value(&["STATS.ADD", "e", "1", "AT", &prev.to_string()]) == v_int(1)
        }),
        "{k}"
    );
    assert_eq!(
        primary.cmd_value(&["STATS.ADD", "e", "2", "3"]),
        v_int(2),
        "{k}"
    );
    // Both periods are there right after the writes (unless the clock already moved on).
    let fields = primary.query::<i64, _>(&["HLEN", "e"]);
    assert!(fields == 5 || fields == 3, "{k}: {fields}");
    let mut saw_one_period = fields == 3;
    assert!(
        wait_until(Duration::from_secs(3), || {
            let n = primary.query::<i64, _>(&["HLEN", "e"]);
            saw_one_period |= n == 3;
            n == 0
        }),
        "{k}: key not expired on the primary"
    );
    assert!(
        saw_one_period,
        "{k}: the older period was not dropped first"
    );
    assert!(
        wait_until(Duration::from_secs(3), || replica
            .query::<i64, _>(&["EXISTS", "e"])
            == 0),
        "{k}: expiry did not reach the replica"
    );
    // A created object with no data keeps its settings.
    assert_eq!(
        field(&primary.cmd_value(&["STATS.INFO", "idle"]), "period"),
        v_int(200),
        "{k}"
    );
    let expired: i64 = primary
        .info("tally")
        .get("tally_slots_expired")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(expired >= 2, "{k}: slots_expired {expired}");
    assert_replica_equal(&primary, &replica, "after expiry");
    primary.assert_alive();
}
