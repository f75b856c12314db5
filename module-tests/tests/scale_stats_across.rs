//! `STATS.MGET` and `STATS.MQUANTILE` at their key limit (1000 keys), timed by the
//! server's own clock (`INFO commandstats` after `CONFIG RESETSTAT`, less the time the
//! machine took from the server):
//!
//! * 1000 names of objects keeping the most periods (`KEEP 2000`), read over their whole
//!   window: each object is named many times and read once (`INFO tally` counts one window
//!   read per distinct key), and a repeated call is answered from the read cache within
//!   10 ms. In `make test` 10 objects each named 100 times; `TALLY_LONG=1`: 100 objects
//!   each named 10 times.
//! * 1000 objects of 24 hourly periods (the defaults) over `WINDOW 24h`: a repeated call,
//!   and the call after a write to every key's current period (the closed periods stay
//!   cached), within 10 ms; the read cache's default budget holds every key's windows.
//!
//! The first call after the caches were dropped (`DEBUG RELOAD`) merges every period from
//! the hashes; its time is printed, not bounded: it grows with keys x periods (see the
//! command's page for the figures measured).

use module_tests::*;

const MAX_COMMAND_US: f64 = STALL_LIMIT_US as f64;
const HOUR: i64 = 3_600_000;

/// Calls of a repeated read timed; the best counts (a moment without CPU on a loaded
/// machine is not tally's).
const TRIES: usize = 3;

/// Values of period `p` of object `o`: five latencies spread over 1 to 10,000.
fn values(o: usize, p: i64) -> Vec<String> {
    (0..5)
        .map(|i| {
            let x = ((o as i64 * 7919 + p * 104_729 + i * 15_485_863) % 40_000) as f64 / 10_000.0;
            format!("{:.3}", 10f64.powf(x))
        })
        .collect()
}

/// Creates `name` with one-hour periods keeping `keep` of them and fills the `periods`
/// newest ones (the newest at `now`).
fn fill(conn: &mut redis::Connection, o: usize, name: &str, keep: i64, periods: i64, now: i64) {
    let keep = keep.to_string();
    let created = conn_value(conn, &["STATS.CREATE", name, "PERIOD", "1h", "KEEP", &keep]);
    assert_eq!(created, v_ok());
    let cmds: Vec<Vec<String>> = (0..periods)
        .map(|p| {
            let mut c = vec!["STATS.ADD".to_string(), name.to_string()];
            c.extend(values(o, p));
            c.extend(["AT".to_string(), (now - p * HOUR).to_string()]);
            c
        })
        .collect();
    for chunk in cmds.chunks(5_000) {
        for reply in pipeline(conn, chunk) {
            assert!(matches!(reply, Value::Int(_)), "{reply:?}");
        }
    }
}

/// Server time of one call of `cmd` (µs), less the time the server lost meanwhile (what
/// is bounded), and the server's own figure (what is printed).
fn timed_raw(srv: &Server, cmd: &[String]) -> (f64, f64, Value) {
    assert_eq!(srv.cmd_value(&["CONFIG", "RESETSTAT"]), v_ok());
    let lost = Lost::start(srv);
    let reply = srv.cmd_value(cmd);
    let name = cmd[0].to_lowercase();
    let held = usec_per_call_held(srv, &name, &lost);
    (held, usec_per_call(srv, &name), reply)
}

/// The best of [`TRIES`] calls of `cmd`, each answering `want`: the time held (bounded)
/// and the server's own figure (printed).
fn best_of(srv: &Server, cmd: &[String], want: &Value) -> (f64, f64) {
    (0..TRIES)
        .map(|_| {
            let (held, raw, reply) = timed_raw(srv, cmd);
            assert_eq!(&reply, want, "{}: {}", srv.kind().name, cmd[0]);
            (held, raw)
        })
        .fold((f64::MAX, f64::MAX), |(h, r), (held, raw)| {
            (h.min(held), r.min(raw))
        })
}

fn window_reads(srv: &Server) -> i64 {
    info_i64(srv, "tally", "tally_stats_cache_hits")
        + info_i64(srv, "tally", "tally_stats_cache_misses")
}

/// MGET and MQUANTILE of `names` over `window`: the first call after the caches were
/// dropped (printed), then the repeated call, bounded. Returns the MGET's reply.
fn check_reads(srv: &Server, what: &str, names: &[String], window: &str, distinct: i64) -> Value {
    let k = &srv.kind().name;
    let count = names.len().to_string();
    let mut mget = vec!["STATS.MGET".to_string(), count.clone()];
    mget.extend(names.iter().cloned());
    mget.extend(["WINDOW".to_string(), window.to_string()]);
    let mut mquantile = vec!["STATS.MQUANTILE".to_string(), count];
    mquantile.extend(names.iter().cloned());
    mquantile.extend(["0.5", "0.99", "WINDOW", window].map(String::from));
    let mut answer = v_nil();
    for cmd in [&mget, &mquantile] {
        assert_eq!(srv.cmd_value(&["DEBUG", "RELOAD"]), v_ok());
        let before = window_reads(srv);
        let (_, cold_us, reply) = timed_raw(srv, cmd);
        assert_eq!(
            window_reads(srv) - before,
            distinct,
            "{k}: {what}: {} reads each distinct key once",
            cmd[0]
        );
        assert!(!matches!(reply, Value::Nil), "{k}: {what}: {reply:?}");
        let (warm_us, warm_raw) = best_of(srv, cmd, &reply);
        println!(
            "{k}: {what}: {}: first call {cold_us:.0} us, repeated {warm_raw:.0} us",
            cmd[0]
        );
        assert!(
            warm_us < MAX_COMMAND_US,
            "{k}: {what}: a repeated {} took {warm_us:.0} us",
            cmd[0]
        );
        if cmd[0] == "STATS.MGET" {
            answer = reply;
        }
    }
    answer
}

per_server!(one_kind_at_a_time: reads_at_the_key_limit_over_the_most_periods);
fn reads_at_the_key_limit_over_the_most_periods(kind: &ServerKind) {
    let srv = Server::start(kind);
    let mut conn = srv.conn();
    let objects = if long_run() { 100 } else { 10 };
    let now = server_ms(&srv);
    for o in 0..objects {
        fill(&mut conn, o, &format!("o{o}"), 2000, 2000, now);
    }
    let names: Vec<String> = (0..1000).map(|i| format!("o{}", i % objects)).collect();
    // Inside one hour: the windows move at its end (retried once if it passed).
    for _ in 0..2 {
        let hour = server_ms(&srv).div_euclid(HOUR);
        let what = format!("1000 names of {objects} objects of 2000 periods");
        check_reads(&srv, &what, &names, "2000h", objects as i64);
        if server_ms(&srv).div_euclid(HOUR) == hour {
            return;
        }
    }
    panic!("an hour passed during both tries");
}

per_server!(one_kind_at_a_time: reads_of_a_thousand_daily_windows);
fn reads_of_a_thousand_daily_windows(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let mut conn = srv.conn();
    for _ in 0..2 {
        assert_eq!(srv.cmd_value(&["FLUSHALL"]), v_ok());
        let now = server_ms(&srv);
        let hour = now.div_euclid(HOUR);
        let names: Vec<String> = (0..1000).map(|i| format!("h{i}")).collect();
        for (o, name) in names.iter().enumerate() {
            fill(&mut conn, o, name, 24, 24, now);
        }
        let what = "1000 objects of 24 hourly periods";
        check_reads(&srv, what, &names, "24h", 1000);
        let cached = info_i64(&srv, "tally", "tally_cache_bytes");
        let budget = info_i64(&srv, "tally", "tally_cache_max_memory");
        assert!(cached <= budget, "{k}: {cached} B cached");
        // A write to every key's current period: the closed periods stay cached, and the
        // next call merges one period per key.
        let mut mget = vec!["STATS.MGET".to_string(), "1000".to_string()];
        mget.extend(names.iter().cloned());
        mget.extend(["WINDOW".to_string(), "24h".to_string()]);
        let (mut after_write, mut after_write_raw) = (f64::MAX, f64::MAX);
        for _ in 0..TRIES {
            let adds: Vec<Vec<String>> = names
                .iter()
                .map(|n| vec!["STATS.ADD".to_string(), n.clone(), "5".to_string()])
                .collect();
            pipeline(&mut conn, &adds);
            let (us, raw, reply) = timed_raw(&srv, &mget);
            assert!(!matches!(reply, Value::Nil), "{k}: {reply:?}");
            after_write = after_write.min(us);
            after_write_raw = after_write_raw.min(raw);
        }
        println!("{k}: {what}: STATS.MGET after a write to every key: {after_write_raw:.0} us");
        if server_ms(&srv).div_euclid(HOUR) != hour {
            continue;
        }
        assert!(
            after_write < MAX_COMMAND_US,
            "{k}: {what}: MGET after a write to every key took {after_write:.0} us"
        );
        return;
    }
    panic!("{k}: an hour passed during both tries");
}
