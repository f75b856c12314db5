//! Restarting a [`Server`] in place (same directory, port, config and module) and
//! making it a replica.

use std::time::{Duration, Instant};

use redis::ConnectionLike as _;
use redis::Value;

use super::launch::StartError;
use super::lock::lock;
use super::Server;
use crate::values::{server_error_text, v_ok};

impl Server {
    pub(super) fn reset_conns(&self) {
        *lock(&self.conn2) = None;
        *lock(&self.conn3) = None;
    }

    /// Sends `SHUTDOWN <mode> [NOW]` and waits up to 15 s for the process to
    /// exit, then SIGKILLs it.
    fn shutdown(&self, mode: &str) {
        self.reset_conns();
        if let Ok(mut c) = self.try_connect(false, Duration::from_secs(2)) {
            let mut cmd = redis::cmd("SHUTDOWN");
            cmd.arg(mode);
            if self.kind.is_v7_or_later() {
                cmd.arg("NOW");
            }
            // Success closes the connection (an IO error here); an error reply
            // means the server refused, e.g. because SAVE failed.
            if let Ok(Value::ServerError(e)) = c.req_command(&cmd) {
                panic!(
                    "{} refused SHUTDOWN {mode}: {}\n{}",
                    self.kind.name,
                    server_error_text(&e),
                    self.log_tail(20)
                );
            }
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        while self.exit_status().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
    }

    fn relaunch(&self) {
        // The port may need a moment to be released; retry a few times.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.launch() {
                Ok(()) => return,
                Err(StartError::PortInUse) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(StartError::PortInUse) => {
                    panic!(
                        "{}: port {} still in use after restart",
                        self.kind.name, self.port
                    )
                }
                Err(StartError::Failed(m)) => panic!("restart failed: {m}"),
            }
        }
    }

    /// `SHUTDOWN NOSAVE` (plus `NOW` on v7+: no waiting for lagging replicas),
    /// then start again with the same dir, port, config and module, so the
    /// existing RDB (from an earlier SAVE/BGSAVE) or AOF is loaded. Cached
    /// connections are dropped; connections from [`Server::conn`] break.
    /// The AOF, if enabled, is flushed by the shutdown.
    pub fn restart(&mut self) {
        self.shutdown("NOSAVE");
        self.relaunch();
    }

    /// `SHUTDOWN SAVE` (forces an RDB save even with `save ""`), then start
    /// again like [`Server::restart`]: the reload goes through RDB (or AOF if
    /// `appendonly yes`).
    pub fn restart_saving(&mut self) {
        self.shutdown("SAVE");
        self.relaunch();
    }

    /// SIGKILL (no shutdown work at all), then start again like
    /// [`Server::restart`]: simulates a crash; only what was already in the
    /// RDB/AOF files survives.
    pub fn restart_after_kill(&mut self) {
        self.reset_conns();
        self.kill();
        self.relaunch();
    }

    // -------------------------------------------------------- replication

    /// `REPLICAOF 127.0.0.1 <primary port>` on this server (asserts `OK`).
    /// Follow with [`wait_replica_synced`](crate::wait_replica_synced).
    pub fn replicate_from(&self, primary: &Server) {
        let v = self.cmd_value(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()]);
        assert_eq!(v, v_ok(), "{}: REPLICAOF failed", self.kind.name);
    }
}
