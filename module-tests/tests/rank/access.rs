//! ACL checked on the derived keys, and hash tags required in cluster mode.

use super::*;

per_server!(acl_is_checked_on_derived_keys);
fn acl_is_checked_on_derived_keys(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    srv.cmd(&["TSRANK.INCRBY", "lb", "1", "a"]).expect("incr");
    // u may use lb and its slot hashes but not lb|meta; v may use lb and lb|meta only.
    let mut users = [
        ("u", conn_as_user(&srv, "u", &["~lb", "~lb|slot|*"])),
        ("v", conn_as_user(&srv, "v", &["~lb", "~lb|meta"])),
        ("w", conn_as_user(&srv, "w", &["~lb*"])),
    ];
    let before = srv.dump_keyspace();
    for (user, conn) in &mut users[..2] {
        let user = *user;
        for cmd in [
            &["TSRANK.INCRBY", "lb", "1", "a"][..],
            &["TSRANK.TOP", "lb", "10"][..],
            &["TSRANK.SCORE", "lb", "a"][..],
            &["TSRANK.INFO", "lb"][..],
            &["TSRANK.AROUND", "lb", "a", "2", "WITHSCORES"][..],
            &["TSRANK.RANK", "lb", "a", "TIES"][..],
            &["TSRANK.MSCORE", "lb", "a", "b"][..],
        ] {
            let v = conn_value(conn, cmd);
            let text = error_text(&v).unwrap_or_default();
            if user == "v" && cmd[0] != "TSRANK.INCRBY" && cmd[0] != "TSRANK.INFO" {
                // Reads that need no slot hash are allowed for v.
                assert!(error_text(&v).is_none(), "{k} {user} {cmd:?}: {v:?}");
                continue;
            }
            assert!(text.starts_with("NOPERM"), "{k} {user} {cmd:?}: {v:?}");
        }
    }
    // The main key itself is declared (key specs): a user with only the derived keys is
    // refused by the server.
    let mut parts_only = conn_as_user(&srv, "x", &["~lb|*"]);
    for cmd in [
        &["TSRANK.AROUND", "lb", "a", "2"][..],
        &["TSRANK.RANK", "lb", "a", "TIES"][..],
        &["TSRANK.MSCORE", "lb", "a"][..],
    ] {
        let v = conn_value(&mut parts_only, cmd);
        let text = error_text(&v).unwrap_or_default();
        assert!(text.starts_with("NOPERM"), "{k} x {cmd:?}: {v:?}");
    }
    assert_eq!(srv.dump_keyspace(), before, "{k}: NOPERM wrote something");
    assert_eq!(
        conn_value(&mut users[2].1, &["TSRANK.INCRBY", "lb", "1", "a"]),
        v_int(2),
        "{k}"
    );
}

per_server!(cluster_mode_requires_a_hash_tag);
fn cluster_mode_requires_a_hash_tag(kind: &ServerKind) {
    let srv = cluster_node(kind);
    let err = NO_HASH_TAG;
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "lb", "1", "a"]),
        v_err(err),
        "{}",
        kind.name
    );
    assert_eq!(srv.cmd_value(&["TSRANK.TOP", "lb", "1"]), v_err(err));
    assert_eq!(srv.cmd_value(&["TSRANK.CREATE", "lb{"]), v_err(err));
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "{lb}", "1", "a"]),
        v_int(1)
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "x{lb}y", "2", "a"]),
        v_int(2)
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.TOP", "x{lb}y", "1", "WITHSCORES"]),
        v_arr(vec![v_bulk("a"), v_int(2)])
    );
    // Every key of a board is in one slot.
    let slot_of = |key: &str| srv.query::<i64, _>(&["CLUSTER", "KEYSLOT", key]);
    for key in keys(&srv, "x{lb}y*") {
        assert_eq!(slot_of(&key), slot_of("x{lb}y"), "{key}");
    }
}
