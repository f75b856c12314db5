//! tally on a Redis Cluster (3 primaries, one replica each) for every server kind.
//!
//! * `command_keys_and_flags`: `COMMAND GETKEYS` names every key of every command of the
//!   three families (STATS.ADD's `REPORT rankkey` included), and the write/readonly/denyoom
//!   flags are right, so cluster clients and ACL see the keys;
//! * one test function per family (`counters_route_reshard_and_fail_over`, `leaderboards_route_reshard_and_fail_over`, `stats_route_reshard_and_fail_over`),
//!   each with one cluster per server kind that shows:
//!   - commands routed by a cluster client, many objects spread over every shard, all read
//!     back exactly;
//!   - family rules: CROSSSLOT for STATS.ADD REPORT to another slot, TSRANK keys without a
//!     hash tag refused;
//!   - `redis-cli --cluster reshard` (MIGRATE) of slots holding live objects while a
//!     writer keeps writing to them: afterwards the new owner answers exactly (every
//!     acknowledged write counted once) and keeps expiring the moved objects (tiny
//!     resolutions, so their expiry happens within seconds, on the new owner);
//!   - `CLUSTER FAILOVER` on a replica: the promoted primary expires an object written
//!     before the failover with nobody writing afterwards.
//!
//! Set `TALLY_LONG=1` (`make test-long`) for longer writer phases and more objects.
//!
//! Files: `keys.rs`, `counters.rs`, `leaderboards.rs`, `statistics.rs`; this file holds
//! the cluster helpers they share (slots and hash tags, `CLUSTER` commands, resharding,
//! failover, the background writer).

use module_tests::*;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod counters;
mod keys;
mod leaderboards;
mod statistics;

// ================================================================ helpers

/// Number of objects spread over the shards.
fn spread_count() -> usize {
    if long_run() {
        2000
    } else {
        150
    }
}

/// Seconds the objects moved by a reshard keep their slots: longer than the writer phase
/// around the reshard (0.6 s, or 4 s in the soak variant), short enough to see expiry.
fn tiny_secs() -> u32 {
    if long_run() {
        12
    } else {
        5
    }
}

/// Redis Cluster's key hash: CRC16/XMODEM of the hash tag (or the key) mod 16384.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// A hash tag (the text between braces) whose keys live in cluster slot `slot`.
fn tag_for_slot(slot: u16) -> String {
    (0u64..)
        .map(|i| format!("t{i}"))
        .find(|t| crc16(t.as_bytes()) % 16384 == slot)
        .expect("some tag hashes to every slot")
}

fn node_id(n: &Server) -> String {
    value_text(&n.cmd_value(&["CLUSTER", "MYID"])).expect("CLUSTER MYID")
}

/// Runs a command through the cluster client; `Err` has the server's error text.
fn cc_cmd<A: AsRef<[u8]>>(
    cc: &mut redis::cluster::ClusterConnection,
    args: &[A],
) -> Result<Value, String> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0].as_ref()).expect("command name"));
    for a in &args[1..] {
        cmd.arg(a.as_ref());
    }
    cmd.query::<Value>(cc).map_err(|e| redis_error_text(&e))
}

fn int_of(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => value_text(other)
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("not an integer: {other:?}")),
    }
}

fn f64_of(v: &Value) -> f64 {
    value_text(v)
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("not a number: {v:?}"))
}

/// A RESP2 map reply (flat array) as field -> value.
fn map_of(v: Value) -> BTreeMap<String, Value> {
    let Value::Array(items) = v else {
        panic!("expected a map (flat array), got {v:?}")
    };
    items
        .chunks(2)
        .map(|c| (value_text(&c[0]).expect("field name"), c[1].clone()))
        .collect()
}

/// Keys of cluster slot `slot` held by node `n` (`CLUSTER GETKEYSINSLOT`).
fn keys_in_slot(n: &Server, slot: u16) -> Vec<String> {
    match n.cmd_value(&["CLUSTER", "GETKEYSINSLOT", &slot.to_string(), "1000"]) {
        Value::Array(keys) => keys.iter().filter_map(value_text).collect(),
        other => panic!("GETKEYSINSLOT: {other:?}"),
    }
}

/// `redis-cli --cluster reshard` of the `count` lowest slots of `from` to `to` (redis-cli
/// takes a single source's slots lowest first), moving the keys with MIGRATE.
fn reshard(from: &Server, to: &Server, count: usize) {
    reshard_with_pipeline(from, to, count, 10);
}

/// [`reshard`] with `--cluster-pipeline n`: how many keys one MIGRATE moves.
fn reshard_with_pipeline(from: &Server, to: &Server, count: usize, pipeline: usize) {
    let out = Command::new(redis_cli())
        .args(["--cluster", "reshard", &from.addr()])
        .args(["--cluster-from", &node_id(from)])
        .args(["--cluster-to", &node_id(to)])
        .args(["--cluster-slots", &count.to_string()])
        .args(["--cluster-pipeline", &pipeline.to_string()])
        .arg("--cluster-yes")
        .stdin(Stdio::null())
        .output()
        .expect("run redis-cli --cluster reshard");
    assert!(
        out.status.success(),
        "reshard failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The primary serving `slot`, from a fresh `CLUSTER SLOTS`.
fn owner_of_slot(cluster: &Cluster, slot: u16) -> &Server {
    let (_, _, port, _) = cluster
        .slot_map()
        .into_iter()
        .find(|(s, e, _, _)| (*s..=*e).contains(&slot))
        .unwrap_or_else(|| panic!("slot {slot} not served"));
    cluster.node_by_port(port).expect("known node")
}

/// The three primaries ordered by their lowest slot: `[owner of slot 0, ..]`.
fn primaries_by_slot(cluster: &Cluster) -> Vec<&Server> {
    let mut map = cluster.slot_map();
    map.sort();
    let mut out: Vec<&Server> = Vec::new();
    for (_, _, port, _) in map {
        let n = cluster.node_by_port(port).expect("known node");
        if !out.iter().any(|o| o.port() == port) {
            out.push(n);
        }
    }
    assert_eq!(out.len(), 3, "three primaries serve slots");
    out
}

/// Lowest slots of `n` (as redis-cli's reshard will pick them).
fn lowest_slots(cluster: &Cluster, n: &Server, count: usize) -> Vec<u16> {
    let mut ranges: Vec<(u16, u16)> = cluster
        .slot_map()
        .into_iter()
        .filter(|(_, _, p, _)| *p == n.port())
        .map(|(s, e, _, _)| (s, e))
        .collect();
    ranges.sort();
    ranges
        .into_iter()
        .flat_map(|(s, e)| s..=e)
        .take(count)
        .collect()
}

/// Asserts every primary holds at least one key.
fn assert_spread(cluster: &Cluster) {
    for p in cluster.primaries() {
        let n = p.query::<i64, _>(&["DBSIZE"]);
        assert!(
            n > 0,
            "{}: primary {} holds no key",
            cluster.kind.name,
            p.addr()
        );
    }
}

/// Promotes the replica of `primary` with `CLUSTER FAILOVER` and waits until it serves
/// `slot`. Returns the promoted node's port.
fn failover(cluster: &Cluster, primary: &Server, slot: u16) -> u16 {
    let replica = cluster
        .replicas_of(primary)
        .into_iter()
        .next()
        .expect("every primary has a replica");
    let port = replica.port();
    // The replica must have everything before it takes over.
    wait_replica_synced(primary, replica);
    // A manual failover needs the primary to know this node as its replica (cluster bus
    // gossip): right after `--cluster create` it may not yet, and the request times out.
    let (pid, rid) = (node_id(primary), node_id(replica));
    // The election also needs votes from the other primaries, which refuse a node they
    // still see as a primary ("Failover auth denied ... it is a master node"): wait until
    // every node's CLUSTER NODES shows it as a replica of `primary`.
    assert!(
        wait_until(Duration::from_secs(15), || {
            cluster
                .nodes()
                .iter()
                .filter(|n| n.process_running())
                .all(|n| {
                    let text = value_text(&n.cmd_value(&["CLUSTER", "NODES"])).unwrap_or_default();
                    text.lines().any(|l| {
                        let f: Vec<&str> = l.split(' ').collect();
                        f.first() == Some(&rid.as_str())
                            && f.get(2).is_some_and(|fl| fl.contains("slave"))
                            && f.get(3) == Some(&pid.as_str())
                    })
                })
        }),
        "{}: {} does not list its replica",
        cluster.kind.name,
        primary.addr()
    );
    let promoted = || {
        replica.info("replication").get("role").map(String::as_str) == Some("master")
            && owner_of_slot(cluster, slot).port() == port
    };
    assert_eq!(replica.cmd_value(&["CLUSTER", "FAILOVER"]), v_ok());
    if !wait_until(Duration::from_secs(8), promoted) {
        // The handshake with the primary can still time out on a loaded machine; the
        // replica is in sync (checked above), so a forced failover loses nothing.
        eprintln!("{}: manual failover timed out, forcing", cluster.kind.name);
        assert_eq!(replica.cmd_value(&["CLUSTER", "FAILOVER", "FORCE"]), v_ok());
    }
    assert!(
        wait_until(Duration::from_secs(20), promoted),
        "{}: failover to {} did not complete",
        cluster.kind.name,
        replica.addr()
    );
    cluster.wait_ok();
    port
}

/// Sets the flag when dropped, so a writer thread stops even when the test panics while
/// it runs (`thread::scope` would otherwise wait for it forever).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A writer thread's tally: how many writes each key acknowledged.
type Acks = BTreeMap<String, i64>;

/// Runs `write(cc, i)` in a loop on its own cluster client until `stop`; returns the
/// number of acknowledged writes per key (`write` returns the key it wrote, or None on
/// an error reply, which must not have written anything).
fn writer(
    cluster: &Cluster,
    stop: &AtomicBool,
    write: impl Fn(&mut redis::cluster::ClusterConnection, u64) -> Option<String>,
) -> (Acks, Vec<String>) {
    let mut cc = cluster.cluster_client();
    let mut acks = Acks::new();
    let mut errors = Vec::new();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match write(&mut cc, i) {
            Some(k) => *acks.entry(k).or_insert(0) += 1,
            None => errors.push(format!("write {i} failed")),
        }
        i += 1;
        if i.is_multiple_of(50) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    (acks, errors)
}

/// Writer phase around a reshard: starts `write` in a thread, reshards, keeps writing a
/// little longer, and returns the acknowledged writes.
fn reshard_under_writes(
    cluster: &Cluster,
    from: &Server,
    to: &Server,
    slots: usize,
    write: impl Fn(&mut redis::cluster::ClusterConnection, u64) -> Option<String> + Sync,
) -> Acks {
    let stop = AtomicBool::new(false);
    let (acks, errors) = std::thread::scope(|s| {
        let h = s.spawn(|| writer(cluster, &stop, &write));
        let _guard = StopOnDrop(&stop);
        std::thread::sleep(Duration::from_millis(if long_run() { 2000 } else { 300 }));
        reshard(from, to, slots);
        std::thread::sleep(Duration::from_millis(if long_run() { 2000 } else { 300 }));
        stop.store(true, Ordering::Relaxed);
        h.join().expect("writer thread")
    });
    assert!(
        errors.is_empty(),
        "{}: writer errors: {errors:?}",
        cluster.kind.name
    );
    assert!(
        acks.values().sum::<i64>() > 0,
        "{}: the writer wrote nothing",
        cluster.kind.name
    );
    acks
}

fn wait_gone(n: &Server, what: &str, mut gone: impl FnMut(&Server) -> bool) {
    let t0 = Instant::now();
    assert!(
        wait_until(Duration::from_secs(20), || gone(n)),
        "{} {}: {what} not expired after {:?}\n{}",
        n.kind().name,
        n.addr(),
        t0.elapsed(),
        n.log_tail(20)
    );
}
