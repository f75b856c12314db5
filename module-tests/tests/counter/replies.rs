//! Command metadata and reply shapes: COMMAND INFO / GETKEYS, the documented hash layout,
//! RESP2 and RESP3 replies, binary and empty key names.

use super::*;

/// (field, value) pairs of a RESP2 key-spec / command-doc style flat array.
fn flat_map(v: &Value) -> BTreeMap<String, Value> {
    let Value::Array(a) = v else { panic!("{v:?}") };
    a.chunks(2)
        .map(|c| (value_text(&c[0]).unwrap(), c[1].clone()))
        .collect()
}

fn texts(v: &Value) -> Vec<String> {
    let Value::Array(a) = v else { panic!("{v:?}") };
    a.iter().map(|x| value_text(x).unwrap()).collect()
}

per_server!(command_info_and_getkeys);
fn command_info_and_getkeys(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    for (name, arity, write, key_flags, sample) in [
        (
            "tscounter.create",
            -2,
            true,
            ["RW", "insert"],
            &["RESOLUTIONS", "1s:5"][..],
        ),
        (
            "tscounter.incrby",
            -3,
            true,
            ["RW", "update"],
            &["5", "AT", "1"],
        ),
        ("tscounter.incr", -2, true, ["RW", "update"], &[]),
        (
            "tscounter.sum",
            -3,
            false,
            ["RO", "access"],
            &["1m", "5m", "AT", "1"],
        ),
        (
            "tscounter.range",
            -3,
            false,
            ["RO", "access"],
            &["1s", "FROM", "1", "TO", "2", "EMPTY"],
        ),
        ("tscounter.info", 2, false, ["RO", "access"], &[]),
    ] {
        let v = srv.cmd_value(&["COMMAND", "INFO", name]);
        let Value::Array(outer) = &v else {
            panic!("{k}: {v:?}")
        };
        let Value::Array(info) = &outer[0] else {
            panic!("{k}: {name} unknown: {v:?}")
        };
        assert_eq!(value_text(&info[0]).as_deref(), Some(name), "{k}");
        assert_eq!(info[1], v_int(arity), "{k}: {name} arity");
        let flags = texts(&info[2]);
        if write {
            assert_eq!(flags, ["write", "denyoom", "module"], "{k}: {name}");
        } else {
            assert_eq!(flags, ["readonly", "module"], "{k}: {name}");
        }
        assert_eq!(
            &info[3..6],
            &[v_int(1), v_int(1), v_int(1)],
            "{k}: {name} first/last/step"
        );
        let Value::Array(specs) = &info[8] else {
            panic!("{k}: {info:?}")
        };
        assert_eq!(specs.len(), 1, "{k}: {name} has one key spec");
        let spec = flat_map(&specs[0]);
        assert_eq!(
            texts(&spec["flags"]),
            key_flags,
            "{k}: {name} key spec flags"
        );
        let begin = flat_map(&spec["begin_search"]);
        assert_eq!(value_text(&begin["type"]).as_deref(), Some("index"), "{k}");
        assert_eq!(flat_map(&begin["spec"])["index"], v_int(1), "{k}");

        // GETKEYS finds the key (and only it), with or without options.
        for key in ["k", "{tag}other"] {
            let mut cmd = vec![name.to_string(), key.to_string()];
            cmd.extend(sample.iter().map(|s| s.to_string()));
            let mut full = vec!["COMMAND".to_string(), "GETKEYS".into()];
            full.extend(cmd);
            assert_eq!(srv.cmd_value(&full), v_bulks(&[key]), "{k}: {full:?}");
        }
    }
}

per_server!(hash_layout_is_the_documented_one);
fn hash_layout_is_the_documented_one(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    // Resolutions are stored canonically, finest first, whatever the input form.
    assert_eq!(
        srv.cmd_value(&[
            "TSCOUNTER.CREATE",
            "L",
            "RESOLUTIONS",
            "60s:5",
            "1000ms:10",
            "168h:2"
        ]),
        v_ok()
    );
    let rs = res_list("1s:10 1m:5 1w:2");
    let h = hgetall(&srv, b"L");
    assert_eq!(
        h.keys().collect::<Vec<_>>(),
        ["_state", "_tally"],
        "{k}: {h:?}"
    );
    assert_eq!(h["_tally"], "counter 1s:10 1m:5 1w:2", "{k}");
    assert!(
        parse_state(&h["_state"], &rs).iter().all(|&(_, n)| n == 0),
        "{k}: {h:?}"
    );

    let t0 = server_ms(&srv);
    let incs = [(t0 - 2_000, 3), (t0, 4), (t0 - 1_500, -1)];
    for (ts, by) in incs {
        let v = srv.cmd_value(&[
            "TSCOUNTER.INCRBY",
            "L",
            &by.to_string(),
            "AT",
            &ts.to_string(),
        ]);
        assert!(matches!(v, Value::Int(_)), "{k}: {v:?}");
    }
    // `<res label>:<slot index>` = count, where index = floor(ts / res).
    let want = expected_fields(&rs, &incs);
    assert!(
        want.contains_key(&format!("1s:{}", slot(t0, 1000))),
        "{want:?}"
    );
    assert!(
        want.contains_key(&format!("1w:{}", slot(t0, 604_800_000))),
        "{want:?}"
    );
    let h = hgetall(&srv, b"L");
    assert_eq!(slot_fields(&srv, b"L"), want, "{k}");
    assert_eq!(
        h.len(),
        want.len() + 2,
        "{k}: only _tally, _state and slots: {h:?}"
    );
    // `_state`: per resolution the number of stored slots and a lower bound of their
    // indexes (all within `samples` of it).
    for ((lo, n), r) in parse_state(&h["_state"], &rs).into_iter().zip(&rs) {
        let idx: Vec<i64> = want
            .keys()
            .filter_map(|f| f.strip_prefix(&format!("{}:", label(r.ms))))
            .map(|i| i.parse().unwrap())
            .collect();
        assert_eq!(n, idx.len() as i64, "{k}: {r:?} in {h:?}");
        assert!(
            idx.iter().all(|&i| lo <= i && i < lo + r.samples),
            "{k}: {r:?} {h:?}"
        );
    }
    // INFO describes the same thing.
    let starts: Vec<i64> = want
        .keys()
        .map(|f| {
            let (l, i) = f.split_once(':').unwrap();
            let r = rs.iter().find(|r| label(r.ms) == l).unwrap();
            i.parse::<i64>().unwrap() * r.ms
        })
        .collect();
    let info = map_pairs(&srv.cmd_value(&["TSCOUNTER.INFO", "L"]));
    let names: Vec<&str> = info.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["resolutions", "slots", "first", "last", "memory"],
        "{k}"
    );
    assert_eq!(
        info[0].1,
        v_pairs(&[(1000, 10), (60_000, 5), (604_800_000, 2)]),
        "{k}"
    );
    assert_eq!(info[1].1, v_int(want.len() as i64), "{k}");
    assert_eq!(info[2].1, v_int(*starts.iter().min().unwrap()), "{k}");
    assert_eq!(info[3].1, v_int(*starts.iter().max().unwrap()), "{k}");
    assert!(
        matches!(info[4].1, Value::Int(m) if m > 100),
        "{k}: {:?}",
        info[4]
    );
}

per_server!(resp2_and_resp3_reply_shapes);
fn resp2_and_resp3_reply_shapes(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "r", "RESOLUTIONS", "1s:60", "1m:5"]),
        v_ok()
    );
    // An empty counter: first/last are nil.
    let memory = |v: &Value| {
        map_pairs(v)
            .into_iter()
            .find(|(n, _)| n == "memory")
            .map(|(_, m)| m)
            .unwrap()
    };
    let res_pairs = v_pairs(&[(1000, 60), (60_000, 5)]);
    let v2 = srv.cmd_value(&["TSCOUNTER.INFO", "r"]);
    let m = memory(&v2);
    assert_eq!(
        v2,
        v_arr(vec![
            v_bulk("resolutions"),
            res_pairs.clone(),
            v_bulk("slots"),
            v_int(0),
            v_bulk("first"),
            v_nil(),
            v_bulk("last"),
            v_nil(),
            v_bulk("memory"),
            m.clone(),
        ]),
        "{k}: RESP2 INFO is a flat array"
    );
    let v3 = srv.cmd_value_resp3(&["TSCOUNTER.INFO", "r"]);
    assert_eq!(
        v3,
        v_map(vec![
            (v_bulk("resolutions"), res_pairs.clone()),
            (v_bulk("slots"), v_int(0)),
            (v_bulk("first"), v_nil()),
            (v_bulk("last"), v_nil()),
            (v_bulk("memory"), memory(&v3)),
        ]),
        "{k}: RESP3 INFO is a map"
    );

    let t0 = server_ms(&srv);
    let ts = t0 - 3_000;
    let s = ts.to_string();
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCRBY", "r", "6", "AT", &s]),
        v_int(6)
    );
    assert_eq!(
        srv.cmd_value_resp3(&["TSCOUNTER.INCRBY", "r", "1", "AT", &s]),
        v_int(7)
    );
    assert_eq!(
        srv.cmd_value_resp3(&["TSCOUNTER.INCR", "r", "AT", &s]),
        v_int(8)
    );
    let v3 = srv.cmd_value_resp3(&["TSCOUNTER.INFO", "r"]);
    let first = slot(ts, 60_000) * 60_000;
    let last = slot(ts, 1000) * 1000;
    assert_eq!(
        v3,
        v_map(vec![
            (v_bulk("resolutions"), res_pairs.clone()),
            (v_bulk("slots"), v_int(2)),
            (v_bulk("first"), v_int(first)),
            (v_bulk("last"), v_int(last)),
            (v_bulk("memory"), memory(&v3)),
        ]),
        "{k}"
    );
    // SUM: one window → integer, several → array, in both protocols.
    let s_at = t0.to_string();
    for resp3 in [false, true] {
        let q = |a: &[&str]| {
            if resp3 {
                srv.cmd_value_resp3(a)
            } else {
                srv.cmd_value(a)
            }
        };
        assert_eq!(
            q(&["TSCOUNTER.SUM", "r", "5s", "AT", &s_at]),
            v_int(8),
            "{k}"
        );
        assert_eq!(q(&["TSCOUNTER.SUM", "r", "5s", "AT", &s]), v_int(8), "{k}");
        assert_eq!(
            q(&["TSCOUNTER.SUM", "r", "1s", "AT", &s_at]),
            v_int(0),
            "{k}"
        );
        assert_eq!(
            q(&["TSCOUNTER.SUM", "r", "1s", "5s", "5m", "AT", &s_at]),
            v_ints(&[0, 8, 8]),
            "{k}"
        );
        assert_eq!(
            q(&["TSCOUNTER.SUM", "r", "5s", "5s", "AT", &s_at]),
            v_ints(&[8, 8]),
            "{k}"
        );
        // RANGE: [start, count] pairs, oldest first.
        assert_eq!(
            q(&["TSCOUNTER.RANGE", "r", "1s", "FROM", &s, "TO", &s]),
            v_pairs(&[(last, 8)]),
            "{k}"
        );
        assert_eq!(
            q(&[
                "TSCOUNTER.RANGE",
                "r",
                "1s",
                "FROM",
                &(ts - 1000).to_string(),
                "TO",
                &(ts + 1000).to_string(),
                "EMPTY"
            ]),
            v_pairs(&[(last - 1000, 0), (last, 8), (last + 1000, 0)]),
            "{k}"
        );
        assert_eq!(
            q(&["TSCOUNTER.RANGE", "r", "1m", "TO", &s]),
            v_pairs(&[(first, 8)]),
            "{k}"
        );
        assert_eq!(
            q(&[
                "TSCOUNTER.RANGE",
                "r",
                "1m",
                "FROM",
                &(ts + 60_000).to_string()
            ]),
            v_arr(vec![]),
            "{k}"
        );
        assert_eq!(
            q(&[
                "TSCOUNTER.RANGE",
                "r",
                "1s",
                "FROM",
                &s_at,
                "TO",
                &s,
                "EMPTY"
            ]),
            v_arr(vec![]),
            "{k}: FROM after TO"
        );
        assert_eq!(
            q(&["TSCOUNTER.CREATE", "r"]),
            v_err("ERR key already exists"),
            "{k}"
        );
        assert_eq!(q(&["TSCOUNTER.INFO", "nope"]), v_nil(), "{k}");
    }
    assert_eq!(
        srv.cmd_value_resp3(&["TSCOUNTER.CREATE", "r3"]),
        v_ok(),
        "{k}"
    );
}

per_server!(binary_and_empty_key_names);
fn binary_and_empty_key_names(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let keys: [&[u8]; 4] = [b"", b"\x00bin\xff\r\n key", "é:1s:5".as_bytes(), b"_tally"];
    for (n, key) in keys.iter().enumerate() {
        let key = *key;
        let q = |rest: &[&str]| {
            let mut c: Vec<&[u8]> = vec![rest[0].as_bytes(), key];
            c.extend(rest[1..].iter().map(|s| s.as_bytes()));
            srv.cmd_value(&c)
        };
        assert_eq!(
            q(&["TSCOUNTER.CREATE", "RESOLUTIONS", "1s:60", "1m:5"]),
            v_ok(),
            "{k} {n}"
        );
        let t0 = server_ms(&srv);
        let s = t0.to_string();
        assert_eq!(q(&["TSCOUNTER.INCRBY", "5", "AT", &s]), v_int(5), "{k} {n}");
        assert_eq!(q(&["TSCOUNTER.INCR", "AT", &s]), v_int(6), "{k} {n}");
        assert_eq!(
            q(&["TSCOUNTER.SUM", "1m", "5m", "AT", &s]),
            v_ints(&[6, 6]),
            "{k} {n}"
        );
        assert_eq!(
            q(&["TSCOUNTER.RANGE", "1m", "FROM", &s, "TO", &s]),
            v_pairs(&[(slot(t0, 60_000) * 60_000, 6)]),
            "{k} {n}"
        );
        let info = map_pairs(&q(&["TSCOUNTER.INFO"]));
        assert_eq!(info[1].1, v_int(2), "{k} {n}");
        assert_eq!(slot_fields(&srv, key).len(), 2, "{k} {n}");
        assert_eq!(
            q(&["TSCOUNTER.CREATE"]),
            v_err("ERR key already exists"),
            "{k} {n}"
        );
    }
    // The timer finds binary names too: a short-lived counter under an odd name goes.
    let odd = b"\xff\x00timer";
    assert_eq!(
        srv.cmd_value(&[&b"TSCOUNTER.CREATE"[..], odd, b"RESOLUTIONS", b"100ms:2"]),
        v_ok()
    );
    assert_eq!(srv.cmd_value(&[&b"TSCOUNTER.INCR"[..], odd]), v_int(1));
    assert!(
        wait_until(Duration::from_secs(10), || !exists(&srv, odd)),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["DBSIZE"]), v_int(keys.len() as i64), "{k}");
}
