//! `INFO tally`: every field is there and moves as expected.

use super::*;

per_server!(info_tally_fields_exist_and_move);
fn info_tally_fields_exist_and_move(kind: &ServerKind) {
    let k = &kind.name;
    let srv = Server::start(kind);
    let since_start = Lost::start(&srv);
    let fields = [
        "tally_tracked_objects",
        "tally_timer_ticks",
        "tally_keys_visited",
        "tally_slots_expired",
        "tally_last_tick_us",
        "tally_max_tick_us",
        "tally_expiry_backlog",
        "tally_scan_in_progress",
        "tally_mirrored_slots",
        "tally_counter_hash_lookups",
        "tally_stats_cache_hits",
        "tally_stats_cache_misses",
    ];
    let info = srv.info("tally");
    for f in fields {
        let v = info
            .get(f)
            .unwrap_or_else(|| panic!("{k}: INFO tally lacks {f}: {info:?}"));
        let n: i64 = v.parse().unwrap_or_else(|_| panic!("{k}: {f}={v}"));
        assert!(n >= 0, "{k}: {f}={n}");
    }
    let get = |f: &str| info_i64(&srv, "tally", f);
    // The timer ticks on its own.
    let ticks = get("tally_timer_ticks");
    assert!(
        wait_until(Duration::from_secs(3), || get("tally_timer_ticks") > ticks),
        "{k}: timer_ticks does not grow"
    );
    // The start-up scan finishes.
    assert!(wait_until(Duration::from_secs(3), || get(
        "tally_scan_in_progress"
    ) == 0));
    // Objects with slots to expire are tracked; expiry counts slots and visits.
    let (expired, visited) = (get("tally_slots_expired"), get("tally_keys_visited"));
    let mut cmds = Vec::new();
    for fam in [COUNTER, RANK, STATS] {
        cmds.extend((fam.setup)(""));
        cmds.extend((fam.write)("", 0));
        cmds.extend((fam.write)("", 1));
        cmds.extend((fam.write)("", 2));
        cmds.extend((fam.write)("", 3));
    }
    pipeline_ok(&srv, &cmds);
    let tracked = get("tally_tracked_objects");
    assert!(tracked >= 1, "{k}: tracked_objects={tracked}");
    assert!(
        wait_until(Duration::from_secs(10), || get("tally_slots_expired")
            >= expired + 8),
        "{k}: slots_expired does not grow (counter + rank + stats tiny slots)"
    );
    assert!(
        get("tally_keys_visited") > visited,
        "{k}: keys_visited does not grow"
    );
    let (last, max) = (get("tally_last_tick_us"), get("tally_max_tick_us"));
    assert!(
        max >= last && max > 0,
        "{k}: last_tick_us={last} max_tick_us={max}"
    );
    // Budget: a tick stays near tally.expire-budget-us (1000 µs) even while expiring
    // (beyond the time the server lost to other work).
    assert_ticks_below(&srv, 200_000, &since_start, "expiring");
    // Nothing is due far in the past: the backlog drains.
    assert!(
        wait_until(Duration::from_secs(5), || get("tally_expiry_backlog") == 0),
        "{k}: expiry_backlog does not drain"
    );
    // Read mirrors: a counter with many slots, read by SUM.
    let t = server_ms(&srv);
    let mut cmds = Vec::new();
    for i in 0..40 {
        let at = (t - i * 1000).to_string();
        cmds.push(strings(&["TSCOUNTER.INCRBY", "mirrored", "1", "AT", &at]));
    }
    cmds.push(strings(&["TSCOUNTER.SUM", "mirrored", "1m"]));
    cmds.push(strings(&["TSCOUNTER.RANGE", "mirrored", "1s"]));
    pipeline_ok(&srv, &cmds);
    let mirrored = get("tally_mirrored_slots");
    assert!(
        mirrored >= 16,
        "{k}: mirrored_slots={mirrored} after reading 40 slots"
    );
    assert_eq!(srv.cmd_value(&["DEL", "mirrored"]), v_int(1));
    assert!(
        get("tally_mirrored_slots") < mirrored,
        "{k}: DEL does not drop the mirror"
    );
    srv.assert_alive();
}
