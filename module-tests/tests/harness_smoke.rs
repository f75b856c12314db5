//! Smoke tests for the harness itself, on every server kind.
//!
//! `module_is_loaded` needs `target/release/libtally.so`; the others start
//! servers without the module so they prove the harness works on its own.

use module_tests::*;
use std::time::Duration;

per_server!(module_is_loaded);
fn module_is_loaded(kind: &ServerKind) {
    let srv = Server::start(kind);
    assert_eq!(srv.cmd_value(&["PING"]), v_simple("PONG"), "{}", kind.name);
    let list = srv.cmd_value(&["MODULE", "LIST"]);
    let names: Vec<String> = match &list {
        Value::Array(mods) => mods
            .iter()
            .filter_map(|m| {
                let Value::Array(fields) = m else { return None };
                fields
                    .chunks(2)
                    .find(|c| value_text(&c[0]).as_deref() == Some("name"))
                    .and_then(|c| value_text(&c[1]))
            })
            .collect(),
        other => panic!("{}: MODULE LIST gave {other:?}", kind.name),
    };
    assert!(
        names.iter().any(|n| n == "tally"),
        "{}: modules {names:?}",
        kind.name
    );
    srv.assert_alive();
}

per_server!(reply_variants_resp2_and_resp3);
/// Documents (and checks) the exact `Value` variants for RESP2 and RESP3.
fn reply_variants_resp2_and_resp3(kind: &ServerKind) {
    let srv = Server::start_without_module(kind);
    let k = &kind.name;
    // RESP2
    assert_eq!(srv.cmd_value(&["PING"]), v_simple("PONG"), "{k}");
    assert_eq!(srv.cmd_value(&["SET", "s", "v"]), v_ok(), "{k}");
    assert_eq!(srv.cmd_value(&["GET", "s"]), v_bulk("v"), "{k}");
    assert_eq!(srv.cmd_value(&["GET", "missing"]), v_nil(), "{k}");
    assert_eq!(
        srv.cmd_value(&["HSET", "h", "f1", "a", "f2", "b"]),
        v_int(2),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["HGETALL", "h"]),
        v_bulks(&["f1", "a", "f2", "b"]),
        "{k}"
    );
    assert_eq!(srv.cmd_value(&["ZADD", "z", "1.5", "m"]), v_int(1), "{k}");
    assert_eq!(srv.cmd_value(&["ZSCORE", "z", "m"]), v_bulk("1.5"), "{k}");
    assert_eq!(
        srv.cmd_value(&["SET", "s", "v", "BOGUS"]),
        v_err("ERR syntax error"),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["LPUSH", "s", "x"]),
        v_err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "{k}"
    );
    assert_eq!(
        srv.cmd(&["LPUSH", "s", "x"]),
        Err("WRONGTYPE Operation against a key holding the wrong kind of value".to_string())
    );
    assert_eq!(
        error_text(&srv.cmd_value(&["GET"])).as_deref(),
        Some("ERR wrong number of arguments for 'get' command"),
        "{k}"
    );
    assert_eq!(srv.query::<i64, _>(&["HLEN", "h"]), 2);
    // Nested error inside an array (EXEC) stays a Value::ServerError.
    let mut c = srv.conn();
    redis::cmd("MULTI").query::<()>(&mut c).unwrap();
    redis::cmd("INCR").arg("s").query::<()>(&mut c).unwrap();
    let exec = redis::ConnectionLike::req_command(&mut c, &redis::cmd("EXEC")).unwrap();
    assert_eq!(
        exec,
        v_arr(vec![v_err("ERR value is not an integer or out of range")]),
        "{k}"
    );

    // RESP3
    assert_eq!(srv.cmd_value_resp3(&["SET", "s", "v"]), v_ok(), "{k}");
    assert_eq!(srv.cmd_value_resp3(&["GET", "s"]), v_bulk("v"), "{k}");
    assert_eq!(srv.cmd_value_resp3(&["GET", "missing"]), v_nil(), "{k}");
    assert_eq!(srv.cmd_value_resp3(&["HLEN", "h"]), v_int(2), "{k}");
    assert_eq!(
        srv.cmd_value_resp3(&["HGETALL", "h"]),
        v_map(vec![
            (v_bulk("f1"), v_bulk("a")),
            (v_bulk("f2"), v_bulk("b"))
        ]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value_resp3(&["ZSCORE", "z", "m"]),
        v_double(1.5),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value_resp3(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        v_arr(vec![v_arr(vec![v_bulk("m"), v_double(1.5)])]),
        "{k}"
    );
    assert_eq!(srv.cmd_value_resp3(&["SADD", "st", "x"]), v_int(1), "{k}");
    assert_eq!(
        srv.cmd_value_resp3(&["SMEMBERS", "st"]),
        v_set(vec![v_bulk("x")]),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value_resp3(&["SET", "s", "v", "BOGUS"]),
        v_err("ERR syntax error"),
        "{k}"
    );
    assert!(
        matches!(
            srv.cmd_value_resp3(&["INFO", "server"]),
            Value::VerbatimString { .. }
        ),
        "{k}"
    );
    assert!(srv.is_alive());
    assert!(srv.pid() > 0);
}

per_server!(restart_reloads_the_last_rdb_save);
fn restart_reloads_the_last_rdb_save(kind: &ServerKind) {
    let mut srv = Server::start_without_module(kind);
    let k = &kind.name;
    assert_eq!(srv.cmd_value(&["SET", "k", "v"]), v_ok());
    assert_eq!(srv.cmd_value(&["SAVE"]), v_ok());
    assert_eq!(srv.cmd_value(&["SET", "unsaved", "x"]), v_ok());
    let pid = srv.pid();
    srv.restart();
    assert_ne!(srv.pid(), pid, "{k}: restarted");
    assert_eq!(srv.cmd_value(&["GET", "k"]), v_bulk("v"), "{k}");
    assert_eq!(
        srv.cmd_value(&["GET", "unsaved"]),
        v_nil(),
        "{k}: restart() must not save"
    );

    // restart_saving() persists without an explicit SAVE, all types.
    populate(&srv);
    let before = srv.dump_keyspace();
    srv.restart_saving();
    assert_eq!(srv.dump_keyspace(), before, "{k}: RDB reload");
    srv.assert_alive();
}

per_server!(aof_restart_and_kill_keep_every_write);
fn aof_restart_and_kill_keep_every_write(kind: &ServerKind) {
    let mut srv = Server::start_with(
        kind,
        ServerOptions::new()
            .without_module()
            .config("appendonly", "yes"),
    );
    let k = &kind.name;
    populate(&srv);
    let before = srv.dump_keyspace();
    srv.restart();
    assert_eq!(
        srv.dump_keyspace(),
        before,
        "{k}: AOF reload after SHUTDOWN NOSAVE"
    );
    assert_eq!(srv.cmd_value(&["SET", "after", "1"]), v_ok());
    let before = srv.dump_keyspace();
    srv.restart_after_kill();
    assert_eq!(srv.dump_keyspace(), before, "{k}: AOF reload after SIGKILL");
}

per_server!(replica_gets_the_full_sync_and_later_writes);
fn replica_gets_the_full_sync_and_later_writes(kind: &ServerKind) {
    let primary = Server::start_without_module(kind);
    let replica = Server::start_without_module(kind);
    populate(&primary);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    // Writes after the full sync travel through the replication stream.
    assert_eq!(primary.cmd_value(&["HSET", "h", "late", "1"]), v_int(1));
    assert_eq!(
        primary.cmd_value(&["ZINCRBY", "z", "0.25", "a"]),
        v_bulk("1.75")
    );
    let p = assert_replica_equal(&primary, &replica, "after the late writes");
    assert!(p.len() >= 7, "{p:?}");
}

per_server!(cluster_of_three_primaries_with_replicas_forms);
fn cluster_of_three_primaries_with_replicas_forms(kind: &ServerKind) {
    let cluster = start_cluster_with(kind, 3, 1, ServerOptions::new().without_module());
    let k = &kind.name;
    assert_eq!(cluster.nodes().len(), 6);
    assert_eq!(cluster.primaries().len(), 3, "{k}");
    assert_eq!(cluster.replicas().len(), 3, "{k}");
    for p in cluster.primaries() {
        assert_eq!(cluster.replicas_of(p).len(), 1, "{k}");
    }
    for n in cluster.nodes() {
        let ci = parse_info(&value_text(&n.cmd_value(&["CLUSTER", "INFO"])).unwrap());
        assert_eq!(ci["cluster_state"], "ok", "{k}");
    }
    let mut cc = cluster.cluster_client();
    for i in 0..20 {
        let key = format!("key{i}");
        let _: () = redis::cmd("SET").arg(&key).arg(i).query(&mut cc).unwrap();
        let owner = cluster.node_for_key(&key);
        assert_eq!(
            owner.cmd_value(&["GET", &key]),
            v_bulk(&i.to_string()),
            "{k}"
        );
        assert_eq!(cluster.cmd_value(&["GET", &key]), v_bulk(&i.to_string()));
    }
    // Error replies from the cluster client are Err(RedisError).
    let e = redis::cmd("LPUSH")
        .arg("key1")
        .arg("x")
        .query::<i64>(&mut cc)
        .unwrap_err();
    assert_eq!(
        redis_error_text(&e),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    // A non-owner answers MOVED.
    let other = cluster
        .primaries()
        .into_iter()
        .find(|n| n.port() != cluster.node_for_key("key1").port())
        .unwrap();
    let moved = error_text(&other.cmd_value(&["GET", "key1"])).unwrap();
    assert!(moved.starts_with("MOVED "), "{moved}");
    assert!(wait_until(Duration::from_secs(1), || true));
}

/// One key of each type plus a TTL and a second DB.
fn populate(srv: &Server) {
    assert_eq!(srv.cmd_value(&["SET", "s", "v\x00\u{e9}\\"]), v_ok());
    assert_eq!(srv.cmd_value(&["SET", "ttl", "x", "EX", "1000"]), v_ok());
    assert_eq!(srv.cmd_value(&["HSET", "h", "b", "2", "a", "1"]), v_int(2));
    assert_eq!(
        srv.cmd_value(&["ZADD", "z", "1.5", "a", "-0.1", "b"]),
        v_int(2)
    );
    assert_eq!(srv.cmd_value(&["SADD", "set", "y", "x"]), v_int(2));
    assert_eq!(srv.cmd_value(&["RPUSH", "l", "1", "2", "1"]), v_int(3));
    assert_eq!(
        srv.cmd_value(&["XADD", "stream", "1-1", "f", "v"]),
        v_bulk("1-1")
    );
    let mut c = srv.conn();
    redis::cmd("SELECT").arg(3).query::<()>(&mut c).unwrap();
    redis::cmd("SET")
        .arg("in-db3")
        .arg("1")
        .query::<()>(&mut c)
        .unwrap();
    redis::cmd("SET")
        .arg(&b"bin\xff"[..])
        .arg("2")
        .query::<()>(&mut c)
        .unwrap();
}
