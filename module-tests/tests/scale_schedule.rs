//! The expiry schedule at scale: it grows with the number of tally objects in bounded
//! steps, the start-up scan that rebuilds it keeps its time budget, and `INFO tally`
//! answers in constant time however many keys are scheduled or due.
//!
//! * 250k new counters written by pipelined `TSCOUNTER.INCR`: no `INCR` and no timer
//!   tick takes 10 ms (a schedule that grows in one step copies every entry inside one
//!   command);
//! * `DEBUG RELOAD` of those counters: the scan that finds them again and the visits of
//!   all of them (due at once) keep every tick under 10 ms, and `INFO` stays fast while
//!   the whole schedule is due;
//! * `FLUSHALL ASYNC` answers at once (the server frees the keys in the background, and
//!   tally frees its schedule in bounded timer steps), and the memory comes back.
//!
//! `TALLY_LONG=1` runs the same with 2M counters.

use module_tests::*;
use std::time::{Duration, Instant};

fn counters() -> usize {
    if long_run() {
        2_000_000
    } else {
        250_000
    }
}

per_server!(the_schedule_grows_and_reloads_without_a_stall);
/// Pipelined INCRs of new counters, then `DEBUG RELOAD` and the scan.
fn the_schedule_grows_and_reloads_without_a_stall(kind: &ServerKind) {
    let srv = Server::start_with(
        kind,
        ServerOptions::new().config("slowlog-log-slower-than", &STALL_LIMIT_US.to_string()),
    );
    let k = &kind.name;
    let n = counters();
    let fresh_memory = info_i64(&srv, "memory", "used_memory");
    let mut watch = StallWatch::start(&srv, STALL_LIMIT_US);
    let mut conn = srv.conn();
    // Short intervals between checks: see StallWatch.
    let chunk = 500;
    for start in (0..n).step_by(chunk) {
        let cmds: Vec<Vec<String>> = (start..(start + chunk).min(n))
            .map(|i| vec!["TSCOUNTER.INCR".to_string(), format!("k{i}")])
            .collect();
        let replies = pipeline(&mut conn, &cmds);
        assert!(
            replies.iter().all(|r| *r == v_int(1)),
            "{k}: INCR of a new counter answers 1"
        );
        watch.check(&srv, "INCR of new counters");
    }
    assert_eq!(info_i64(&srv, "tally", "tally_tracked_objects"), n as i64);
    report(&srv, k, "INCR of new counters");

    // DEBUG RELOAD is itself a long command (the server's, not tally's).
    assert_eq!(srv.cmd_value(&["DEBUG", "RELOAD"]), v_ok());
    let mut watch = StallWatch::start(&srv, STALL_LIMIT_US);
    // The scan finds every counter again and the timer visits each once; INFO is read
    // all along, while the whole schedule is due.
    let started = Instant::now();
    let timeout = Duration::from_secs(if long_run() { 600 } else { 120 });
    loop {
        std::thread::sleep(Duration::from_millis(5));
        watch.check(&srv, "the scan and visits after DEBUG RELOAD");
        let info = srv.info("tally");
        let field = |name: &str| info.get(name).and_then(|v| v.parse::<i64>().ok());
        if field("tally_scan_in_progress") == Some(0)
            && field("tally_expiry_backlog") == Some(0)
            && field("tally_tracked_objects") == Some(n as i64)
        {
            break;
        }
        assert!(
            started.elapsed() < timeout,
            "{k}: after {:?} the scan and visits have not settled: {info:?}",
            started.elapsed()
        );
    }
    watch.check(&srv, "the scan and visits after DEBUG RELOAD");
    // Every counter is still there and counts.
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", &format!("k{}", n - 1), "1d"]),
        v_int(1)
    );

    report(&srv, k, "the scan and visits after DEBUG RELOAD");

    // On a glibc-malloc server the lazy free holds INFO's own replies (see
    // StallWatch::without_info); FLUSHALL and the ticks still count.
    if kind.glibc_malloc() {
        watch = watch.without_info();
    }
    assert_eq!(srv.cmd_value(&["FLUSHALL", "ASYNC"]), v_ok());
    assert_eq!(info_i64(&srv, "tally", "tally_tracked_objects"), 0);
    let started = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(5));
        watch.check(&srv, "FLUSHALL ASYNC");
        let used = info_i64(&srv, "memory", "used_memory");
        if used < fresh_memory + (4 << 20) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{k}: used_memory {used} after FLUSHALL, {fresh_memory} when the server started"
        );
    }
    report(&srv, k, "FLUSHALL ASYNC");
    srv.assert_alive();
}

/// Prints the slowest timer tick so far and the commands' time at the server (with
/// `--nocapture`: the figures compared when the schedule's structure changes).
fn report(srv: &Server, k: &str, phase: &str) {
    let stats = srv.info("commandstats");
    eprintln!(
        "{k}: after {phase}: slowest tick {} us; INCR {:?}; FLUSHALL {:?}; slow log {:?}",
        info_i64(srv, "tally", "tally_max_tick_us"),
        stats.get("cmdstat_tscounter.incr"),
        stats.get("cmdstat_flushall"),
        slow_tally_entries(srv),
    );
}
