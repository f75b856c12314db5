//! RESP2 and RESP3 reply shapes and the config defaults.

use super::*;

per_server!(replies_in_resp2_and_resp3_and_config_defaults);
fn replies_in_resp2_and_resp3_and_config_defaults(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    // Auto-create takes tally.rank-window / tally.rank-slot.
    srv.cmd(&["CONFIG", "SET", "tally.rank-window", "2h"])
        .expect("config");
    srv.cmd(&["CONFIG", "SET", "tally.rank-slot", "30m"])
        .expect("config");
    let t = server_ms(&srv);
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "lb", "5", "a", "3", "b", "2", "a"]),
        v_arr(vec![v_int(5), v_int(3), v_int(7)])
    );
    assert_eq!(srv.cmd_value(&["TSRANK.INCRBY", "lb", "3", "c"]), v_int(3));
    let oldest = (t / 1_800_000) * 1_800_000;
    assert_eq!(
        srv.cmd_value(&["TSRANK.INFO", "lb"]),
        v_arr(vec![
            v_bulk("window"),
            v_int(7_200_000),
            v_bulk("slot"),
            v_int(1_800_000),
            v_bulk("members"),
            v_int(3),
            v_bulk("slots"),
            v_int(1),
            v_bulk("oldest"),
            v_int(oldest),
            v_bulk("capacity"),
            v_int(0),
            v_bulk("error"),
            v_int(0),
        ]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value_resp3(&["TSRANK.INFO", "lb"]),
        v_map(vec![
            (v_bulk("window"), v_int(7_200_000)),
            (v_bulk("slot"), v_int(1_800_000)),
            (v_bulk("members"), v_int(3)),
            (v_bulk("slots"), v_int(1)),
            (v_bulk("oldest"), v_int(oldest)),
            (v_bulk("capacity"), v_int(0)),
            (v_bulk("error"), v_int(0)),
        ])
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "lb", "2"]),
        v_bulks(&["a", "c"])
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "lb", "5", "WITHSCORES"]),
        v_arr(vec![
            v_bulk("a"),
            v_int(7),
            v_bulk("c"),
            v_int(3),
            v_bulk("b"),
            v_int(3)
        ])
    );
    assert_eq!(
        srv.cmd_value_resp3(&["TSRANK.TOP", "lb", "5", "WITHSCORES"]),
        v_arr(vec![
            v_arr(vec![v_bulk("a"), v_int(7)]),
            v_arr(vec![v_bulk("c"), v_int(3)]),
            v_arr(vec![v_bulk("b"), v_int(3)]),
        ])
    );
    assert_eq!(
        srv.cmd_value_resp3(&["TSRANK.TOP", "lb", "1", "OFFSET", "1"]),
        v_bulks(&["c"])
    );
    assert_eq!(srv.cmd_value(&["TSRANK.TOP", "lb", "0"]), v_arr(vec![]));
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "lb", "a"]), v_int(7));
    assert_eq!(srv.cmd_value_resp3(&["TSRANK.SCORE", "lb", "zz"]), v_nil());
    assert_eq!(srv.cmd_value(&["TSRANK.RANK", "lb", "b"]), v_int(2));
    // Missing keys: empty / nil.
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "none", "10", "WITHSCORES"]),
        v_arr(vec![])
    );
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "none", "a"]), v_nil());
    assert_eq!(srv.cmd_value(&["TSRANK.RANK", "none", "a"]), v_nil());
    assert_eq!(srv.cmd_value(&["TSRANK.INFO", "none"]), v_nil());
    assert_eq!(srv.cmd_value_resp3(&["TSRANK.INFO", "none"]), v_nil());
    // A created, empty board.
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "empty", "WINDOW", "1d", "SLOT", "1h"]),
        v_ok()
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.INFO", "empty"]),
        v_arr(vec![
            v_bulk("window"),
            v_int(86_400_000),
            v_bulk("slot"),
            v_int(3_600_000),
            v_bulk("members"),
            v_int(0),
            v_bulk("slots"),
            v_int(0),
            v_bulk("oldest"),
            v_nil(),
            v_bulk("capacity"),
            v_int(0),
            v_bulk("error"),
            v_int(0),
        ])
    );
    // Key layout: the sorted set of totals, the meta hash and one hash per slot.
    assert_eq!(
        keys(&srv, "lb*"),
        vec![
            "lb".to_string(),
            "lb|meta".into(),
            format!("lb|slot|{}", t / 1_800_000)
        ]
    );
    assert_eq!(
        srv.cmd_value(&["ZREVRANGE", "lb", "0", "9", "WITHSCORES"]),
        v_bulks(&["a", "7", "c", "3", "b", "3"])
    );
    assert_eq!(
        srv.cmd_value(&["HGET", &format!("lb|slot|{}", t / 1_800_000), "a"]),
        v_bulk("7")
    );
    let marker = value_text(&srv.cmd_value(&["HGET", "lb|meta", "_tally"])).unwrap();
    // `_tally` holds the settings only; the live slot range has its own field.
    assert_eq!(marker, "rank 7200000 1800000", "{k}");
    let i = t / 1_800_000;
    assert_eq!(
        srv.cmd_value(&["HGET", "lb|meta", "_slots"]),
        v_bulk(&format!("{i} {i}")),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["COMMAND", "GETKEYS", "TSRANK.INCRBY", "lb", "1", "a"]),
        v_bulks(&["lb"])
    );
}
