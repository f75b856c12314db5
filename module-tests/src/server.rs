//! Starting and talking to one server process: [`ServerKind`] / [`server_kinds`] (which
//! binaries to test), [`ServerOptions`], [`Server`] (process, directory, connections,
//! restarts) and the port / directory allocation behind them.
//!
//! This file holds [`Server`] itself (start, state, connections, commands); the rest
//! lives in private submodules whose public items are re-exported here: `paths`
//! (repository root, module, `redis-cli`), `kinds`, `options`, `ports_dirs`, `launch`
//! (config file, process start) and `restart` (restarts, `REPLICAOF`).

mod kinds;
mod launch;
mod lock;
mod options;
mod paths;
mod ports_dirs;
mod restart;

pub use kinds::*;
pub use options::*;
pub use paths::*;
pub(crate) use ports_dirs::alloc_port;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;
use std::time::Duration;

use redis::ConnectionLike as _;
use redis::Value;

use crate::values::{error_text, server_error_text};
use launch::StartError;
use lock::lock;
use ports_dirs::{alloc_dir, warn_if_module_stale};

/// How long [`Server::start`] waits for the first `PING` to succeed.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Read/write timeout put on every connection the harness opens, so a hung
/// server fails a test instead of hanging it.
pub const IO_TIMEOUT: Duration = Duration::from_secs(60);

// ===================================================================== server

/// A server process on `127.0.0.1:<port>` with its own directory. Killed
/// (SIGKILL, then reaped) on drop; its directory is kept for debugging.
///
/// `Server` is `Send + Sync`: the convenience methods (`cmd_value`, ...) share
/// one cached connection per protocol behind a mutex. Connection state such as
/// `SELECT` or `CLIENT REPLY` therefore persists between those calls; open a
/// dedicated connection with [`Server::conn`] for anything stateful.
pub struct Server {
    kind: ServerKind,
    opts: ServerOptions,
    pub(crate) port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
    conn2: Mutex<Option<redis::Connection>>,
    conn3: Mutex<Option<redis::Connection>>,
}

impl Server {
    /// Start `kind` with the module loaded and default options.
    pub fn start(kind: &ServerKind) -> Server {
        Server::start_with(kind, ServerOptions::new())
    }

    /// Start `kind` without loading any module (harness self-tests, baselines).
    pub fn start_without_module(kind: &ServerKind) -> Server {
        Server::start_with(kind, ServerOptions::new().without_module())
    }

    /// Start `kind` with `opts`; retries on another port if the chosen one
    /// turns out to be taken. Panics (with the server log tail) if the server
    /// does not answer PING within [`START_TIMEOUT`] or exits (e.g. the module
    /// failed to load).
    pub fn start_with(kind: &ServerKind, opts: ServerOptions) -> Server {
        if opts.load_module {
            let m = opts.module.clone().unwrap_or_else(module_path);
            assert!(
                m.is_file(),
                "module {} not found: run `cargo build --release` in {} (or set TALLY_MODULE)",
                m.display(),
                repo_root().display()
            );
            warn_if_module_stale(&m);
        }
        let dir = alloc_dir(kind, opts.tag.as_deref());
        let mut last = String::new();
        for _attempt in 0..8 {
            let port = alloc_port();
            let srv = Server {
                kind: kind.clone(),
                opts: opts.clone(),
                port,
                dir: dir.clone(),
                child: Mutex::new(None),
                conn2: Mutex::new(None),
                conn3: Mutex::new(None),
            };
            // Start from a clean directory on every attempt.
            if let Ok(entries) = fs::read_dir(&dir) {
                for e in entries.flatten() {
                    let p = e.path();
                    let _ = if p.is_dir() {
                        fs::remove_dir_all(&p)
                    } else {
                        fs::remove_file(&p)
                    };
                }
            }
            match srv.launch() {
                Ok(()) => return srv,
                Err(StartError::PortInUse) => {
                    srv.kill();
                    last = format!("port {port} in use");
                    continue;
                }
                Err(StartError::Failed(msg)) => {
                    srv.kill();
                    panic!("{msg}")
                }
            }
        }
        panic!("could not start {} ({last})", kind.name);
    }

    // ---------------------------------------------------------------- info

    /// The kind this server was started from.
    pub fn kind(&self) -> &ServerKind {
        &self.kind
    }

    /// The options this server was started with.
    pub fn options(&self) -> &ServerOptions {
        &self.opts
    }

    /// TCP port on 127.0.0.1 (stays the same across [`Server::restart`]).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `"127.0.0.1:<port>"`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis://127.0.0.1:<port>/` URL (RESP2).
    pub fn url_resp2(&self) -> String {
        self.url(false)
    }

    /// The server's working directory (RDB, AOF, nodes.conf, logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of the server log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// The last `n` lines of the server log (includes crash reports and
    /// module log output).
    pub fn log_tail(&self, n: usize) -> String {
        tail_lines(&fs::read_to_string(self.log_path()).unwrap_or_default(), n)
    }

    /// Process id of the current server process (changes on restart).
    pub fn pid(&self) -> u32 {
        lock(&self.child)
            .as_ref()
            .map(|c| c.id())
            .expect("server not running")
    }

    /// True if the process has not exited (no crash) — does not talk to it.
    pub fn process_running(&self) -> bool {
        lock(&self.child).is_some() && self.exit_status().is_none()
    }

    /// True if the process is still running AND answers PING on a fresh
    /// connection within 5 s. Use after abusive inputs to prove the server did
    /// not crash.
    pub fn is_alive(&self) -> bool {
        if !self.process_running() {
            return false;
        }
        match self.try_connect(false, Duration::from_secs(5)) {
            Ok(mut c) => {
                let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                matches!(redis::cmd("PING").query::<String>(&mut c), Ok(s) if s == "PONG")
            }
            Err(_) => false,
        }
    }

    /// Asserts [`Server::is_alive`], panicking with the log tail otherwise.
    pub fn assert_alive(&self) {
        assert!(
            self.is_alive(),
            "{} on port {} is not alive.\n--- server.log ---\n{}",
            self.kind.name,
            self.port,
            self.log_tail(60)
        );
    }

    // ---------------------------------------------------------- connections

    /// A new RESP2 connection (read/write timeouts [`IO_TIMEOUT`]). Panics on
    /// connection failure.
    pub fn conn(&self) -> redis::Connection {
        self.try_connect(false, Duration::from_secs(5))
            .unwrap_or_else(|e| {
                panic!(
                    "connect to {} {}: {e}\n{}",
                    self.kind.name,
                    self.addr(),
                    self.log_tail(30)
                )
            })
    }

    /// A new RESP3 connection (`HELLO 3` is sent by the client). Panics on
    /// connection failure.
    pub fn conn_resp3(&self) -> redis::Connection {
        self.try_connect(true, Duration::from_secs(5))
            .unwrap_or_else(|e| {
                panic!(
                    "connect (resp3) to {} {}: {e}\n{}",
                    self.kind.name,
                    self.addr(),
                    self.log_tail(30)
                )
            })
    }

    fn run_cached(&self, resp3: bool, args: &[&[u8]]) -> Value {
        assert!(!args.is_empty(), "empty command");
        let slot = if resp3 { &self.conn3 } else { &self.conn2 };
        let mut g = lock(slot);
        if g.is_none() {
            *g = Some(if resp3 {
                self.conn_resp3()
            } else {
                self.conn()
            });
        }
        let mut cmd = redis::Cmd::new();
        for a in args {
            cmd.arg(*a);
        }
        match g.as_mut().unwrap().req_command(&cmd) {
            Ok(v) => v,
            Err(e) => {
                *g = None; // reconnect next time
                drop(g);
                panic!(
                    "{} {}: connection error on {:?}: {e} (process running: {})\n--- server.log ---\n{}",
                    self.kind.name,
                    self.addr(),
                    args.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>(),
                    self.process_running(),
                    self.log_tail(40)
                )
            }
        }
    }

    /// Runs one command on the shared RESP2 connection and returns the raw
    /// reply. Error replies are returned as `Value::ServerError` (compare
    /// with [`v_err`] or read with [`error_text`]); panics only on
    /// connection/IO errors. Accepts `&[&str]`, `&[String]`, `&[&[u8]]`, ...
    pub fn cmd_value<A: AsRef<[u8]>>(&self, args: &[A]) -> Value {
        let a: Vec<&[u8]> = args.iter().map(|x| x.as_ref()).collect();
        self.run_cached(false, &a)
    }

    /// Like [`Server::cmd_value`] on a shared RESP3 connection.
    pub fn cmd_value_resp3<A: AsRef<[u8]>>(&self, args: &[A]) -> Value {
        let a: Vec<&[u8]> = args.iter().map(|x| x.as_ref()).collect();
        self.run_cached(true, &a)
    }

    /// Runs one command (RESP2); `Err` holds the full error text of an error
    /// reply, e.g. `"ERR syntax error"` or `"WRONGTYPE Operation against a
    /// key holding the wrong kind of value"`.
    pub fn cmd<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<Value, String> {
        match self.cmd_value(args) {
            Value::ServerError(e) => Err(server_error_text(&e)),
            v => Ok(v),
        }
    }

    /// Runs one command (RESP2) and converts the reply with
    /// [`redis::FromRedisValue`], e.g. `srv.query::<i64>(&["HLEN", "h"])`.
    /// Panics on an error reply or a conversion failure.
    pub fn query<T: redis::FromRedisValue, A: AsRef<[u8]>>(&self, args: &[A]) -> T {
        let v = self.cmd_value(args);
        if let Some(e) = error_text(&v) {
            panic!(
                "{}: {:?} failed: {e}",
                self.kind.name,
                args.iter()
                    .map(|a| String::from_utf8_lossy(a.as_ref()))
                    .collect::<Vec<_>>()
            );
        }
        redis::from_redis_value(v.clone())
            .unwrap_or_else(|e| panic!("{}: cannot convert {v:?}: {e}", self.kind.name))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(status) = self.exit_status() {
            eprintln!(
                "module-tests: {} on port {} had already exited ({status}) before drop; dir {}\n--- server.log ---\n{}",
                self.kind.name,
                self.port,
                self.dir.display(),
                self.log_tail(40)
            );
        }
        self.reset_conns();
        self.kill();
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("kind", &self.kind.name)
            .field("port", &self.port)
            .field("dir", &self.dir)
            .finish()
    }
}

pub(crate) fn tail_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
