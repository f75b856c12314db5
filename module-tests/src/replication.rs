//! Primary/replica helpers: waiting for a replica to catch up and asserting it holds
//! exactly the primary's data.

use std::time::{Duration, Instant};

use crate::server::Server;

/// How long [`wait_replica_synced`] waits.
pub const REPLICA_SYNC_TIMEOUT: Duration = Duration::from_secs(20);

/// Polls until `primary` and `replica` are in sync: the replica reports
/// `master_link_status:up`, replicates `primary`'s port, and its
/// `slave_repl_offset` equals the primary's `master_repl_offset`. Panics
/// after [`REPLICA_SYNC_TIMEOUT`] with both INFO replication sections.
pub fn wait_replica_synced(primary: &Server, replica: &Server) {
    let deadline = Instant::now() + REPLICA_SYNC_TIMEOUT;
    loop {
        let p = primary.info("replication");
        let r = replica.info("replication");
        let up = r.get("master_link_status").map(String::as_str) == Some("up")
            && r.get("master_port") == Some(&primary.port.to_string());
        let p_off = p.get("master_repl_offset");
        if up && p_off.is_some() && r.get("slave_repl_offset") == p_off {
            return;
        }
        if Instant::now() > deadline {
            panic!(
                "replica {} not synced with primary {} after {:?}\nprimary: {p:?}\nreplica: {r:?}\n--- replica log ---\n{}",
                replica.addr(),
                primary.addr(),
                REPLICA_SYNC_TIMEOUT,
                replica.log_tail(20)
            );
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

pub fn repl_offset(srv: &Server) -> String {
    srv.info("replication")
        .get("master_repl_offset")
        .cloned()
        .unwrap_or_default()
}

/// Asserts the replica holds exactly the primary's data: both dumps are taken while the
/// primary's replication offset stands still and the replica has applied all of it.
#[track_caller]
pub fn assert_replica_equal(p: &Server, r: &Server, what: &str) {
    let mut last = None;
    for _ in 0..50 {
        wait_replica_synced(p, r);
        let off = repl_offset(p);
        let pd = p.dump_keyspace();
        let rd = r.dump_keyspace();
        let r_off = r.info("replication").get("slave_repl_offset").cloned();
        if repl_offset(p) == off && r_off.as_ref() == Some(&off) {
            assert_eq!(
                rd,
                pd,
                "{}: {what}: replica differs from primary",
                p.kind().name
            );
            return;
        }
        last = Some((pd, rd));
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "{}: {what}: primary never quiet long enough to compare: {last:?}",
        p.kind().name
    );
}
