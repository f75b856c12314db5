//! Replication and persistence (replica equality, AOF/RDB reload, expiry resuming after
//! restart and promotion), and DEL/UNLINK/EXPIRE/RENAME carrying the derived keys.

use super::*;

fn write_mixed_workload(srv: &Server) {
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "long", "WINDOW", "24h", "SLOT", "1h"]),
        v_ok()
    );
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "short", "WINDOW", "1s", "SLOT", "200ms"]),
        v_ok()
    );
    let t = server_ms(srv);
    for i in 0..40 {
        let m = format!("m{}", i % 13);
        srv.cmd(&[
            "TSRANK.INCRBY",
            "long",
            &(1 + i % 4).to_string(),
            &m,
            "AT",
            &(t - (i % 10) * HOUR).to_string(),
        ])
        .expect("incrby long");
        srv.cmd(&[
            "TSRANK.INCRBY",
            "short",
            &(1 + i % 3).to_string(),
            &m,
            "2",
            "x",
        ])
        .expect("incrby short");
    }
}

per_server!(replica_equals_primary_after_expiry);
fn replica_equals_primary_after_expiry(kind: &ServerKind) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    write_mixed_workload(&primary);
    assert_replica_equal(&primary, &replica, "after writes");
    // The short board expires on the primary only; the replica gets the effects.
    assert!(wait_until(Duration::from_secs(5), || keys(
        &primary, "short*"
    )
    .is_empty()));
    assert_replica_equal(&primary, &replica, "after expiry");
    assert!(keys(&replica, "short*").is_empty());
    assert_eq!(
        replica.cmd_value(&["TSRANK.TOP", "long", "100", "WITHSCORES"]),
        primary.cmd_value(&["TSRANK.TOP", "long", "100", "WITHSCORES"])
    );
}

per_server!(aof_and_rdb_reload_hold_the_same_data);
fn aof_and_rdb_reload_hold_the_same_data(kind: &ServerKind) {
    let mut srv = Server::start_with(kind, ServerOptions::new().config("appendonly", "yes"));
    write_mixed_workload(&srv);
    assert!(wait_until(Duration::from_secs(5), || keys(&srv, "short*").is_empty()));
    let before = srv.dump_keyspace();
    srv.restart();
    assert_eq!(srv.dump_keyspace(), before, "{}: AOF reload", kind.name);
    srv.restart_saving();
    assert_eq!(srv.dump_keyspace(), before, "{}: RDB reload", kind.name);
}

per_server!(expiry_resumes_after_restart_and_promotion);
fn expiry_resumes_after_restart_and_promotion(kind: &ServerKind) {
    let k = &kind.name;
    // Restart (RDB) before the slots leave: expiry picks up by itself.
    let mut srv = Server::start(kind);
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", "r", "WINDOW", "2s", "SLOT", "1s"]),
        v_ok()
    );
    srv.cmd(&["TSRANK.INCRBY", "r", "5", "a", "3", "b"])
        .expect("incr");
    srv.restart_saving();
    assert_eq!(keys(&srv, "r*").len(), 3, "{k}: {:?}", keys(&srv, "r*"));
    assert!(
        wait_until(Duration::from_secs(5), || keys(&srv, "r*").is_empty()),
        "{k} after restart"
    );

    // A replica promoted with REPLICAOF NO ONE expires what it received.
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    assert_eq!(
        primary.cmd_value(&["TSRANK.CREATE", "p", "WINDOW", "2s", "SLOT", "1s"]),
        v_ok()
    );
    primary
        .cmd(&["TSRANK.INCRBY", "p", "5", "a"])
        .expect("incr");
    wait_replica_synced(&primary, &replica);
    assert_eq!(replica.cmd_value(&["REPLICAOF", "NO", "ONE"]), v_ok());
    drop(primary); // killed: nothing more comes from it
    assert_eq!(keys(&replica, "p*").len(), 3, "{k}");
    assert!(
        wait_until(Duration::from_secs(5), || keys(&replica, "p*").is_empty()),
        "{k} after promotion"
    );
}

// ================================================================= lifecycle of derived keys

per_server!(del_unlink_expire_rename_carry_derived_keys);
fn del_unlink_expire_rename_carry_derived_keys(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    let fill = |name: &str| {
        let t = server_ms(&srv);
        srv.cmd(&[
            "TSRANK.INCRBY",
            name,
            "3",
            "a",
            "1",
            "b",
            "AT",
            &(t - HOUR).to_string(),
        ])
        .expect("incr");
        srv.cmd(&["TSRANK.INCRBY", name, "2", "b", "AT", &t.to_string()])
            .expect("incr");
    };
    let gone =
        |pattern: &str| wait_until(Duration::from_secs(1), || keys(&srv, pattern).is_empty());

    fill("d");
    assert_eq!(keys(&srv, "d*").len(), 4, "{k}: d, d|meta and two slots");
    assert_eq!(srv.cmd_value(&["DEL", "d"]), v_int(1));
    assert!(gone("d*"), "{k} DEL: {:?}", keys(&srv, "d*"));

    fill("u");
    assert_eq!(srv.cmd_value(&["UNLINK", "u"]), v_int(1));
    assert!(gone("u*"), "{k} UNLINK");

    fill("e");
    assert_eq!(srv.cmd_value(&["PEXPIRE", "e", "50"]), v_int(1));
    assert!(
        wait_until(Duration::from_secs(2), || keys(&srv, "e*").is_empty()),
        "{k} EXPIRE"
    );

    // RENAME: the whole board moves and reads on the new name are right at once.
    fill("r1");
    assert_eq!(srv.cmd_value(&["RENAME", "r1", "r2"]), v_ok());
    assert_eq!(
        member_totals(&srv.cmd_value(&["TSRANK.TOP", "r2", "10", "WITHSCORES"])),
        vec![("b".into(), 3), ("a".into(), 3)]
    );
    assert!(gone("r1*"), "{k} RENAME source: {:?}", keys(&srv, "r1*"));
    assert_eq!(keys(&srv, "r2*").len(), 4, "{k}: {:?}", keys(&srv, "r2*"));
    assert_eq!(srv.cmd_value(&["TSRANK.INCRBY", "r2", "1", "a"]), v_int(4));

    // RENAME over an existing board replaces it entirely.
    srv.cmd(&["TSRANK.INCRBY", "r3", "7", "z"]).expect("incr");
    assert_eq!(srv.cmd_value(&["RENAME", "r2", "r3"]), v_ok());
    assert!(gone("r2*"));
    assert_eq!(
        srv.cmd_value(&["TSRANK.SCORE", "r3", "z"]),
        v_nil(),
        "{k}: old r3 data gone"
    );
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "r3", "a"]), v_int(4));
    assert!(
        wait_until(Duration::from_secs(1), || keys(&srv, "r3*").len() == 4),
        "{k}: {:?}",
        keys(&srv, "r3*")
    );

    // A plain key renamed over a board: the board's derived keys go.
    srv.cmd(&["TSRANK.INCRBY", "r4", "1", "z"]).expect("incr");
    srv.cmd(&["SET", "plain", "x"]).expect("set");
    assert_eq!(srv.cmd_value(&["RENAME", "plain", "r4"]), v_ok());
    assert!(
        wait_until(Duration::from_secs(1), || keys(&srv, "r4*")
            == vec!["r4".to_string()]),
        "{k}: {:?}",
        keys(&srv, "r4*")
    );

    // DEL then immediate re-creation never inherits old slots.
    fill("q");
    let _ = srv.cmd(&["DEL", "q"]);
    assert_eq!(
        srv.cmd_value(&["TSRANK.INCRBY", "q", "1", "a"]),
        v_int(1),
        "{k}"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(srv.cmd_value(&["TSRANK.SCORE", "q", "a"]), v_int(1), "{k}");
    assert_eq!(keys(&srv, "q*").len(), 3, "{k}: {:?}", keys(&srv, "q*"));
    srv.assert_alive();
}
