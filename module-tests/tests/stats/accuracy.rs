//! Accuracy against a two-pass reference, and a standard deviation near 1e9 that stays exact.

use super::*;

per_server!(accuracy_against_two_pass_reference);
/// count/sum/min/max/mean/stddev against a two-pass reference and quantiles within 1%,
/// for several distributions, per period and merged over a window of three periods.
fn accuracy_against_two_pass_reference(kind: &ServerKind) {
    let srv = Server::start(kind);
    for (name, xs) in datasets() {
        in_one_period(&srv, |base| {
            let ctx = format!("{} {name}", kind.name);
            let third = xs.len() / 3;
            let (a, rest) = xs.split_at(third);
            let (b, c) = rest.split_at(third);
            add_all(&srv, "s", a, Some(base - 2 * HOUR + 17));
            add_all(&srv, "s", b, Some(base - HOUR + 123_456));
            add_all(&srv, "s", c, None);
            check_get(
                &format!("{ctx} current"),
                &srv.cmd_value(&["STATS.GET", "s"]),
                c,
            );
            check_get(
                &format!("{ctx} 1h"),
                &srv.cmd_value(&["STATS.GET", "s", "WINDOW", "1h"]),
                c,
            );
            let bc = [b, c].concat();
            check_get(
                &format!("{ctx} 2h"),
                &srv.cmd_value(&["STATS.GET", "s", "WINDOW", "2h"]),
                &bc,
            );
            check_get(
                &format!("{ctx} 3h"),
                &srv.cmd_value(&["STATS.GET", "s", "WINDOW", "180m"]),
                &xs,
            );
            check_get(
                &format!("{ctx} resp3"),
                &srv.cmd_value_resp3(&["STATS.GET", "s", "WINDOW", "3h"]),
                &xs,
            );

            let qs = [0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0];
            let r = reference(&xs);
            let mut args = vec!["STATS.QUANTILE".to_string(), "s".into()];
            args.extend(qs.iter().map(|q| q.to_string()));
            args.extend(["WINDOW".to_string(), "3h".to_string()]);
            let Value::Array(got) = srv.cmd_value(&args) else {
                panic!("{ctx}")
            };
            assert_eq!(got.len(), qs.len(), "{ctx}");
            for (q, v) in qs.iter().zip(&got) {
                check_quantile(&format!("{ctx} q={q}"), num(v), r.quantile(*q));
            }
            // q = 0 and q = 1 are the exact extremes.
            assert_eq!(num(&got[0]), r.min, "{ctx}");
            assert_eq!(num(&got[qs.len() - 1]), r.max, "{ctx}");
        });
    }
    srv.assert_alive();
}

per_server!(stddev_near_1e9_is_exact);
/// Values near 1e9 with a spread of 1: sum-of-squares arithmetic would lose everything;
/// the stored moments must stay within 1e-6 (here: 1e-9) of the two-pass stddev, also
/// when several periods are merged.
fn stddev_near_1e9_is_exact(kind: &ServerKind) {
    let srv = Server::start(kind);
    in_one_period(&srv, |base| {
        let mut rng = Rng(7);
        let xs: Vec<f64> = (0..9000).map(|_| 1e9 + rng.uniform()).collect();
        for (i, chunk) in xs.chunks(3000).enumerate() {
            add_all(&srv, "big", chunk, Some(base - i as i64 * HOUR));
        }
        let reply = srv.cmd_value(&["STATS.GET", "big", "WINDOW", "3h"]);
        check_get(&kind.name, &reply, &xs);
        let r = reference(&xs);
        let sd = num(&field(&reply, "stddev"));
        assert!(rel(sd, r.stddev) <= 1e-9, "{sd} vs {}", r.stddev);
        assert!((sd - (1.0f64 / 12.0).sqrt()).abs() < 0.01, "{sd}");
    });
}
