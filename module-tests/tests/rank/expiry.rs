//! Real-time expiry: tiny slots exact at every moment, a 200k-member slot (a million with
//! `TALLY_LONG=1`) expiring while another client PINGs, and replies that are exact while an
//! expiry is in progress.

use super::*;

per_server!(realtime_expiry_with_tiny_slots);
/// Window of tiny slots: a member's total is exact at every moment, and it vanishes on
/// time from the sorted set and the derived keys.
fn realtime_expiry_with_tiny_slots(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "rt", "WINDOW", "1s", "SLOT", "200ms"]),
        v_ok()
    );
    // One event per slot for a while; the model knows when each slot leaves.
    let mut written: Vec<(i64, i64)> = Vec::new(); // (slot index, count)
    let start = Instant::now();
    let mut checked = 0;
    while start.elapsed() < Duration::from_millis(2600) {
        if start.elapsed() < Duration::from_millis(1400) {
            let t = server_ms(&srv);
            srv.cmd(&[
                "TSRANK.INCRBY",
                "rt",
                "2",
                "a",
                "1",
                "b",
                "AT",
                &t.to_string(),
            ])
            .expect("incrby");
            match written.last_mut() {
                Some((slot, n)) if *slot == t / 200 => *n += 1,
                _ => written.push((t / 200, 1)),
            }
        }
        let before = server_ms(&srv);
        let score = srv.cmd_value(&["TSRANK.SCORE", "rt", "a"]);
        let top = srv.cmd_value(&["TSRANK.TOP", "rt", "10", "WITHSCORES"]);
        let after = server_ms(&srv);
        let (sb, sa) = (before / 200, after / 200);
        if sb == sa {
            let n: i64 = written
                .iter()
                .filter(|(slot, _)| *slot > sb - 5)
                .map(|(_, n)| n)
                .sum();
            let want = if n > 0 { v_int(2 * n) } else { v_nil() };
            assert_eq!(score, want, "{k} at slot {sb}");
            let want_top = if n > 0 {
                vec![("a".to_string(), 2 * n), ("b".to_string(), n)]
            } else {
                vec![]
            };
            assert_eq!(member_totals(&top), want_top, "{k} at slot {sb}");
            checked += 1;
        }
        std::thread::sleep(Duration::from_millis(15));
    }
    assert!(checked > 20, "{k}: only {checked} checks were unambiguous");
    // Everything left the window: all keys gone (no empty meta left behind).
    assert!(
        wait_until(Duration::from_secs(2), || keys(&srv, "rt*").is_empty()),
        "{k}: {:?}",
        keys(&srv, "rt*")
    );
    let stats = srv.info("tally");
    assert!(
        stats["tally_slots_expired"].parse::<i64>().unwrap() >= 5,
        "{k}: {stats:?}"
    );
}

// ================================================================= large slot

/// Members of the expiring slot and the board's window in seconds: 200k members in
/// `make test`, a million with `TALLY_LONG=1`. 200k suffice for the latency bound:
/// subtracting them inside one tick (`tally.expire-budget-us` at its 1 s maximum, as when
/// expiry was one step) holds the server for far more than 100 ms.
fn large_slot() -> (usize, i64) {
    if long_run() {
        (1_000_000, 25)
    } else {
        (200_000, 10)
    }
}

/// Creates `{big}` (`WINDOW window s`, `SLOT 1s`) and writes `members` members into the
/// slot of now; the slot's time and how long the writes took.
fn populate_large_slot(srv: &Server, members: usize, window: i64) -> (i64, Duration) {
    let k = &srv.kind().name;
    assert_eq!(
        srv.cmd_value(&[
            "TSRANK.CREATE",
            "{big}",
            "WINDOW",
            &format!("{window}s"),
            "SLOT",
            "1s"
        ]),
        v_ok()
    );
    let t0 = server_ms(srv);
    let mut conn = srv.conn();
    let populate = Instant::now();
    let per_cmd = 1000;
    let mut cmds = Vec::new();
    for c in 0..members / per_cmd {
        let mut cmd = vec!["TSRANK.INCRBY".to_string(), "{big}".to_string()];
        for i in 0..per_cmd {
            cmd.push("1".into());
            cmd.push(format!("member:{}", c * per_cmd + i));
        }
        cmd.push("AT".into());
        cmd.push(t0.to_string());
        cmds.push(cmd);
        if cmds.len() == 25 {
            for v in pipeline(&mut conn, &cmds) {
                assert!(matches!(v, Value::Array(_)), "{k}: {v:?}");
            }
            cmds.clear();
        }
    }
    let populated_in = populate.elapsed();
    assert_eq!(
        srv.query::<i64, _>(&["ZCARD", "{big}"]),
        members as i64,
        "{k}"
    );
    (t0, populated_in)
}

// Two large-slot servers side by side would measure each other's load.
per_server!(one_kind_at_a_time: million_member_slot_expiry_keeps_ping_latency_low);
/// A slot with a million members (`make test`: 200k) expires in bounded steps: another
/// client's PINGs keep a low latency, and every member disappears.
fn million_member_slot_expiry_keeps_ping_latency_low(kind: &ServerKind) {
    let (members, window) = large_slot();
    let srv = Server::start(kind);
    let k = &kind.name;
    // Slots of 1 s: the populated slot leaves `window` s after its start (room for a slow,
    // busy machine to write every member inside the window). PINGs are timed from a few
    // seconds before the slot leaves, so populating must be done by then: a machine too
    // busy for that starts again with a window three times longer.
    let watch_before = if long_run() { 10_000 } else { 3_000 };
    let mut attempt = 0;
    let (leaves, watch_from, populated_in) = loop {
        let window = window * 3i64.pow(attempt);
        let (t0, populated_in) = populate_large_slot(&srv, members, window);
        let leaves = (t0 / 1000 + window) * 1000;
        let watch_from = leaves - watch_before;
        if server_ms(&srv) < watch_from {
            break (leaves, watch_from, populated_in);
        }
        attempt += 1;
        assert!(
            attempt < 3,
            "{k}: populating took {populated_in:?}, too slow for a {window} s window"
        );
        println!("{k}: populating took {populated_in:?}; again with a longer window");
        assert_eq!(srv.cmd_value(&["FLUSHALL"]), v_ok());
    };
    // PING in a loop from before the slot leaves until every member is gone.
    let mut ping = srv.conn();
    let mut max_latency = Duration::ZERO;
    let mut pings = 0u64;
    let until_gone = Duration::from_millis(u64::try_from(leaves - server_ms(&srv)).unwrap_or(0))
        + Duration::from_secs(90);
    let began = Instant::now();
    let mut gone_at = None;
    while began.elapsed() < until_gone {
        // Each round trip less the time the machine took from the server and from this
        // thread meanwhile: what the server's own work held the request for.
        let latency = ping_held(&srv, &mut ping);
        pings += 1;
        // The clock is read on the server too: a stall may fall on this request instead.
        let lost = Lost::start(&srv);
        let t = Instant::now();
        let now = server_ms(&srv);
        let held = t
            .elapsed()
            .saturating_sub(Duration::from_micros(u64::try_from(lost.us()).unwrap_or(0)));
        let latency = latency.max(held);
        if now >= watch_from {
            max_latency = max_latency.max(latency);
            if pings.is_multiple_of(50) && srv.query::<i64, _>(&["EXISTS", "{big}"]) == 0 {
                gone_at = Some(server_ms(&srv) - leaves);
                break;
            }
        }
    }
    let gone_at = gone_at.unwrap_or_else(|| panic!("{k}: the slot was not expired in 90 s"));
    let stats = srv.info("tally");
    println!(
            "{k}: {members}-member slot: populated in {populated_in:?}, expired within {gone_at} ms after leaving the window; \
             max PING (or TIME) latency during expiry {max_latency:?} over {pings} pings; tally_max_tick_us={}",
            stats["tally_max_tick_us"]
        );
    assert!(
        keys(&srv, "{big}*").is_empty(),
        "{k}: {:?}",
        keys(&srv, "{big}*")
    );
    assert!(
        max_latency < Duration::from_millis(100),
        "{k}: PING or TIME stalled {max_latency:?}"
    );
    srv.assert_alive();
}

per_server!(replies_are_exact_while_an_expiry_is_in_progress);
/// While a big slot is still being subtracted (small expiry budget), replies are already
/// those of the new window: SCORE, TOP, RANK and INFO never count the departed slot.
fn replies_are_exact_while_an_expiry_is_in_progress(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    srv.cmd(&["CONFIG", "SET", "tally.expire-budget-us", "10"])
        .expect("config");
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "{x}", "WINDOW", "4s", "SLOT", "2s"]),
        v_ok()
    );
    let t0 = server_ms(&srv);
    let slot0 = t0 / 2000;
    // Old slot: 30000 members, a (150) and b (120); the next slot gets b 1, c 2.
    let mut conn = srv.conn();
    let mut cmds = Vec::new();
    for c in 0..30 {
        let mut cmd = strings(&["TSRANK.INCRBY", "{x}"]);
        for i in 0..1000 {
            cmd.push(((i % 7) + 1).to_string());
            cmd.push(format!("m{}", c * 1000 + i));
        }
        cmd.extend(strings(&["5", "a", "4", "b", "AT"]));
        cmd.push(t0.to_string());
        cmds.push(cmd);
    }
    pipeline(&mut conn, &cmds);
    // Wait for the next slot, then write to it.
    while server_ms(&srv) / 2000 == slot0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    srv.cmd(&["TSRANK.INCRBY", "{x}", "1", "b", "2", "c"])
        .expect("incr");
    // Slot0 leaves at (slot0 + 2) * 2000, the next slot 2 s later: poll in between.
    let leaves = (slot0 + 2) * 2000;
    let next_leaves = leaves + 2000;
    let mut seen_pending = false;
    loop {
        let before = server_ms(&srv);
        let top = srv.cmd_value(&["TSRANK.TOP", "{x}", "3", "WITHSCORES"]);
        let score_b = srv.cmd_value(&["TSRANK.SCORE", "{x}", "b"]);
        let rank_c = srv.cmd_value(&["TSRANK.RANK", "{x}", "c"]);
        let info = srv.cmd_value(&["TSRANK.INFO", "{x}"]);
        let zcard = srv.query::<i64, _>(&["ZCARD", "{x}"]);
        let after = server_ms(&srv);
        if after >= next_leaves {
            break;
        }
        if before >= leaves {
            assert_eq!(
                member_totals(&top),
                vec![("c".into(), 2), ("b".into(), 1)],
                "{k}"
            );
            assert_eq!(score_b, v_int(1), "{k}");
            assert_eq!(rank_c, v_int(0), "{k}");
            let Value::Array(info) = info else { panic!() };
            assert_eq!(info[5], v_int(2), "{k} members");
            seen_pending |= zcard > 2;
        } else if after < leaves {
            assert_eq!(score_b, v_int(121), "{k}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // With a 10 us budget the expiry is still running: it finishes by itself.
    srv.cmd(&["CONFIG", "SET", "tally.expire-budget-us", "1000"])
        .expect("config");
    assert!(
        wait_until(Duration::from_secs(30), || keys(&srv, "{x}*").is_empty()),
        "{k}: {:?}",
        keys(&srv, "{x}*")
    );
    assert!(
        seen_pending,
        "{k}: the expiry finished before any read could see it in progress"
    );
    srv.assert_alive();
}
