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

use module_tests::*;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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

// ============================================================ key specs

/// Every command of every family with the keys `COMMAND GETKEYS` must report.
fn getkeys_cases() -> Vec<(Vec<&'static str>, Vec<&'static str>)> {
    vec![
        (vec!["TSCOUNTER.CREATE", "c"], vec!["c"]),
        (
            vec!["TSCOUNTER.CREATE", "c", "RESOLUTIONS", "1s:10", "1m:5"],
            vec!["c"],
        ),
        (vec!["TSCOUNTER.INCRBY", "c", "5"], vec!["c"]),
        (vec!["TSCOUNTER.INCRBY", "c", "5", "AT", "1000"], vec!["c"]),
        (vec!["TSCOUNTER.INCR", "c"], vec!["c"]),
        (vec!["TSCOUNTER.INCR", "c", "AT", "1000"], vec!["c"]),
        (vec!["TSCOUNTER.SUM", "c", "1m", "1h", "AT", "5"], vec!["c"]),
        (
            vec![
                "TSCOUNTER.LIMIT",
                "c",
                "1",
                "5s",
                "5",
                "1h",
                "100",
                "AT",
                "5",
            ],
            vec!["c"],
        ),
        (
            vec![
                "TSCOUNTER.RANGE",
                "c",
                "1s",
                "FROM",
                "1",
                "TO",
                "2",
                "EMPTY",
            ],
            vec!["c"],
        ),
        (vec!["TSCOUNTER.INFO", "c"], vec!["c"]),
        (
            vec!["TSRANK.CREATE", "lb{x}", "WINDOW", "1h", "SLOT", "1m"],
            vec!["lb{x}"],
        ),
        (
            vec!["TSRANK.INCRBY", "lb{x}", "1", "a", "2", "b", "AT", "9"],
            vec!["lb{x}"],
        ),
        (
            vec![
                "TSRANK.TOP",
                "lb{x}",
                "10",
                "OFFSET",
                "1",
                "WITHSCORES",
                "WINDOW",
                "1h",
            ],
            vec!["lb{x}"],
        ),
        (vec!["TSRANK.SCORE", "lb{x}", "a"], vec!["lb{x}"]),
        (
            vec!["TSRANK.HISTORY", "lb{x}", "a", "WINDOW", "1h"],
            vec!["lb{x}"],
        ),
        (vec!["TSRANK.RANK", "lb{x}", "a"], vec!["lb{x}"]),
        (vec!["TSRANK.INFO", "lb{x}"], vec!["lb{x}"]),
        (
            vec!["STATS.CREATE", "s", "PERIOD", "1h", "KEEP", "3"],
            vec!["s"],
        ),
        (vec!["STATS.ADD", "s", "1"], vec!["s"]),
        (vec!["STATS.ADD", "s", "1", "2", "AT", "5"], vec!["s"]),
        (
            vec!["STATS.ADD", "k", "1", "2", "REPORT", "rk", "m"],
            vec!["k", "rk"],
        ),
        (
            vec![
                "STATS.ADD",
                "k",
                "1",
                "AT",
                "5",
                "REPORT",
                "rk",
                "m",
                "KEEP",
                "3",
            ],
            vec!["k", "rk"],
        ),
        (
            vec!["STATS.ADD", "k", "-1.5", "report", "rk", "m"],
            vec!["k", "rk"],
        ),
        (vec!["STATS.GET", "s", "WINDOW", "2h"], vec!["s"]),
        (vec!["STATS.QUANTILE", "s", "0.5", "0.9"], vec!["s"]),
        (vec!["STATS.RANGE", "s", "FROM", "1", "TO", "2"], vec!["s"]),
        (vec!["STATS.INFO", "s"], vec!["s"]),
    ]
}

per_server!(command_keys_and_flags);
fn command_keys_and_flags(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = &kind.name;
    for (cmd, keys) in getkeys_cases() {
        let mut args = vec!["COMMAND", "GETKEYS"];
        args.extend(&cmd);
        assert_eq!(srv.cmd_value(&args), v_bulks(&keys), "{k}: GETKEYS {cmd:?}");
    }
    // Flags: writes are `write denyoom` (refused under OOM, by `%R~` users and on
    // read-only replicas), reads `readonly`.
    for (name, write) in [
        ("tscounter.create", true),
        ("tscounter.incrby", true),
        ("tscounter.incr", true),
        ("tscounter.sum", false),
        ("tscounter.range", false),
        ("tscounter.info", false),
        ("tsrank.create", true),
        ("tsrank.incrby", true),
        ("tsrank.top", false),
        ("tsrank.score", false),
        ("tsrank.rank", false),
        ("tsrank.info", false),
        ("stats.create", true),
        ("stats.add", true),
        ("stats.get", false),
        ("stats.quantile", false),
        ("stats.range", false),
        ("stats.info", false),
    ] {
        let info = srv.cmd_value(&["COMMAND", "INFO", name]);
        let Value::Array(outer) = info else {
            panic!("{k}: COMMAND INFO {name}: {info:?}")
        };
        let Some(Value::Array(entry)) = outer.first() else {
            panic!("{k}: COMMAND INFO {name}: {outer:?}")
        };
        let flags: Vec<String> = match entry.get(2) {
            Some(Value::Array(f)) | Some(Value::Set(f)) => {
                f.iter().filter_map(value_text).collect()
            }
            other => panic!("{k}: {name} flags: {other:?}"),
        };
        let has = |f: &str| flags.iter().any(|x| x == f);
        if write {
            assert!(has("write") && has("denyoom"), "{k}: {name}: {flags:?}");
        } else {
            assert!(has("readonly") && !has("write"), "{k}: {name}: {flags:?}");
        }
    }
    srv.assert_alive();
}

// ============================================================== TSCOUNTER

per_server!(counters_route_reshard_and_fail_over);
fn counters_route_reshard_and_fail_over(kind: &ServerKind) {
    let cluster = start_cluster(kind, 3, 1);
    let k = kind.name.as_str();
    let mut cc = cluster.cluster_client();

    // Many counters over every shard, through the cluster client, read back exactly.
    let n = spread_count();
    for i in 0..n {
        let key = format!("hits:{i}");
        let v = cc_cmd(&mut cc, &["TSCOUNTER.INCRBY", &key, &(i + 1).to_string()]);
        assert_eq!(v, Ok(v_int(i as i64 + 1)), "{k}: {key}");
    }
    assert_eq!(
        cc_cmd(&mut cc, &["TSCOUNTER.CREATE", "hits:0"]),
        Err("ERR key already exists".into())
    );
    assert_spread(&cluster);
    for i in 0..n {
        let key = format!("hits:{i}");
        let v = cc_cmd(&mut cc, &["TSCOUNTER.SUM", &key, "1h"]);
        assert_eq!(v, Ok(v_int(i as i64 + 1)), "{k}: {key}");
    }
    // LIMIT routes like every counter command: a check, then an applied increment.
    for i in 0..n.min(20) {
        let key = format!("hits:{i}");
        let total = i as i64 + 1;
        let check = cc_cmd(&mut cc, &["TSCOUNTER.LIMIT", &key, "0", "1h", "1000"]);
        assert_eq!(
            check,
            Ok(v_arr(vec![v_int(1), v_int(0), v_arr(vec![v_int(total)])])),
            "{k}: {key}"
        );
        let max = (total + 1).to_string();
        let applied = cc_cmd(&mut cc, &["TSCOUNTER.LIMIT", &key, "1", "1h", &max]);
        assert_eq!(
            applied,
            Ok(v_arr(vec![
                v_int(1),
                v_int(0),
                v_arr(vec![v_int(total + 1)])
            ])),
            "{k}: {key}"
        );
        let undo = cc_cmd(&mut cc, &["TSCOUNTER.INCRBY", &key, "-1"]);
        assert!(matches!(undo, Ok(Value::Int(_))), "{k}: {key}: {undo:?}");
    }

    // Reshard the 3 lowest slots of the first primary to the second one while a
    // writer increments counters living there.
    let prim = primaries_by_slot(&cluster);
    let (from, to, third) = (prim[0], prim[1], prim[2]);
    let slots = lowest_slots(&cluster, from, 3);
    let tags: Vec<String> = slots.iter().map(|s| tag_for_slot(*s)).collect();
    let live: Vec<String> = tags.iter().map(|t| format!("live{{{t}}}")).collect();
    // Tiny resolutions: these must still have slots when the move is done, and lose
    // them on the new owner.
    let tiny = format!("tiny{{{}}}", tags[1]);
    assert_eq!(
        cluster.cmd_value(&[
            "TSCOUNTER.CREATE",
            &tiny,
            "RESOLUTIONS",
            &format!("1s:{}", tiny_secs()),
            "500ms:8"
        ]),
        v_ok()
    );
    assert_eq!(
        cluster.cmd_value(&["TSCOUNTER.INCRBY", &tiny, "7"]),
        v_int(7)
    );
    let expired_before = info_i64(to, "tally", "tally_slots_expired");
    let acks = reshard_under_writes(&cluster, from, to, slots.len(), |cc, i| {
        let key = &live[(i % live.len() as u64) as usize];
        match cc_cmd(cc, &["TSCOUNTER.INCR", key]) {
            Ok(Value::Int(_)) => Some(key.clone()),
            _ => None,
        }
    });
    for s in &slots {
        assert_eq!(
            owner_of_slot(&cluster, *s).port(),
            to.port(),
            "{k}: slot {s} moved"
        );
        assert!(
            keys_in_slot(from, *s).is_empty(),
            "{k}: slot {s} left behind keys"
        );
    }
    let mut cc = cluster.cluster_client();
    for (key, n) in &acks {
        assert_eq!(
            to.cmd_value(&["TSCOUNTER.SUM", key, "1d"]),
            v_int(*n),
            "{k}: {key}"
        );
        assert_eq!(
            cc_cmd(&mut cc, &["TSCOUNTER.SUM", key, "1h"]),
            Ok(v_int(*n))
        );
    }
    // The moved tiny counter is still there, on the new owner, which expires it.
    assert!(
        to.cmd_value(&["EXISTS", &tiny]) == v_int(1),
        "{k}: tiny counter expired before the move was done; test inconclusive"
    );

    // Failover of the third primary: a tiny counter written before it is expired by
    // the promoted replica, with nobody writing after the failover.
    let fslot = lowest_slots(&cluster, third, 1)[0];
    let ftiny = format!("ftiny{{{}}}", tag_for_slot(fslot));
    assert_eq!(
        third.cmd_value(&["TSCOUNTER.CREATE", &ftiny, "RESOLUTIONS", "1s:6"]),
        v_ok()
    );
    assert_eq!(
        third.cmd_value(&["TSCOUNTER.INCRBY", &ftiny, "3"]),
        v_int(3)
    );
    let written = Instant::now();
    let new_port = failover(&cluster, third, fslot);
    let promoted = cluster.node_by_port(new_port).expect("promoted node");
    // The object outlives a quick failover (6 s); if the failover was slow, its
    // expiry may legitimately have happened already.
    if written.elapsed() < Duration::from_secs(4) {
        assert_eq!(
            promoted.cmd_value(&["TSCOUNTER.SUM", &ftiny, "6s"]),
            v_int(3),
            "{k}"
        );
    }

    wait_gone(to, "moved tiny counter", |n| {
        n.cmd_value(&["EXISTS", &tiny]) == v_int(0)
    });
    assert!(
        info_i64(to, "tally", "tally_slots_expired") > expired_before,
        "{k}: the new owner expired no slot"
    );
    wait_gone(promoted, "counter after failover", |n| {
        n.cmd_value(&["EXISTS", &ftiny]) == v_int(0)
    });
    // The old primary, now a replica, received the expiry.
    third.cmd_value(&["READONLY"]);
    wait_gone(third, "counter on the demoted primary", |n| {
        n.cmd_value(&["EXISTS", &ftiny]) == v_int(0)
    });
    // The long-lived counters are untouched and still exact after everything.
    let mut cc = cluster.cluster_client();
    for (key, n) in &acks {
        assert_eq!(
            cc_cmd(&mut cc, &["TSCOUNTER.SUM", key, "1h"]),
            Ok(v_int(*n))
        );
    }
    for i in (0..n).step_by(7) {
        let key = format!("hits:{i}");
        let v = cc_cmd(&mut cc, &["TSCOUNTER.SUM", &key, "1h"]);
        assert_eq!(v, Ok(v_int(i as i64 + 1)), "{k}: {key}");
    }
    for node in cluster.nodes() {
        node.assert_alive();
    }
}

// ================================================================= TSRANK

per_server!(leaderboards_route_reshard_and_fail_over);
fn leaderboards_route_reshard_and_fail_over(kind: &ServerKind) {
    let cluster = start_cluster(kind, 3, 1);
    let k = kind.name.as_str();
    let mut cc = cluster.cluster_client();

    // A leaderboard key without a hash tag is refused in cluster mode: its derived
    // keys would land in other slots. Nothing is written.
    for cmd in [
        vec!["TSRANK.INCRBY", "board", "1", "m"],
        vec!["TSRANK.CREATE", "board", "WINDOW", "1h", "SLOT", "1m"],
        vec!["TSRANK.INCRBY", "board{}", "1", "m"],
    ] {
        let e = cc_cmd(&mut cc, &cmd).expect_err("refused without a hash tag");
        assert!(
            e.starts_with("ERR") && e.to_lowercase().contains("tag"),
            "{k}: {cmd:?}: {e}"
        );
    }
    for key in ["board", "board|meta", "board{}", "board{}|meta"] {
        assert_eq!(cluster.cmd_value(&["EXISTS", key]), v_int(0), "{k}: {key}");
    }

    // Many leaderboards over every shard.
    let n = spread_count();
    for i in 0..n {
        let key = format!("lb{{{i}}}");
        let v = cc_cmd(
            &mut cc,
            &["TSRANK.INCRBY", &key, &(i + 1).to_string(), "a", "1", "b"],
        );
        assert_eq!(
            v,
            Ok(v_arr(vec![v_int(i as i64 + 1), v_int(1)])),
            "{k}: {key}"
        );
    }
    assert_spread(&cluster);
    for i in 0..n {
        let key = format!("lb{{{i}}}");
        assert_eq!(
            cc_cmd(&mut cc, &["TSRANK.SCORE", &key, "a"]),
            Ok(v_int(i as i64 + 1))
        );
        let top = cc_cmd(&mut cc, &["TSRANK.TOP", &key, "2"]);
        let want = if i == 0 {
            v_bulks(&["b", "a"])
        } else {
            v_bulks(&["a", "b"])
        };
        assert_eq!(top, Ok(want), "{k}: {key}");
    }

    // Reshard slots holding live leaderboards (main key and derived keys move
    // together: they share the hash tag) while a writer increments them.
    let prim = primaries_by_slot(&cluster);
    let (from, to, third) = (prim[0], prim[1], prim[2]);
    let slots = lowest_slots(&cluster, from, 3);
    let tags: Vec<String> = slots.iter().map(|s| tag_for_slot(*s)).collect();
    let live: Vec<String> = [0, 2]
        .iter()
        .map(|i| format!("live{{{}}}", tags[*i]))
        .collect();
    let tiny = format!("tiny{{{}}}", tags[1]);
    assert_eq!(
        cluster.cmd_value(&[
            "TSRANK.CREATE",
            &tiny,
            "WINDOW",
            &format!("{}s", tiny_secs()),
            "SLOT",
            "1s"
        ]),
        v_ok()
    );
    assert_eq!(
        cluster.cmd_value(&["TSRANK.INCRBY", &tiny, "5", "x"]),
        v_int(5)
    );
    let expired_before = info_i64(to, "tally", "tally_slots_expired");
    let members = ["m0", "m1", "m2", "m3"];
    let acks = reshard_under_writes(&cluster, from, to, slots.len(), |cc, i| {
        let key = &live[(i % 2) as usize];
        let member = members[((i / 2) % 4) as usize];
        match cc_cmd(cc, &["TSRANK.INCRBY", key, "1", member]) {
            Ok(Value::Int(_)) => Some(format!("{key} {member}")),
            _ => None,
        }
    });
    for s in &slots {
        assert_eq!(
            owner_of_slot(&cluster, *s).port(),
            to.port(),
            "{k}: slot {s} moved"
        );
        assert!(
            keys_in_slot(from, *s).is_empty(),
            "{k}: slot {s} left behind keys"
        );
    }
    let mut cc = cluster.cluster_client();
    let mut totals: BTreeMap<&str, Vec<(String, i64)>> = BTreeMap::new();
    for (km, n) in &acks {
        let (key, member) = km.split_once(' ').expect("key member");
        assert_eq!(
            cc_cmd(&mut cc, &["TSRANK.SCORE", key, member]),
            Ok(v_int(*n)),
            "{k}: {key} {member}"
        );
        // The main key is the native sorted set of totals.
        assert_eq!(f64_of(&to.cmd_value(&["ZSCORE", key, member])), *n as f64);
        let key_static: &str = live.iter().find(|l| *l == key).expect("live key");
        totals
            .entry(key_static)
            .or_default()
            .push((member.to_string(), *n));
    }
    for (key, mut t) in totals {
        t.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        let want: Vec<&str> = t.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(
            cc_cmd(&mut cc, &["TSRANK.TOP", key, "10"]),
            Ok(v_bulks(&want)),
            "{k}"
        );
    }
    assert_eq!(
        to.cmd_value(&["TSRANK.SCORE", &tiny, "x"]),
        v_int(5),
        "{k}: tiny moved"
    );

    // Failover: the promoted replica expires a leaderboard written before it.
    let fslot = lowest_slots(&cluster, third, 1)[0];
    let ftiny = format!("ftiny{{{}}}", tag_for_slot(fslot));
    assert_eq!(
        third.cmd_value(&["TSRANK.CREATE", &ftiny, "WINDOW", "6s", "SLOT", "1s"]),
        v_ok()
    );
    assert_eq!(
        third.cmd_value(&["TSRANK.INCRBY", &ftiny, "2", "y"]),
        v_int(2)
    );
    let written = Instant::now();
    let new_port = failover(&cluster, third, fslot);
    let promoted = cluster.node_by_port(new_port).expect("promoted node");
    if written.elapsed() < Duration::from_secs(4) {
        let v = promoted.cmd_value(&["TSRANK.SCORE", &ftiny, "y"]);
        assert_eq!(v, v_int(2), "{k}: the promoted replica has the leaderboard");
    }

    let no_slots = |n: &Server, key: &str, slot: u16| {
        n.cmd_value(&["EXISTS", key]) == v_int(0)
            && !keys_in_slot(n, slot).iter().any(|x| x.contains("|slot|"))
    };
    wait_gone(to, "moved tiny leaderboard", |n| {
        no_slots(n, &tiny, slots[1])
    });
    assert_eq!(to.cmd_value(&["TSRANK.SCORE", &tiny, "x"]), v_nil(), "{k}");
    assert!(
        info_i64(to, "tally", "tally_slots_expired") > expired_before,
        "{k}"
    );
    wait_gone(promoted, "leaderboard after failover", |n| {
        no_slots(n, &ftiny, fslot)
    });
    third.cmd_value(&["READONLY"]);
    wait_gone(third, "leaderboard on the demoted primary", |n| {
        no_slots(n, &ftiny, fslot)
    });
    for node in cluster.nodes() {
        node.assert_alive();
    }
}

// ================================================================== STATS

per_server!(stats_route_reshard_and_fail_over);
fn stats_route_reshard_and_fail_over(kind: &ServerKind) {
    let cluster = start_cluster(kind, 3, 1);
    let k = kind.name.as_str();
    let mut cc = cluster.cluster_client();

    // REPORT's rankkey is a declared key: another slot is CROSSSLOT, nothing written.
    let owner = cluster.node_for_key("s{a}");
    let e = error_text(&owner.cmd_value(&["STATS.ADD", "s{a}", "1", "REPORT", "r{b}", "m"]))
        .expect("CROSSSLOT");
    assert!(e.starts_with("CROSSSLOT"), "{k}: {e}");
    let e = cc_cmd(&mut cc, &["STATS.ADD", "s{a}", "1", "REPORT", "r{b}", "m"])
        .expect_err("CROSSSLOT through the cluster client");
    assert!(e.starts_with("CROSSSLOT"), "{k}: {e}");
    assert_eq!(cluster.cmd_value(&["EXISTS", "s{a}"]), v_int(0), "{k}");
    assert_eq!(cluster.cmd_value(&["EXISTS", "r{b}"]), v_int(0), "{k}");
    // Same slot: fine.
    assert_eq!(
        cc_cmd(&mut cc, &["STATS.ADD", "s{a}", "4", "REPORT", "r{a}", "m"]),
        Ok(v_int(1))
    );
    assert_eq!(
        f64_of(&cluster.cmd_value(&["ZSCORE", "r{a}", "m"])),
        4.0,
        "{k}"
    );

    // Many statistics objects over every shard.
    let n = spread_count();
    for i in 0..n {
        let key = format!("st:{i}");
        let v = cc_cmd(
            &mut cc,
            &["STATS.ADD", &key, &i.to_string(), &(i + 2).to_string()],
        );
        assert_eq!(v, Ok(v_int(2)), "{k}: {key}");
    }
    assert_spread(&cluster);
    for i in 0..n {
        let key = format!("st:{i}");
        let m = map_of(cc_cmd(&mut cc, &["STATS.GET", &key]).expect("STATS.GET"));
        assert_eq!(int_of(&m["count"]), 2, "{k}: {key}");
        assert_eq!(f64_of(&m["sum"]), (2 * i + 2) as f64, "{k}: {key}");
        assert_eq!(f64_of(&m["min"]), i as f64, "{k}: {key}");
    }

    // Reshard live statistics (with their REPORT ranking in the same slot) while a
    // writer adds values.
    let prim = primaries_by_slot(&cluster);
    let (from, to, third) = (prim[0], prim[1], prim[2]);
    let slots = lowest_slots(&cluster, from, 3);
    let tags: Vec<String> = slots.iter().map(|s| tag_for_slot(*s)).collect();
    let live: Vec<(String, String)> = [0, 2]
        .iter()
        .map(|i| {
            (
                format!("live{{{}}}", tags[*i]),
                format!("slow{{{}}}", tags[*i]),
            )
        })
        .collect();
    let tiny = format!("tiny{{{}}}", tags[1]);
    assert_eq!(
        cluster.cmd_value(&[
            "STATS.CREATE",
            &tiny,
            "PERIOD",
            "1s",
            "KEEP",
            &tiny_secs().to_string()
        ]),
        v_ok()
    );
    assert_eq!(
        cluster.cmd_value(&["STATS.ADD", &tiny, "1", "2", "3"]),
        v_int(3)
    );
    let expired_before = info_i64(to, "tally", "tally_slots_expired");
    let acks = reshard_under_writes(&cluster, from, to, slots.len(), |cc, i| {
        let (key, rk) = &live[(i % 2) as usize];
        match cc_cmd(
            cc,
            &["STATS.ADD", key, "10", "REPORT", rk, "page", "KEEP", "5"],
        ) {
            Ok(Value::Int(_)) => Some(key.clone()),
            _ => None,
        }
    });
    for s in &slots {
        assert_eq!(
            owner_of_slot(&cluster, *s).port(),
            to.port(),
            "{k}: slot {s} moved"
        );
        assert!(
            keys_in_slot(from, *s).is_empty(),
            "{k}: slot {s} left behind keys"
        );
    }
    let mut cc = cluster.cluster_client();
    for (key, rk) in &live {
        let n = acks.get(key).copied().unwrap_or(0);
        if n == 0 {
            continue;
        }
        // Every value is 10; periods are 1h, so a window of 2h holds all of them
        // even if the clock crossed an hour meanwhile.
        let m = map_of(cc_cmd(&mut cc, &["STATS.GET", key, "WINDOW", "2h"]).expect("GET"));
        assert_eq!(int_of(&m["count"]), n, "{k}: {key}");
        assert_eq!(f64_of(&m["sum"]), 10.0 * n as f64, "{k}: {key}");
        assert_eq!(f64_of(&m["mean"]), 10.0, "{k}: {key}");
        assert_eq!(
            f64_of(&to.cmd_value(&["ZSCORE", rk, "page"])),
            10.0,
            "{k}: {rk}"
        );
    }
    let info = map_of(to.cmd_value(&["STATS.INFO", &tiny]));
    assert!(
        int_of(&info["periods"]) >= 1,
        "{k}: tiny stats moved with its period"
    );

    // Failover: the promoted replica expires periods written before it.
    let fslot = lowest_slots(&cluster, third, 1)[0];
    let ftiny = format!("ftiny{{{}}}", tag_for_slot(fslot));
    assert_eq!(
        third.cmd_value(&["STATS.CREATE", &ftiny, "PERIOD", "1s", "KEEP", "6"]),
        v_ok()
    );
    assert_eq!(third.cmd_value(&["STATS.ADD", &ftiny, "7"]), v_int(1));
    let written = Instant::now();
    let new_port = failover(&cluster, third, fslot);
    let promoted = cluster.node_by_port(new_port).expect("promoted node");
    if written.elapsed() < Duration::from_secs(4) {
        let m = map_of(promoted.cmd_value(&["STATS.GET", &ftiny, "WINDOW", "6s"]));
        assert_eq!(
            int_of(&m["count"]),
            1,
            "{k}: the promoted replica has the stats"
        );
    }

    // No period field (`<start>:m` / `<start>:q`) left.
    let no_periods = |n: &Server, key: &str| match n.cmd_value(&["HKEYS", key]) {
        Value::Array(f) => !f
            .iter()
            .filter_map(value_text)
            .any(|f| f.ends_with(":m") || f.ends_with(":q")),
        other => panic!("HKEYS: {other:?}"),
    };
    wait_gone(to, "moved tiny stats", |n| no_periods(n, &tiny));
    assert!(
        info_i64(to, "tally", "tally_slots_expired") > expired_before,
        "{k}"
    );
    wait_gone(promoted, "stats after failover", |n| no_periods(n, &ftiny));
    third.cmd_value(&["READONLY"]);
    wait_gone(third, "stats on the demoted primary", |n| {
        no_periods(n, &ftiny)
    });
    for node in cluster.nodes() {
        node.assert_alive();
    }
}

per_server!(leaderboard_moved_key_by_key_counts_every_write_once);
/// A leaderboard whose slot holds hundreds of keys (one hash per live slot), moved one key
/// per MIGRATE (`--cluster-pipeline 1`) while a writer increments it: for a while the main
/// key and its derived keys sit on different nodes. Every acknowledged write must be
/// counted exactly once afterwards, and the reshard must not fail on a key that a write
/// re-created on the wrong side.
fn leaderboard_moved_key_by_key_counts_every_write_once(kind: &ServerKind) {
    let cluster = start_cluster(kind, 3, 1);
    let k = kind.name.as_str();
    let prim = primaries_by_slot(&cluster);
    let (from, to) = (prim[0], prim[1]);
    let slot = lowest_slots(&cluster, from, 1)[0];
    let key = format!("big{{{}}}", tag_for_slot(slot));
    assert_eq!(
        from.cmd_value(&["TSRANK.CREATE", &key, "WINDOW", "1h", "SLOT", "1s"]),
        v_ok()
    );
    let now = match from.cmd_value(&["TIME"]) {
        Value::Array(t) => int_of(&t[0]) * 1000,
        other => panic!("TIME: {other:?}"),
    };
    let n_slots = if long_run() { 3000 } else { 200 };
    let mut conn = from.conn();
    let mut pipe = redis::pipe();
    for i in 0..n_slots {
        let at = (now - 5000 - i * 1000).to_string();
        pipe.cmd("TSRANK.INCRBY")
            .arg(&key)
            .arg(1)
            .arg("m")
            .arg("AT")
            .arg(at);
    }
    let _: Vec<Value> = pipe.query(&mut conn).expect("populate");
    drop(conn);
    let keys = int_of(&from.cmd_value(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]));
    assert!(keys > n_slots, "{k}: {keys} keys in the slot");

    let stop = AtomicBool::new(false);
    let (acks, errors) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            writer(&cluster, &stop, |cc, _| {
                match cc_cmd(cc, &["TSRANK.INCRBY", &key, "1", "m"]) {
                    Ok(Value::Int(_)) => Some(key.clone()),
                    _ => None,
                }
            })
        });
        let _guard = StopOnDrop(&stop);
        std::thread::sleep(Duration::from_millis(100));
        reshard_with_pipeline(from, to, 1, 1);
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::Relaxed);
        h.join().expect("writer")
    });
    let acked = acks.get(&key).copied().unwrap_or(0);
    assert_eq!(
        owner_of_slot(&cluster, slot).port(),
        to.port(),
        "{k}: slot moved"
    );
    assert!(keys_in_slot(from, slot).is_empty(), "{k}: keys left behind");
    let mut cc = cluster.cluster_client();
    assert_eq!(
        cc_cmd(&mut cc, &["TSRANK.SCORE", &key, "m"]),
        Ok(v_int(n_slots + acked)),
        "{k}: {acked} acknowledged writes during the move ({} refused: {:?})",
        errors.len(),
        errors.iter().take(3).collect::<Vec<_>>()
    );
    for node in cluster.nodes() {
        node.assert_alive();
    }
}
