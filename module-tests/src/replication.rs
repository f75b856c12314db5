//! Primary/replica helpers: waiting for a replica to catch up and asserting it holds
//! exactly the primary's data.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::dump::KeyDump;
use crate::server::Server;

/// How long [`wait_replica_synced`] waits.
pub const REPLICA_SYNC_TIMEOUT: Duration = Duration::from_secs(20);

/// A primary of `kind` and a replica attached to it, in sync.
pub fn start_with_replica(kind: &crate::ServerKind) -> (Server, Server) {
    let primary = Server::start(kind);
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    (primary, replica)
}

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

/// How long [`compare_replica`] waits for the primary to stand still.
pub const REPLICA_QUIET_TIMEOUT: Duration = Duration::from_secs(30);

/// Compares the replica's data with the primary's once the replica has applied the whole
/// replication stream: both dumps are taken while the primary's replication offset stands
/// still (its timer may still be writing expiry effects, so this retries for up to
/// [`REPLICA_QUIET_TIMEOUT`]) and the replica's offset equals it.
///
/// `Ok(dump)` with the primary's [`Server::dump_keyspace`] when they are equal; `Err` describes
/// up to 8 differing keys (or that the primary never stood still).
pub fn compare_replica(p: &Server, r: &Server) -> Result<BTreeMap<String, KeyDump>, String> {
    let deadline = Instant::now() + REPLICA_QUIET_TIMEOUT;
    let mut last = None;
    while Instant::now() < deadline {
        wait_replica_synced(p, r);
        let off = repl_offset(p);
        let pd = p.dump_keyspace();
        let rd = r.dump_keyspace();
        let r_off = r.info("replication").get("slave_repl_offset").cloned();
        if repl_offset(p) == off && r_off.as_ref() == Some(&off) {
            if rd == pd {
                return Ok(pd);
            }
            if only_expired_between(p, &pd, &rd) {
                // A key's time came between the two dumps: compare again.
                last = Some((pd, rd));
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            return Err(format!(
                "replica differs from primary:\n  {}",
                dump_difference(&pd, &rd).join("\n  ")
            ));
        }
        last = Some((pd, rd));
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!(
        "primary never quiet long enough to compare: {last:?}"
    ))
}

/// True when every key the dumps disagree on is in one of them only, with an expiry, and
/// the primary's expiry time for it has now passed (or the key is gone): the primary's dump
/// came just before the key's time and the replica's just after (a replica answers reads
/// of a key whose time has passed as missing, before the primary's `DEL` reaches it). A key
/// whose value differs, or whose time has not come, is a real difference.
fn only_expired_between(
    p: &Server,
    primary: &BTreeMap<String, KeyDump>,
    replica: &BTreeMap<String, KeyDump>,
) -> bool {
    let now = crate::commands::server_ms(p);
    let mut conn = p.conn();
    primary
        .keys()
        .chain(replica.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|key| primary.get(*key) != replica.get(*key))
        .all(|key| {
            let one_side = match (primary.get(key), replica.get(key)) {
                (Some(only), None) | (None, Some(only)) => only,
                _ => return false,
            };
            let Some((db, name)) = key.strip_prefix("db").and_then(|rest| rest.split_once(':'))
            else {
                return false;
            };
            let expires_at: redis::RedisResult<i64> = redis::pipe()
                .cmd("SELECT")
                .arg(db)
                .ignore()
                .cmd("PEXPIRETIME")
                .arg(name)
                .query::<(i64,)>(&mut conn)
                .map(|(at,)| at);
            one_side.has_expire
                && matches!(expires_at, Ok(at) if at == -2 || (0..=now).contains(&at))
        })
}

/// Up to 8 keys whose entries differ between two dumps, as
/// `key: primary <entry> / replica <entry>` lines.
pub fn dump_difference(
    primary: &BTreeMap<String, KeyDump>,
    replica: &BTreeMap<String, KeyDump>,
) -> Vec<String> {
    primary
        .keys()
        .chain(replica.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|key| primary.get(*key) != replica.get(*key))
        .take(8)
        .map(|key| {
            format!(
                "{key}: primary {:?}\n    replica {:?}",
                primary.get(key),
                replica.get(key)
            )
        })
        .collect()
}

/// Asserts the replica holds exactly the primary's data ([`compare_replica`]) and returns
/// the primary's dump that was compared.
#[track_caller]
pub fn assert_replica_equal(p: &Server, r: &Server, what: &str) -> BTreeMap<String, KeyDump> {
    compare_replica(p, r).unwrap_or_else(|e| panic!("{}: {what}: {e}", p.kind().name))
}
