//! Faults: replication links that break, reloads, memory pressure, and `INFO tally`.
//! One test function per scenario and family, on every server kind.
//!
//! * partial resync: the replica's link is killed (`CLIENT KILL TYPE master` on the
//!   replica, then `CLIENT KILL TYPE replica` on the primary) while writes and timer
//!   expiry go on; the replica resyncs partially and ends equal to the primary;
//! * full resync: the replica is detached (`REPLICAOF NO ONE`), diverges (its own writes
//!   and its own timer, as a primary), and is attached again: a full sync makes it equal;
//! * AOF: with `appendonly yes` and tiny slots, the timer's expiry effects go to the AOF;
//!   a restart reloads exactly the same data;
//! * `DEBUG RELOAD` keeps everything, and expiry continues afterwards;
//! * memory pressure: with `maxmemory` reached, every write command is refused with the
//!   OOM error and every read still works;
//! * `INFO tally`: every field is there and moves as expected.
//!
//! Keyspace comparisons use [`dump_keyspace`]; because the primary's timer may still be
//! expiring while a replica catches up, the harness's [`assert_replica_equal`] compares
//! only once the primary's replication offset stands still and the replica has applied it.
//!
//! Files: `families.rs` (the workloads), `scenarios.rs` (resyncs, reloads, OOM, per
//! family), `client_pause.rs`, `info_tally.rs`, `multi_scripts.rs`; this file holds the
//! helpers they share.

use module_tests::*;
use std::time::Duration;

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

mod families;
mod scenarios;

use families::{COUNTER, RANK, STATS};
mod client_pause;
mod info_tally;
mod multi_scripts;

// ================================================================ helpers

fn rounds() -> usize {
    if long_run() {
        200
    } else {
        20
    }
}

/// Sends `cmds` as one pipeline; every reply must be a non-error.
fn pipeline_ok(srv: &Server, cmds: &[Vec<String>]) {
    let out = pipeline(&mut srv.conn(), cmds);
    for (c, v) in cmds.iter().zip(&out) {
        assert!(
            error_text(v).is_none(),
            "{}: {c:?} -> {v:?}",
            srv.kind().name
        );
    }
}

/// One family's workload: long-lived objects (nothing expires during a test) and tiny
/// ones whose slots expire within about a second, so the timer writes effects.
#[derive(Clone, Copy)]
struct Family {
    name: &'static str,
    /// Creates the tiny objects (prefix, so detached nodes can use their own keys).
    setup: fn(&str) -> Vec<Vec<String>>,
    /// One round of writes (prefix, round).
    write: fn(&str, usize) -> Vec<Vec<String>>,
    /// True if `key` (from the dump) belongs to a tiny object.
    tiny_key: fn(&str) -> bool,
    /// Every write command of the family on key `k` (for OOM), and every read.
    writes: fn(&str) -> Vec<Vec<String>>,
    reads: fn(&str) -> Vec<Vec<String>>,
}

fn setup_and_write(srv: &Server, fam: Family, prefix: &str, rounds: std::ops::Range<usize>) {
    let mut cmds = Vec::new();
    if rounds.start == 0 {
        cmds.extend((fam.setup)(prefix));
    }
    for r in rounds {
        cmds.extend((fam.write)(prefix, r));
    }
    pipeline_ok(srv, &cmds);
}

fn start_pair(kind: &ServerKind, primary_opts: ServerOptions) -> (Server, Server) {
    let primary = Server::start_with(kind, primary_opts);
    let replica = Server::start(kind);
    replica.replicate_from(&primary);
    wait_replica_synced(&primary, &replica);
    (primary, replica)
}

/// Waits until no tiny object has anything left to expire (its keys are gone or only
/// hold settings), so the keyspace no longer changes by itself.
fn wait_tiny_expired(srv: &Server, fam: Family) {
    let k = &srv.kind().name;
    let settled = wait_until(Duration::from_secs(10), || {
        let d1 = srv.dump_keyspace();
        std::thread::sleep(Duration::from_millis(700));
        let d2 = srv.dump_keyspace();
        d1 == d2
    });
    assert!(settled, "{k} {}: tiny objects never settled", fam.name);
    assert!(
        info_i64(srv, "tally", "tally_slots_expired") > 0,
        "{k} {}: the timer expired nothing",
        fam.name
    );
    let _ = fam.tiny_key;
}
