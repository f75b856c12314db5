//! What gets removed: zero slots and empty counters, old slots on the next write, and idle
//! counters trimmed by the timer.

use super::*;

per_server!(zero_slots_are_removed_and_an_empty_counter_disappears);
fn zero_slots_are_removed_and_an_empty_counter_disappears(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    // The simplest case, default resolutions.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "z", "5"]),
        v_int(5),
        "{k}"
    );
    assert_eq!(
        slot_fields(&srv, b"z").len(),
        7,
        "{k}: one slot per resolution"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "z", "-5"]),
        v_int(0),
        "{k}"
    );
    assert!(!exists(&srv, b"z"), "{k}: no slot left, the key disappears");

    // Two timestamps: slots reach 0 one by one.
    let rs = res_list("1s:60 1h:2");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "y", "RESOLUTIONS", "1s:60", "1h:2"]),
        v_ok()
    );
    assert_eq!(
        hgetall(&srv, b"y").len(),
        2,
        "{k}: CREATE stores only the settings"
    );
    let t0 = server_ms(&srv);
    let (ta, tb) = (t0 - 10_000, t0);
    let (sa, sb) = (ta.to_string(), tb.to_string());
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "y", "5", "AT", &sa]),
        v_int(5)
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "y", "2", "AT", &sb]),
        v_int(2)
    );
    assert_eq!(
        slot_fields(&srv, b"y"),
        expected_fields(&rs, &[(ta, 5), (tb, 2)]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "y", "-5", "AT", &sa]),
        v_int(0)
    );
    assert_eq!(
        slot_fields(&srv, b"y"),
        expected_fields(&rs, &[(ta, 5), (tb, 2), (ta, -5)]),
        "{k}: the 1s slot that reached 0 is gone"
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "y", "-2", "AT", &sb]),
        v_int(0)
    );
    assert!(!exists(&srv, b"y"), "{k}");

    // A counter created empty disappears once its only slots are back to zero.
    assert_eq!(srv.cmd_value(&["TSCOUNTER.CREATE", "e"]), v_ok());
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCRBY", "e", "0"]), v_int(0));
    assert!(
        exists(&srv, b"e"),
        "{k}: INCRBY 0 keeps the created counter"
    );
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCRBY", "e", "3"]), v_int(3));
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCRBY", "e", "-3"]), v_int(0));
    assert!(!exists(&srv, b"e"), "{k}");
}

per_server!(old_slots_are_removed_by_the_next_write);
/// Proof that a write trims: the old slot and the write come in one pipeline, which the
/// server reads and runs at once (timers run only between event-loop iterations), with a
/// DEBUG SLEEP in between that lets the slot leave its range; `tally_slots_expired` (the
/// timer's count) at the end of the same pipeline shows no timer trimmed anything. Not a
/// MULTI/EXEC: on servers with a cached command time its commands share EXEC's now.
fn old_slots_are_removed_by_the_next_write(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "w", "RESOLUTIONS", "100ms:3", "1h:2"]),
        v_ok()
    );
    let expired_before = info_i64(&srv, "tally", "tally_slots_expired");
    let mut conn = srv.conn();
    let exec = pipeline(
        &mut conn,
        &[
            args(&["TSCOUNTER.INCR", "w"]),
            args(&["HKEYS", "w"]),
            args(&["DEBUG", "SLEEP", "0.5"]),
            args(&["TSCOUNTER.INCR", "w"]),
            args(&["HKEYS", "w"]),
            args(&["INFO", "tally"]),
        ],
    );
    let info = value_text(&exec[5]).unwrap_or_default();
    assert!(
        info.contains(&format!("tally_slots_expired:{expired_before}\r\n")),
        "{k}: no timer trimmed during the pipeline: {info}"
    );
    assert_eq!(exec[0], v_int(1), "{k}");
    assert_eq!(exec[3], v_int(1), "{k}: the new 100ms slot starts at 1");
    let keys = |v: &Value| -> Vec<String> {
        let Value::Array(a) = v else { panic!("{v:?}") };
        let mut out: Vec<String> = a.iter().map(|x| value_text(x).unwrap()).collect();
        out.sort();
        out
    };
    let fine = |ks: &[String]| -> Vec<i64> {
        ks.iter()
            .filter_map(|f| f.strip_prefix("100ms:"))
            .map(|i| i.parse().unwrap())
            .collect()
    };
    let (first, second) = (keys(&exec[1]), keys(&exec[4]));
    let (old, new) = (fine(&first), fine(&second));
    assert_eq!(old.len(), 1, "{k}: {first:?}");
    assert_eq!(
        new.len(),
        1,
        "{k}: the write removed the old slot: {second:?}"
    );
    assert!(new[0] >= old[0] + 3, "{k}: {old:?} -> {new:?}");
    // The hour slot(s) still count both increments.
    let hour: i64 = hgetall(&srv, b"w")
        .iter()
        .filter(|(f, _)| f.starts_with("1h:"))
        .map(|(_, v)| v.parse::<i64>().unwrap())
        .sum();
    assert_eq!(hour, 2, "{k}");
}

per_server!(idle_counters_are_trimmed_by_the_timer);
/// Nobody writes: the timer alone trims old slots, deletes counters left empty, and
/// `INFO tally` shows it.
fn idle_counters_are_trimmed_by_the_timer(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let expired0 = info_i64(&srv, "tally", "tally_slots_expired");
    let ticks0 = info_i64(&srv, "tally", "tally_timer_ticks");
    let visited0 = info_i64(&srv, "tally", "tally_keys_visited");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "i", "RESOLUTIONS", "100ms:3", "1h:2"]),
        v_ok()
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "j", "RESOLUTIONS", "100ms:2"]),
        v_ok()
    );
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCRBY", "i", "3"]), v_int(3));
    assert_eq!(srv.cmd_value(&["TSCOUNTER.INCRBY", "j", "4"]), v_int(4));
    assert!(
        wait_until(Duration::from_secs(10), || {
            !exists(&srv, b"j")
                && !slot_fields(&srv, b"i")
                    .keys()
                    .any(|f| f.starts_with("100ms:"))
        }),
        "{k}: timer did not trim: i={:?} j={:?}",
        hgetall(&srv, b"i"),
        hgetall(&srv, b"j")
    );
    let fields = slot_fields(&srv, b"i");
    assert_eq!(fields.len(), 1, "{k}: the hour slot stays: {fields:?}");
    assert_eq!(fields.values().next().map(String::as_str), Some("3"), "{k}");
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "i", "1h"]),
        v_int(3),
        "{k}"
    );
    assert!(
        info_i64(&srv, "tally", "tally_slots_expired") >= expired0 + 2,
        "{k}"
    );
    assert!(
        info_i64(&srv, "tally", "tally_keys_visited") >= visited0 + 2,
        "{k}"
    );
    let ticks1 = info_i64(&srv, "tally", "tally_timer_ticks");
    assert!(ticks1 > ticks0, "{k}");
    assert!(
        wait_until(Duration::from_secs(5), || info_i64(
            &srv,
            "tally",
            "tally_timer_ticks"
        ) > ticks1),
        "{k}: the timer keeps ticking"
    );
    assert!(
        info_i64(&srv, "tally", "tally_tracked_objects") >= 1,
        "{k}: i is still tracked"
    );
}

per_server!(a_write_long_after_the_last_looks_up_only_the_slots_stored);
/// A counter written now and then: the write that finds a fine slot gone out of range
/// looks up the slots stored there, not every position passed since the last write
/// (1,800 of them here). `tally_counter_hash_lookups` counts the slot fields looked up in
/// counters' hashes; the writes come in one pipeline with DEBUG SLEEPs, so no timer runs
/// in between, and without read caches every lookup goes to the hash.
fn a_write_long_after_the_last_looks_up_only_the_slots_stored(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.cache-max-memory", "0"]),
        v_ok()
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "n", "RESOLUTIONS", "1ms:2000", "1h:2"]),
        v_ok()
    );
    let lookups = |v: &Value| -> i64 {
        let info = value_text(v).unwrap_or_default();
        parse_info(&info)
            .get("tally_counter_hash_lookups")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{k}: no tally_counter_hash_lookups in {info}"))
    };
    let mut conn = srv.conn();
    let exec = pipeline(
        &mut conn,
        &[
            args(&["TSCOUNTER.INCR", "n"]),
            args(&["DEBUG", "SLEEP", "1.9"]),
            args(&["TSCOUNTER.INCR", "n"]),
            args(&["DEBUG", "SLEEP", "1.9"]),
            args(&["INFO", "tally"]),
            args(&["TSCOUNTER.INCR", "n"]),
            args(&["INFO", "tally"]),
            args(&["HKEYS", "n"]),
        ],
    );
    assert_eq!(exec[5], v_int(1), "{k}");
    let fine = |v: &Value| -> usize {
        let Value::Array(a) = v else { panic!("{v:?}") };
        a.iter()
            .filter(|f| value_text(f).is_some_and(|f| f.starts_with("1ms:")))
            .count()
    };
    // The first fine slot has left (the second one too if the machine was slow).
    assert!((1..=2).contains(&fine(&exec[7])), "{k}: {:?}", exec[7]);
    // Two slots read and written, at most two deleted.
    let made = lookups(&exec[6]) - lookups(&exec[4]);
    assert!(
        (4..=6).contains(&made),
        "{k}: the write looked up {made} slot fields"
    );
}
