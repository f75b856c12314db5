//! Tally writes inside `MULTI`/`EXEC` and Lua scripts replicate as their effects.

use super::*;

per_server!(multi_and_scripts_replicate);
/// Tally writes inside `MULTI`/`EXEC` and inside Lua scripts (`EVAL`, `redis.call`)
/// replicate as their effects too: the replica (and the AOF) end equal to the primary.
fn multi_and_scripts_replicate(kind: &ServerKind) {
    let k = &kind.name;
    let opts = ServerOptions::new().config("appendonly", "yes");
    let (mut primary, replica) = start_pair(kind, opts);
    let mut conn = primary.conn();
    for fam in [COUNTER, RANK, STATS] {
        let cmds: Vec<Vec<String>> = (fam.setup)("x:")
            .into_iter()
            .chain((0..3).flat_map(|r| (fam.write)("x:", r)))
            .collect();
        let mut pipe = redis::pipe();
        pipe.atomic();
        for c in &cmds {
            let mut cmd = redis::Cmd::new();
            for a in c {
                cmd.arg(a.as_bytes());
            }
            pipe.add_command(cmd);
        }
        let out: Value = pipe
            .query(&mut conn)
            .unwrap_or_else(|e| panic!("{k}: MULTI: {e}"));
        let Value::Array(replies) = out else {
            panic!("{k}: EXEC gave {out:?}")
        };
        for (c, v) in cmds.iter().zip(&replies) {
            assert!(error_text(v).is_none(), "{k}: {c:?} in MULTI: {v:?}");
        }
        // The same writes from a script, on other keys.
        for c in (fam.write)("lua:", 0) {
            let script = "return redis.call(unpack(ARGV))";
            let mut args = vec!["EVAL".to_string(), script.into(), "0".into()];
            args.extend(c.iter().cloned());
            let v = primary.cmd_value(&args);
            assert!(error_text(&v).is_none(), "{k}: EVAL {c:?}: {v:?}");
        }
    }
    // An error inside a transaction changes nothing and the rest still replicates.
    let v = primary.cmd_value(&[
        "EVAL",
        "return redis.pcall('TSCOUNTER.INCRBY', KEYS[1], 'x')",
        "1",
        "lua:bad",
    ]);
    assert_eq!(
        v,
        v_err("ERR value is not an integer or out of range"),
        "{k}"
    );
    let compared = assert_replica_equal(&primary, &replica, "MULTI and scripts");
    assert!(!compared.is_empty(), "{k}: nothing to compare");
    wait_tiny_expired(&primary, COUNTER);
    let settled = primary.dump_keyspace();
    primary.restart();
    assert_eq!(
        primary.dump_keyspace(),
        settled,
        "{k}: AOF reload after MULTI and scripts"
    );
    primary.assert_alive();
}
