//! Windows and ranges across periods.

use super::*;

per_server!(windows_and_ranges_across_periods);
/// WINDOW, RANGE (FROM/TO, oldest first, exact period starts) and the ADD reply.
fn windows_and_ranges_across_periods(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    in_one_period(&srv, |base| {
        let at = |t: i64| t.to_string();
        // ADD replies with the count of the period that received the values.
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "1", "2", "3", "AT", &at(base - 2 * HOUR)]),
            v_int(3),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "4", "AT", &at(base - 2 * HOUR + HOUR - 1)]),
            v_int(4),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "10", "at", &at(base - HOUR + 5)]),
            v_int(1),
            "{k}"
        );
        // Nothing in the current period yet.
        assert_eq!(srv.cmd_value(&["STATS.GET", "w"]), v_nil(), "{k}");
        assert_eq!(
            srv.cmd_value(&["STATS.QUANTILE", "w", "0.5"]),
            v_nil(),
            "{k}"
        );
        assert_eq!(
            field(&srv.cmd_value(&["STATS.GET", "w", "WINDOW", "2h"]), "count"),
            v_int(1),
            "{k}"
        );
        assert_eq!(
            field(&srv.cmd_value(&["STATS.GET", "w", "WINDOW", "3h"]), "count"),
            v_int(5),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "20", "30"]),
            v_int(2),
            "{k}"
        );
        let g = srv.cmd_value(&["STATS.GET", "w", "WINDOW", "24h"]);
        assert_eq!(field(&g, "count"), v_int(7), "{k}");
        assert_eq!(num(&field(&g, "sum")), 70.0, "{k}");
        assert_eq!(num(&field(&g, "mean")), 10.0, "{k}");
        assert_eq!(num(&field(&g, "min")), 1.0, "{k}");
        assert_eq!(num(&field(&g, "max")), 30.0, "{k}");

        let starts = |v: Value| -> Vec<i64> {
            let Value::Array(rows) = v else {
                panic!("{k}: {v:?}")
            };
            rows.iter()
                .map(|row| match row {
                    Value::Array(p) if p.len() == 2 => match p[0] {
                        Value::Int(s) => s,
                        _ => panic!("{k}: {row:?}"),
                    },
                    _ => panic!("{k}: {row:?}"),
                })
                .collect()
        };
        let all = vec![base - 2 * HOUR, base - HOUR, base];
        assert_eq!(starts(srv.cmd_value(&["STATS.RANGE", "w"])), all, "{k}");
        assert_eq!(
            starts(srv.cmd_value(&["STATS.RANGE", "w", "FROM", &at(base - HOUR)])),
            all[1..],
            "{k}"
        );
        assert_eq!(
            starts(srv.cmd_value(&["STATS.RANGE", "w", "TO", &at(base - HOUR)])),
            all[..2],
            "{k}"
        );
        // FROM/TO select the periods containing them.
        assert_eq!(
            starts(srv.cmd_value(&[
                "STATS.RANGE",
                "w",
                "FROM",
                &at(base - 90 * 60_000),
                "TO",
                &at(base - 30 * 60_000)
            ])),
            all[..2],
            "{k}"
        );
        assert_eq!(
            starts(srv.cmd_value(&["STATS.RANGE", "w", "FROM", &at(base + HOUR)])),
            Vec::<i64>::new(),
            "{k}"
        );
        // Each row's map is that period's statistics.
        let Value::Array(rows) = srv.cmd_value(&["STATS.RANGE", "w"]) else {
            panic!()
        };
        let Value::Array(first) = &rows[0] else {
            panic!()
        };
        assert_eq!(field(&first[1], "count"), v_int(4), "{k}");
        assert_eq!(num(&field(&first[1], "mean")), 2.5, "{k}");
        assert_eq!(
            num(&field(&first[1], "stddev")),
            (5.0f64 / 3.0).sqrt(),
            "{k}"
        );

        // AT older than the kept range (24 periods by default) is refused.
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "1", "AT", &at(base - 24 * HOUR)]),
            v_err("ERR timestamp is outside the kept range"),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "1", "AT", &at(base - 23 * HOUR)]),
            v_int(1),
            "{k}"
        );
        // A little in the future is now; too far is refused.
        let now = server_ms(&srv);
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "1", "AT", &at(now + 5_000)]),
            v_int(3),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "w", "1", "AT", &at(now + 3_600_000)]),
            v_err("ERR timestamp is too far in the future"),
            "{k}"
        );
        let info = srv.cmd_value(&["STATS.INFO", "w"]);
        assert_eq!(field(&info, "period"), v_int(HOUR), "{k}");
        assert_eq!(field(&info, "keep"), v_int(24), "{k}");
        assert_eq!(field(&info, "periods"), v_int(4), "{k}");
        // The moments field is the 57-byte binary form: tag 2, count, sum, ...
        let m: Vec<u8> = srv.query(&["HGET", "w", &format!("{}:m", base - 2 * HOUR)]);
        assert_eq!(m.len(), 57, "{k}: {m:?}");
        assert_eq!(m[0], 2, "{k}: {m:?}");
        assert_eq!(m[1..9], 4u64.to_le_bytes(), "{k}: count");
        assert_eq!(m[9..17], 10f64.to_bits().to_le_bytes(), "{k}: sum");
        let marker: String = srv.query(&["HGET", "w", "_tally"]);
        assert_eq!(marker, "stats 1h 24", "{k}");
    });
}
