//! Reply shapes in RESP2 and RESP3, and REPORT (its ranking and its declared key).

use super::*;

per_server!(reply_shapes_resp2_and_resp3);
/// Exact reply shapes: RESP2 maps are flat arrays and doubles bulk strings; RESP3 has
/// maps and doubles. Missing keys: GET/QUANTILE/INFO nil, RANGE empty.
fn reply_shapes_resp2_and_resp3(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    assert_eq!(srv.cmd_value(&["STATS.GET", "nokey"]), v_nil(), "{k}");
    assert_eq!(srv.cmd_value_resp3(&["STATS.GET", "nokey"]), v_nil(), "{k}");
    assert_eq!(
        srv.cmd_value(&["STATS.QUANTILE", "nokey", "0.5"]),
        v_nil(),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["STATS.RANGE", "nokey"]),
        v_arr(vec![]),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["STATS.INFO", "nokey"]), v_nil(), "{k}");
    assert_eq!(
        srv.cmd_value_resp3(&["STATS.INFO", "nokey"]),
        v_nil(),
        "{k}"
    );

    in_one_period(&srv, |base| {
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "s", "5", "5", "5"]),
            v_int(3),
            "{k}"
        );
        let names = GET_FIELDS;
        let r2 = |vals: [&str; 8]| {
            let mut items = vec![v_bulk("count"), v_int(3)];
            for (n, v) in names[1..].iter().zip(vals) {
                items.push(v_bulk(n));
                items.push(v_bulk(v));
            }
            v_arr(items)
        };
        let r3 = |vals: [f64; 8]| {
            let mut items = vec![(v_bulk("count"), v_int(3))];
            for (n, v) in names[1..].iter().zip(vals) {
                items.push((v_bulk(n), v_double(v)));
            }
            v_map(items)
        };
        assert_eq!(
            srv.cmd_value(&["STATS.GET", "s"]),
            r2(["15", "5", "5", "5", "0", "5", "5", "5"]),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value_resp3(&["STATS.GET", "s"]),
            r3([15.0, 5.0, 5.0, 5.0, 0.0, 5.0, 5.0, 5.0]),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value(&["STATS.QUANTILE", "s", "0", "0.5", "1"]),
            v_bulks(&["5", "5", "5"]),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value_resp3(&["STATS.QUANTILE", "s", "0.5", "0.99"]),
            v_arr(vec![v_double(5.0), v_double(5.0)]),
            "{k}"
        );
        let range2 = srv.cmd_value(&["STATS.RANGE", "s"]);
        assert_eq!(
            range2,
            v_arr(vec![v_arr(vec![
                v_int(base),
                r2(["15", "5", "5", "5", "0", "5", "5", "5"])
            ])]),
            "{k}"
        );
        let range3 = srv.cmd_value_resp3(&["STATS.RANGE", "s"]);
        assert_eq!(
            range3,
            v_arr(vec![v_arr(vec![
                v_int(base),
                r3([15.0, 5.0, 5.0, 5.0, 0.0, 5.0, 5.0, 5.0])
            ])]),
            "{k}"
        );
        // An empty window of an existing key.
        assert_eq!(srv.cmd_value(&["STATS.CREATE", "e"]), v_ok(), "{k}");
        assert_eq!(
            srv.cmd_value(&["STATS.GET", "e", "WINDOW", "24h"]),
            v_nil(),
            "{k}"
        );
        assert_eq!(
            srv.cmd_value_resp3(&["STATS.QUANTILE", "e", "0.5"]),
            v_nil(),
            "{k}"
        );
        assert_eq!(srv.cmd_value(&["STATS.RANGE", "e"]), v_arr(vec![]), "{k}");
        let info2 = srv.cmd_value(&["STATS.INFO", "e"]);
        let Value::Array(items) = &info2 else {
            panic!("{k}: {info2:?}")
        };
        assert_eq!(
            items[..6],
            [
                v_bulk("period"),
                v_int(HOUR),
                v_bulk("keep"),
                v_int(24),
                v_bulk("periods"),
                v_int(0)
            ],
            "{k}"
        );
        assert_eq!(items[6], v_bulk("memory"), "{k}");
        assert!(matches!(items[7], Value::Int(m) if m > 0), "{k}: {info2:?}");
        let info3 = srv.cmd_value_resp3(&["STATS.INFO", "s"]);
        let Value::Map(m) = &info3 else {
            panic!("{k}: {info3:?}")
        };
        let keys: Vec<String> = m.iter().map(|(k, _)| value_text(k).unwrap()).collect();
        assert_eq!(keys, ["period", "keep", "periods", "memory"], "{k}");
        assert_eq!(field(&info3, "periods"), v_int(1), "{k}");
    });
}

per_server!(report_keeps_the_highest_means);
/// REPORT keeps the n highest current-period means in a native zset, with exact scores,
/// and replicates it.
fn report_keeps_the_highest_means(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    in_one_period(&srv, |base| {
        let mut means: Vec<(String, f64)> = Vec::new();
        for i in 0..10 {
            let page = format!("/page/{i}");
            let key = format!("t:{i}");
            // Means like 7/3 are not exact binary fractions: the score must still be
            // exactly the double the server computes, i.e. sum / count.
            let vals = [
                i as f64 * 10.0,
                i as f64 * 10.0 + 1.0,
                i as f64 * 10.0 + 1.0 + (i % 3) as f64,
            ];
            let texts: Vec<String> = vals.iter().map(|v| v.to_string()).collect();
            let mut args = vec!["STATS.ADD", key.as_str()];
            args.extend(texts.iter().map(String::as_str));
            args.extend(["REPORT", "slowest", page.as_str(), "KEEP", "3"]);
            assert_eq!(srv.cmd_value(&args), v_int(3), "{k}");
            means.push((page, vals.iter().sum::<f64>() / 3.0));
        }
        means.sort_by(|a, b| b.1.total_cmp(&a.1));
        let top: Vec<(String, f64)> = means[..3].to_vec();
        let got: Vec<(String, f64)> = srv.query(&["ZREVRANGE", "slowest", "0", "-1", "WITHSCORES"]);
        assert_eq!(got, top, "{k}");
        // An update re-scores the member with its period's new mean.
        assert_eq!(
            srv.cmd_value(&[
                "STATS.ADD",
                "t:0",
                "1000",
                "REPORT",
                "slowest",
                "/page/0",
                "KEEP",
                "3"
            ]),
            v_int(4),
            "{k}"
        );
        let m0 = (0.0 + 1.0 + 1.0 + 1000.0) / 4.0;
        let got: Vec<(String, f64)> = srv.query(&["ZREVRANGE", "slowest", "0", "0", "WITHSCORES"]);
        assert_eq!(got, vec![("/page/0".to_string(), m0)], "{k}");
        assert_eq!(srv.query::<i64, _>(&["ZCARD", "slowest"]), 3, "{k}");
        // Default KEEP is 100; the member is ranked by the period the values went to.
        for i in 0..120 {
            let key = format!("u:{i}");
            let v = (i * 2).to_string();
            srv.query::<i64, _>(&[
                "STATS.ADD",
                &key,
                &v,
                "AT",
                &(base - HOUR).to_string(),
                "REPORT",
                "r100",
                &key,
            ]);
        }
        assert_eq!(srv.query::<i64, _>(&["ZCARD", "r100"]), 100, "{k}");
        let lowest: Vec<(String, f64)> = srv.query(&["ZRANGE", "r100", "0", "0", "WITHSCORES"]);
        assert_eq!(lowest, vec![("u:20".to_string(), 40.0)], "{k}");
        // Ties are cut like ZREMRANGEBYRANK: lowest score, then lowest member.
        for m in ["b", "a", "c"] {
            srv.query::<i64, _>(&[
                "STATS.ADD",
                &format!("tie:{m}"),
                "1",
                "REPORT",
                "ties",
                m,
                "KEEP",
                "2",
            ]);
        }
        let got: Vec<String> = srv.query(&["ZRANGE", "ties", "0", "-1"]);
        assert_eq!(got, ["b", "c"], "{k}");
    });
}

per_server!(report_key_is_declared);
/// REPORT's rankkey is a declared key: COMMAND GETKEYS lists it, a cluster answers
/// CROSSSLOT for keys in different slots, and ACL key permissions apply.
fn report_key_is_declared(kind: &ServerKind) {
    let k = kind.name.as_str();
    let srv = Server::start(kind);
    assert_eq!(
        srv.cmd_value(&[
            "COMMAND",
            "GETKEYS",
            "STATS.ADD",
            "s",
            "1",
            "2",
            "AT",
            "5",
            "REPORT",
            "rk",
            "m",
            "KEEP",
            "3"
        ]),
        v_bulks(&["s", "rk"]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["COMMAND", "GETKEYS", "STATS.ADD", "s", "1"]),
        v_bulks(&["s"]),
        "{k}"
    );

    // ACL: a user allowed only s* keys cannot REPORT into another key.
    let mut c = conn_as_user(&srv, "u", &["~s*"]);
    let r = redis::cmd("STATS.ADD")
        .arg("s1")
        .arg("1")
        .arg("REPORT")
        .arg("rk")
        .arg("m")
        .query::<Value>(&mut c);
    let text = match r {
        Err(e) => redis_error_text(&e),
        Ok(Value::ServerError(e)) => server_error_text(&e),
        Ok(v) => panic!("{k}: expected NOPERM, got {v:?}"),
    };
    assert!(text.starts_with("NOPERM"), "{k}: {text}");
    let ok = redis::cmd("STATS.ADD")
        .arg("s1")
        .arg("1")
        .arg("REPORT")
        .arg("srk")
        .arg("m")
        .query::<Value>(&mut c);
    assert!(matches!(ok, Ok(Value::Int(1))), "{k}: {ok:?}");
    assert_eq!(srv.query::<i64, _>(&["EXISTS", "rk"]), 0, "{k}");

    let cluster = start_cluster(kind, 3, 0);
    let node = cluster.node_for_key("{a}s");
    let v = node.cmd_value(&["STATS.ADD", "{a}s", "1", "REPORT", "{b}r", "m"]);
    assert!(
        error_text(&v).is_some_and(|t| t.starts_with("CROSSSLOT")),
        "{k}: {v:?}"
    );
    let v = node.cmd_value(&["STATS.ADD", "{a}s", "1", "2", "REPORT", "{a}r", "m"]);
    assert_eq!(v, v_int(2), "{k}");
    let got: Vec<(String, f64)> = node.query(&["ZRANGE", "{a}r", "0", "-1", "WITHSCORES"]);
    assert_eq!(got, vec![("m".to_string(), 1.5)], "{k}");
}
