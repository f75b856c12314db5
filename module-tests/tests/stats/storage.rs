//! Memory of 24 hourly periods, and damaged fields the object survives.

use super::*;

per_server!(memory_of_24_hourly_periods);
/// 24 hourly periods of 10,000 lognormal latencies each stay under 64 KB.
fn memory_of_24_hourly_periods(kind: &ServerKind) {
    let srv = Server::start(kind);
    in_one_period(&srv, |base| {
        let mut rng = Rng(31);
        for h in 0..24 {
            let xs: Vec<f64> = (0..10_000).map(|_| rng.lognormal()).collect();
            add_all(&srv, "lat", &xs, Some(base - h * HOUR));
        }
        let info = srv.cmd_value(&["STATS.INFO", "lat"]);
        assert_eq!(field(&info, "periods"), v_int(24));
        // SAMPLES 0: every field counted (the default samples 5 of a large hash).
        let usage: i64 = srv.query(&["MEMORY", "USAGE", "lat", "SAMPLES", "0"]);
        println!(
            "{}: 24 hourly periods x 10,000 lognormal values: MEMORY USAGE {usage} bytes",
            kind.name
        );
        assert!(usage < 64 * 1024, "{}: {usage} bytes", kind.name);
        let sampled: i64 = srv.query(&["MEMORY", "USAGE", "lat"]);
        assert_eq!(field(&info, "memory"), v_int(sampled));
        let g = srv.cmd_value(&["STATS.GET", "lat", "WINDOW", "24h"]);
        assert_eq!(field(&g, "count"), v_int(240_000));
    });
}

per_server!(corrupt_fields_are_survivable);
/// Malformed stored fields (a user's HSET) never crash a read or a write: the period
/// counts as empty and is overwritten.
fn corrupt_fields_are_survivable(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    in_one_period(&srv, |base| {
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "x", "1", "2"]),
            v_int(2),
            "{k}"
        );
        let m = format!("{base}:m");
        let q = format!("{base}:q");
        srv.query::<(), _>(&["HSET", "x", &q, "\u{1}garbage"]);
        assert_eq!(srv.cmd_value(&["STATS.GET", "x"]), v_nil(), "{k}");
        assert_eq!(srv.cmd_value(&["STATS.RANGE", "x"]), v_arr(vec![]), "{k}");
        assert_eq!(srv.cmd_value(&["STATS.ADD", "x", "7"]), v_int(1), "{k}");
        srv.query::<(), _>(&["HSET", "x", &m, "1 nan 0 0 0 0 0"]);
        assert_eq!(
            srv.cmd_value(&["STATS.QUANTILE", "x", "0.5"]),
            v_nil(),
            "{k}"
        );
        srv.query::<(), _>(&["HDEL", "x", &q]);
        assert_eq!(srv.cmd_value(&["STATS.ADD", "x", "8"]), v_int(1), "{k}");
        assert_eq!(
            num(&field(&srv.cmd_value(&["STATS.GET", "x"]), "mean")),
            8.0,
            "{k}"
        );
        srv.query::<(), _>(&["HSET", "x", "junk", "1", "99:m", "x"]);
        assert_eq!(
            field(&srv.cmd_value(&["STATS.INFO", "x"]), "periods"),
            v_int(1),
            "{k}"
        );
    });
    srv.assert_alive();
}
