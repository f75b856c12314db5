//! Cluster mode: [`start_cluster`] creates and joins nodes with `redis-cli --cluster
//! create`; [`Cluster`] finds primaries, replicas and the node serving a key.

use std::fs;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use redis::Value;

use crate::commands::wait_until;
use crate::info::parse_info;
use crate::server::{
    alloc_port, redis_cli, tail_lines, Server, ServerKind, ServerOptions, IO_TIMEOUT,
};
use crate::values::{items, value_text};

/// How long [`start_cluster`] waits for `cluster_state:ok` everywhere.
pub const CLUSTER_TIMEOUT: Duration = Duration::from_secs(30);

/// A running cluster: all nodes (primaries and replicas) of one kind.
/// Roles are decided by `redis-cli --cluster create` and can change
/// (failover), so [`Cluster::primaries`] / [`Cluster::replicas`] ask the nodes.
pub struct Cluster {
    /// The server kind of every node.
    pub kind: ServerKind,
    /// Every node, in creation order.
    pub nodes: Vec<Server>,
    /// Number of primaries requested.
    pub n_primaries: usize,
}

/// Starts `primaries * (1 + replicas_per_primary)` cluster-mode nodes (module
/// loaded), joins them with `redis-cli --cluster create ... --cluster-replicas
/// N --cluster-yes` and waits until every node reports `cluster_state:ok`
/// with all 16384 slots and every replica's link is up. `primaries` must be
/// at least 3 (redis-cli's rule).
pub fn start_cluster(kind: &ServerKind, primaries: usize, replicas_per_primary: usize) -> Cluster {
    start_cluster_with(kind, primaries, replicas_per_primary, ServerOptions::new())
}

/// Like [`start_cluster`] with options for every node (`cluster(true)` is
/// forced), e.g. `ServerOptions::new().without_module()`.
pub fn start_cluster_with(
    kind: &ServerKind,
    primaries: usize,
    replicas_per_primary: usize,
    opts: ServerOptions,
) -> Cluster {
    assert!(
        primaries >= 3,
        "redis-cli --cluster create needs at least 3 primaries"
    );
    let total = primaries * (1 + replicas_per_primary);
    let opts = opts.cluster(true);
    let nodes: Vec<Server> = (0..total)
        .map(|_| Server::start_with(kind, opts.clone()))
        .collect();
    let mut cmd = Command::new(redis_cli());
    cmd.arg("--cluster").arg("create");
    for n in &nodes {
        cmd.arg(n.addr());
    }
    cmd.arg("--cluster-replicas")
        .arg(replicas_per_primary.to_string())
        .arg("--cluster-yes")
        .stdin(Stdio::null());
    let out = run_with_timeout(cmd, Duration::from_secs(60));
    if !out.0.success() {
        panic!(
            "redis-cli --cluster create failed ({}):\n{}",
            out.0,
            tail_lines(&out.1, 40)
        );
    }
    let cluster = Cluster {
        kind: kind.clone(),
        nodes,
        n_primaries: primaries,
    };
    cluster.wait_ok();
    cluster
}

fn run_with_timeout(mut cmd: Command, timeout: Duration) -> (ExitStatus, String) {
    let tmp = std::env::temp_dir().join(format!(
        "module-tests-cli-{}-{}.log",
        std::process::id(),
        alloc_port()
    ));
    let f = fs::File::create(&tmp).expect("create temp log");
    let mut child = cmd
        .stdout(f.try_clone().unwrap())
        .stderr(f)
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {:?}: {e} (run scripts/deps.sh)",
                cmd.get_program()
            )
        });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let text = fs::read_to_string(&tmp).unwrap_or_default();
            let _ = fs::remove_file(&tmp);
            panic!(
                "{:?} timed out after {timeout:?}:\n{}",
                cmd.get_program(),
                tail_lines(&text, 40)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = fs::read_to_string(&tmp).unwrap_or_default();
    let _ = fs::remove_file(&tmp);
    (status, text)
}

impl Cluster {
    /// All nodes.
    pub fn nodes(&self) -> &[Server] {
        &self.nodes
    }

    /// Nodes whose `INFO replication` says `role:master` right now.
    pub fn primaries(&self) -> Vec<&Server> {
        self.nodes
            .iter()
            .filter(|n| {
                n.process_running()
                    && n.info("replication").get("role").map(String::as_str) == Some("master")
            })
            .collect()
    }

    /// Nodes whose `INFO replication` says `role:slave` right now.
    pub fn replicas(&self) -> Vec<&Server> {
        self.nodes
            .iter()
            .filter(|n| {
                n.process_running()
                    && n.info("replication").get("role").map(String::as_str) == Some("slave")
            })
            .collect()
    }

    /// Replicas currently replicating from `primary`.
    pub fn replicas_of(&self, primary: &Server) -> Vec<&Server> {
        let port = primary.port.to_string();
        self.replicas()
            .into_iter()
            .filter(|r| r.info("replication").get("master_port") == Some(&port))
            .collect()
    }

    /// The node with this port.
    pub fn node_by_port(&self, port: u16) -> Option<&Server> {
        self.nodes.iter().find(|n| n.port == port)
    }

    fn any_live(&self) -> &Server {
        self.nodes
            .iter()
            .find(|n| n.process_running())
            .expect("no live cluster node")
    }

    /// Hash slot of `key` (`CLUSTER KEYSLOT` on a live node).
    pub fn keyslot(&self, key: &str) -> u16 {
        self.any_live()
            .query::<u16, _>(&["CLUSTER", "KEYSLOT", key])
    }

    /// `slot -> port of the primary serving it`, from `CLUSTER SLOTS` on a
    /// live node: a list of (first slot, last slot, primary port, replica ports).
    pub fn slot_map(&self) -> Vec<(u16, u16, u16, Vec<u16>)> {
        let v = self.any_live().cmd_value(&["CLUSTER", "SLOTS"]);
        items(v)
            .into_iter()
            .map(|range| {
                let mut it = items(range).into_iter();
                let int = |v: Value| match v {
                    Value::Int(i) => i as u16,
                    other => panic!("CLUSTER SLOTS: {other:?}"),
                };
                let start = int(it.next().unwrap());
                let end = int(it.next().unwrap());
                let mut ports = it.map(|node| int(items(node).into_iter().nth(1).unwrap()));
                let primary = ports.next().unwrap();
                (start, end, primary, ports.collect())
            })
            .collect()
    }

    /// The primary serving `key`'s slot. Sending the key's commands directly
    /// to it never gets a MOVED.
    pub fn node_for_key(&self, key: &str) -> &Server {
        let slot = self.keyslot(key);
        let (_, _, port, _) = self
            .slot_map()
            .into_iter()
            .find(|(s, e, _, _)| (*s..=*e).contains(&slot))
            .unwrap_or_else(|| panic!("slot {slot} not served"));
        self.node_by_port(port)
            .unwrap_or_else(|| panic!("slot {slot} served by unknown port {port}"))
    }

    /// Runs a command on the primary owning the key at `args[1]` (RESP2, raw
    /// reply as in [`Server::cmd_value`]).
    pub fn cmd_value<A: AsRef<[u8]>>(&self, args: &[A]) -> Value {
        let key = String::from_utf8_lossy(args.get(1).expect("command needs a key").as_ref())
            .into_owned();
        self.node_for_key(&key).cmd_value(args)
    }

    /// A `redis::cluster::ClusterConnection` (RESP2) seeded with every node.
    ///
    /// Routing in redis 1.8 for commands it does not know (all `TALLY.*`
    /// module commands): the **first argument after the command name is
    /// taken as the key** (`RouteBy::FirstKey`; a command with no arguments
    /// goes to a random node); MOVED/ASK replies are followed and trigger a
    /// slot-map refresh. The crate does not consult `COMMAND INFO`, so a
    /// module command whose key is not the first argument must be sent to
    /// [`Cluster::node_for_key`] instead. Unlike `Server::cmd_value`, error
    /// replies come back as `Err(RedisError)` (`e.code()`, `e.detail()`,
    /// [`redis_error_text`]).
    pub fn cluster_client(&self) -> redis::cluster::ClusterConnection {
        let urls: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| n.process_running())
            .map(|n| n.url(false))
            .collect();
        redis::cluster::ClusterClient::builder(urls)
            .response_timeout(IO_TIMEOUT)
            .build()
            .and_then(|c| c.get_connection())
            .unwrap_or_else(|e| panic!("cluster client: {e}"))
    }

    /// Waits (up to [`CLUSTER_TIMEOUT`]) until every live node reports
    /// `cluster_state:ok`, `cluster_slots_ok:16384` and knows every node, and
    /// every replica's `master_link_status` is `up`.
    pub fn wait_ok(&self) {
        let total = self.nodes.len().to_string();
        let mut last = String::new();
        let ok = wait_until(CLUSTER_TIMEOUT, || {
            for n in self.nodes.iter().filter(|n| n.process_running()) {
                let ci = match n.cmd_value(&["CLUSTER", "INFO"]) {
                    v @ Value::ServerError(_) => {
                        last = format!("{}: {v:?}", n.addr());
                        return false;
                    }
                    v => parse_info(&value_text(&v).unwrap_or_default()),
                };
                if ci.get("cluster_state").map(String::as_str) != Some("ok")
                    || ci.get("cluster_slots_ok").map(String::as_str) != Some("16384")
                    || ci.get("cluster_known_nodes") != Some(&total)
                {
                    last = format!("{}: {ci:?}", n.addr());
                    return false;
                }
                let r = n.info("replication");
                if r.get("role").map(String::as_str) == Some("slave")
                    && r.get("master_link_status").map(String::as_str) != Some("up")
                {
                    last = format!("{} replica link: {r:?}", n.addr());
                    return false;
                }
            }
            true
        });
        assert!(ok, "cluster not ok after {CLUSTER_TIMEOUT:?}: {last}");
    }
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("kind", &self.kind.name)
            .field(
                "ports",
                &self.nodes.iter().map(|n| n.port).collect::<Vec<_>>(),
            )
            .finish()
    }
}

// `Server` and `Cluster` can be shared with worker threads (`thread::scope`).
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Server>();
    assert_send_sync::<Cluster>();
};
