//! Integration-test harness for the `tally` Redis module.
//!
//! Every test in `module-tests/tests/*.rs` starts real server processes
//! (Redis and Valkey) on `127.0.0.1`, loads `libtally.so` into them and talks
//! to them with the [`redis`] crate (re-exported as `module_tests::redis`).
//!
//! # Typical test
//!
//! ```ignore
//! use module_tests::*;
//!
//! #[test]
//! fn incr_works() {
//!     for kind in server_kinds() {
//!         let srv = Server::start(&kind); // loads the module
//!         assert_eq!(srv.cmd_value(&["SET", "k", "v"]), v_ok(), "{}", kind.name);
//!         assert_eq!(srv.cmd_value(&["GET", "k"]), v_bulk("v"));
//!         assert_eq!(srv.cmd_value(&["LPUSH", "k", "x"]),
//!             v_err("WRONGTYPE Operation against a key holding the wrong kind of value"));
//!         assert!(srv.is_alive());
//!     }
//! }
//! ```
//!
//! # Expected replies ([`Value`] variants, redis crate 1.8)
//!
//! | server reply              | RESP2 connection ([`Server::conn`], [`Server::cmd_value`]) | RESP3 connection ([`Server::conn_resp3`], [`Server::cmd_value_resp3`]) |
//! |---------------------------|-----------------------------------|-----------------------------------|
//! | `+OK`                     | `Value::Okay` ([`v_ok`])          | `Value::Okay` ([`v_ok`])          |
//! | other simple string       | `Value::SimpleString` ([`v_simple`]) e.g. PING → `v_simple("PONG")` | same |
//! | integer                   | `Value::Int` ([`v_int`])          | `Value::Int` ([`v_int`])          |
//! | bulk string               | `Value::BulkString` ([`v_bulk`], [`v_bulk_bytes`]) | same |
//! | nil (`$-1`, `*-1`, `_`)   | `Value::Nil` ([`v_nil`])          | `Value::Nil` ([`v_nil`])          |
//! | array                     | `Value::Array` ([`v_arr`], [`v_bulks`]) | `Value::Array`              |
//! | map (HGETALL, CONFIG GET, module `reply_with_map`) | flat `Value::Array` of k, v, k, v | `Value::Map` ([`v_map`]) in server order |
//! | set (SMEMBERS, module `reply_with_set`) | `Value::Array`        | `Value::Set` ([`v_set`])          |
//! | double (ZSCORE, module `reply_with_double`) | `Value::BulkString` with the server's text, e.g. `v_bulk("1.5")` | `Value::Double` ([`v_double`]) |
//! | boolean                   | `Value::Int` 0/1                  | `Value::Boolean` ([`v_bool`])     |
//! | verbatim (INFO, ...)      | `Value::BulkString`               | `Value::VerbatimString`           |
//! | error reply               | `Value::ServerError` ([`v_err`]) — use [`error_text`] to get `"ERR syntax error"` | same |
//!
//! `cmd_value*` return error replies as values (they never panic on an error
//! *reply*, only on connection failures), so `assert_eq!(srv.cmd_value(..),
//! v_err("ERR syntax error"))` checks the exact error text. [`Server::cmd`]
//! returns `Result<Value, String>` with the full error text in `Err`.
//!
//! # Shared test helpers
//!
//! [`server_ms`] (the server's clock), [`pipeline`] (one round trip, one reply
//! per command), [`exists`], [`hgetall`], [`slot_fields`], [`map_pairs`]
//! (RESP2/RESP3 map replies as pairs) and [`Rng`] (seeded splitmix64 for
//! reproducible workloads).
//!
//! # Environment
//!
//! * `TALLY_SERVERS` — `name=path,name=path` list of server binaries to test
//!   against (default: `redis=<redis-server on PATH>` plus
//!   `redis8=<repo>/.tools/bin/redis8-server` and
//!   `valkey=<repo>/.tools/bin/valkey-server` if they exist; `scripts/deps.sh`
//!   installs all three).
//! * `TALLY_MODULE` — module to load (default `<repo>/target/release/libtally.so`,
//!   built by `cargo build --release`).
//! * `TALLY_REDIS_CLI` — `redis-cli` used by [`start_cluster`] (default: on PATH).
//!
//! Paths in these variables may be absolute, bare names looked up on PATH
//! (`redis=redis-server`), or relative to the repository root
//! (`valkey=.tools/bin/valkey-server`).
//!
//! Server directories (config, log, RDB/AOF, nodes.conf) live under
//! `<repo>/target/module-tests-tmp/<test binary>/<test name>-<kind>-<n>/` and
//! are left there for debugging; the same path is wiped when it is reused.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime};

pub use redis;
pub use redis::Value;

use redis::ConnectionLike as _;

/// How long [`Server::start`] waits for the first `PING` to succeed.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`wait_replica_synced`] waits.
pub const REPLICA_SYNC_TIMEOUT: Duration = Duration::from_secs(20);
/// How long [`start_cluster`] waits for `cluster_state:ok` everywhere.
pub const CLUSTER_TIMEOUT: Duration = Duration::from_secs(30);
/// Read/write timeout put on every connection the harness opens, so a hung
/// server fails a test instead of hanging it.
pub const IO_TIMEOUT: Duration = Duration::from_secs(60);

// ===================================================================== paths

/// The repository root (parent of the `module-tests` crate directory).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("module-tests has a parent directory")
        .to_path_buf()
}

/// Path of the module to load: env `TALLY_MODULE`, or
/// `<repo root>/target/release/libtally.so`.
pub fn module_path() -> PathBuf {
    match std::env::var_os("TALLY_MODULE") {
        Some(p) if !p.is_empty() => resolve_user_path(&p.to_string_lossy()),
        _ => repo_root().join("target/release/libtally.so"),
    }
}

/// The `redis-cli` binary (env `TALLY_REDIS_CLI`, else `redis-cli` on PATH).
/// Used for `--cluster create` for every server kind (the Valkey package ships
/// no `valkey-cli`).
pub fn redis_cli() -> PathBuf {
    match std::env::var_os("TALLY_REDIS_CLI") {
        Some(p) if !p.is_empty() => resolve_user_path(&p.to_string_lossy()),
        _ => find_on_path("redis-cli").unwrap_or_else(|| PathBuf::from("redis-cli")),
    }
}

/// Resolves a path given in an environment variable: absolute paths as is,
/// bare names (no `/`) on PATH, other relative paths against the repo root
/// (test binaries run with the crate directory as cwd, so cwd is useless).
fn resolve_user_path(p: &str) -> PathBuf {
    let path = Path::new(p);
    if path.is_absolute() {
        path.to_path_buf()
    } else if !p.contains('/') {
        find_on_path(p).unwrap_or_else(|| path.to_path_buf())
    } else {
        repo_root().join(path)
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

// =============================================================== server kinds

/// One server implementation to test against, e.g. `redis` →
/// `/usr/bin/redis-server` or `valkey` → `<repo>/.tools/bin/valkey-server`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ServerKind {
    /// Short name used in messages and directory names (`redis`, `redis8`, `valkey`).
    pub name: String,
    /// The server executable.
    pub bin: PathBuf,
}

impl ServerKind {
    /// A kind from a name and a binary path.
    pub fn new(name: impl Into<String>, bin: impl Into<PathBuf>) -> Self {
        ServerKind {
            name: name.into(),
            bin: bin.into(),
        }
    }

    /// Output of `<bin> --version`, e.g.
    /// `Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 ...`
    /// (cached per binary).
    pub fn version_string(&self) -> String {
        static CACHE: OnceLock<Mutex<HashMap<PathBuf, String>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        if let Some(v) = lock(cache).get(&self.bin) {
            return v.clone();
        }
        let out = Command::new(&self.bin)
            .arg("--version")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {} --version: {e}", self.bin.display()));
        let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
        lock(cache).insert(self.bin.clone(), v.clone());
        v
    }

    /// `(major, minor, patch)` parsed from `v=X.Y.Z` in [`Self::version_string`].
    pub fn version(&self) -> (u32, u32, u32) {
        let s = self.version_string();
        let v = s
            .split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .unwrap_or("0.0.0");
        let mut it = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        (
            it.next().unwrap_or(0),
            it.next().unwrap_or(0),
            it.next().unwrap_or(0),
        )
    }

    /// True for Valkey binaries (`Valkey server v=...`).
    pub fn is_valkey(&self) -> bool {
        self.version_string().starts_with("Valkey")
    }

    /// Whether the server knows `enable-debug-command` / `enable-module-command`
    /// / `SHUTDOWN ... NOW` (Redis >= 7.0, every Valkey).
    pub fn is_v7_or_later(&self) -> bool {
        self.is_valkey() || self.version().0 >= 7
    }
}

/// The server kinds every test loops over.
///
/// From env `TALLY_SERVERS` (`name=path,name=path`), else `redis=<redis-server
/// on PATH>` plus `redis8=<repo>/.tools/bin/redis8-server` (Redis 8.2) and
/// `valkey=<repo>/.tools/bin/valkey-server` for each of those files that
/// exists. Panics if the result is empty (run `bash scripts/deps.sh`).
pub fn server_kinds() -> Vec<ServerKind> {
    let mut kinds = Vec::new();
    match std::env::var("TALLY_SERVERS") {
        Ok(spec) if !spec.trim().is_empty() => {
            for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let (name, path) = item
                    .split_once('=')
                    .unwrap_or_else(|| panic!("TALLY_SERVERS entry {item:?} is not name=path"));
                kinds.push(ServerKind::new(name.trim(), resolve_user_path(path.trim())));
            }
        }
        _ => {
            if let Some(p) = find_on_path("redis-server") {
                kinds.push(ServerKind::new("redis", p));
            }
            // The same order as the Makefile's default: redis, redis8, valkey.
            for (name, bin) in [("redis8", "redis8-server"), ("valkey", "valkey-server")] {
                let path = repo_root().join(".tools/bin").join(bin);
                if path.exists() {
                    kinds.push(ServerKind::new(name, path));
                } else {
                    eprintln!(
                        "module-tests: {} missing, testing without {name} (run scripts/deps.sh)",
                        path.display()
                    );
                }
            }
        }
    }
    assert!(
        !kinds.is_empty(),
        "no server binaries found: run `bash scripts/deps.sh` or set TALLY_SERVERS"
    );
    kinds
}

// ==================================================================== options

/// How to start a [`Server`]. Build with [`ServerOptions::new`] and the
/// chaining methods; every field is public for inspection.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Load the module (default true). See [`ServerOptions::without_module`].
    pub load_module: bool,
    /// Module path; `None` means [`module_path()`].
    pub module: Option<PathBuf>,
    /// Arguments after the module path on the `loadmodule` line.
    pub module_args: Vec<String>,
    /// Extra config directives, written after the harness defaults. A name
    /// given here replaces the harness default of the same name (`save`,
    /// `repl-diskless-sync-delay`, ...).
    pub config: Vec<(String, String)>,
    /// Start with `cluster-enabled yes` and `cluster-config-file nodes.conf`.
    pub cluster: bool,
    /// Tag used in the directory name; default: the current test's name.
    pub tag: Option<String>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions::new()
    }
}

impl ServerOptions {
    /// Defaults: module loaded with no arguments, no extra config, standalone.
    pub fn new() -> Self {
        ServerOptions {
            load_module: true,
            module: None,
            module_args: Vec::new(),
            config: Vec::new(),
            cluster: false,
            tag: None,
        }
    }

    /// Add a config directive, e.g. `.config("appendonly", "yes")` or
    /// `.config("maxmemory", "2mb")`. The value is written verbatim after the
    /// name on the config-file line (so `"900 1"` is two tokens, as multi-arg
    /// directives want); an empty value is written as `""`.
    pub fn config(mut self, name: &str, value: &str) -> Self {
        self.config.push((name.to_string(), value.to_string()));
        self
    }

    /// Arguments passed to the module on its `loadmodule` line.
    pub fn module_args<S: AsRef<str>>(mut self, args: &[S]) -> Self {
        self.module_args = args.iter().map(|s| s.as_ref().to_string()).collect();
        self
    }

    /// Load this module file instead of [`module_path()`].
    pub fn module(mut self, path: impl Into<PathBuf>) -> Self {
        self.module = Some(path.into());
        self
    }

    /// Start a plain server without any module.
    pub fn without_module(mut self) -> Self {
        self.load_module = false;
        self
    }

    /// Enable cluster mode (`cluster-enabled yes`, `cluster-config-file nodes.conf`).
    pub fn cluster(mut self, on: bool) -> Self {
        self.cluster = on;
        self
    }

    /// Directory-name tag (default: current test name).
    pub fn tag(mut self, tag: &str) -> Self {
        self.tag = Some(tag.to_string());
        self
    }
}

// ============================================================== port & dirs

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Picks a port P such that P and P+10000 (the cluster bus port) are both
/// bindable on 127.0.0.1. Ports come from 10000..22700, below Linux's
/// ephemeral range (32768+), so an outgoing client connection can never take
/// a server's port while it is restarting. Never hands out a port twice per
/// process.
fn alloc_port() -> u16 {
    const LO: usize = 10000;
    const SPAN: usize = 12700;
    static NEXT: OnceLock<AtomicUsize> = OnceLock::new();
    static USED: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    let next = NEXT.get_or_init(|| {
        let seed = std::process::id() as usize
            ^ SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.subsec_nanos() as usize)
                .unwrap_or(0);
        AtomicUsize::new(seed.wrapping_mul(7919) % SPAN)
    });
    let used = USED.get_or_init(Default::default);
    for _ in 0..SPAN {
        let port = (LO + next.fetch_add(1, Ordering::Relaxed) % SPAN) as u16;
        if lock(used).contains(&port) {
            continue;
        }
        let ok = TcpListener::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port + 10000)).is_ok();
        if ok && lock(used).insert(port) {
            return port;
        }
    }
    panic!("no free port pair found in 10000..32700");
}

fn sanitize(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    out.truncate(80);
    out
}

/// `<repo>/target/module-tests-tmp/<exe>/<tag>-<kind>-<n>`; wiped if present.
fn alloc_dir(kind: &ServerKind, tag: Option<&str>) -> PathBuf {
    static COUNTERS: OnceLock<Mutex<HashMap<String, usize>>> = OnceLock::new();
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "tests".into());
    // Strip cargo's `-<hash>` suffix so the path is stable across builds.
    let exe = match exe.rsplit_once('-') {
        Some((a, h)) if h.len() == 16 && h.chars().all(|c| c.is_ascii_hexdigit()) => a.to_string(),
        _ => exe,
    };
    let tag = tag
        .map(str::to_string)
        .unwrap_or_else(|| std::thread::current().name().unwrap_or("main").to_string());
    let base = format!("{}-{}", sanitize(&tag), sanitize(&kind.name));
    let n = {
        let mut c = lock(COUNTERS.get_or_init(Default::default));
        let e = c.entry(base.clone()).or_insert(0);
        *e += 1;
        *e
    };
    let dir = repo_root()
        .join("target/module-tests-tmp")
        .join(sanitize(&exe))
        .join(format!("{base}-{n}"));
    if dir.exists() {
        let _ = fs::remove_dir_all(&dir);
    }
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

fn quote_conf(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn conf_value(v: &str) -> String {
    if v.is_empty() || v.contains(['"', '\'', '\\', '\n']) {
        quote_conf(v)
    } else {
        v.to_string()
    }
}

fn warn_if_module_stale(module: &Path) {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let Ok(m) = fs::metadata(module).and_then(|m| m.modified()) else {
            return;
        };
        fn newest(dir: &Path) -> Option<SystemTime> {
            let mut best = None;
            for e in fs::read_dir(dir).ok()?.flatten() {
                let p = e.path();
                let t = if p.is_dir() {
                    newest(&p)
                } else {
                    e.metadata().ok()?.modified().ok()
                };
                best = best.max(t);
            }
            best
        }
        if let Some(src) = newest(&repo_root().join("src")) {
            if src > m {
                eprintln!(
                    "module-tests: WARNING {} is older than src/: run `cargo build --release`",
                    module.display()
                );
            }
        }
    });
}

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
    port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
    conn2: Mutex<Option<redis::Connection>>,
    conn3: Mutex<Option<redis::Connection>>,
}

enum StartError {
    PortInUse,
    Failed(String),
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

    fn write_config(&self) -> PathBuf {
        let mut c = String::new();
        let user: HashSet<String> = self
            .opts
            .config
            .iter()
            .map(|(k, _)| k.to_ascii_lowercase())
            .collect();
        let mut put = |k: &str, v: &str, quoted: bool| {
            if user.contains(k) {
                return;
            }
            let v = if quoted { quote_conf(v) } else { conf_value(v) };
            let _ = writeln!(c, "{k} {v}");
        };
        put("port", &self.port.to_string(), false);
        put("bind", "127.0.0.1", false);
        put("daemonize", "no", false);
        put("dir", &self.dir.to_string_lossy(), true);
        put(
            "logfile",
            &self.dir.join("server.log").to_string_lossy(),
            true,
        );
        put("save", "", false);
        // Full syncs start at once instead of after the default 5 s delay.
        put("repl-diskless-sync-delay", "0", false);
        if self.kind.is_v7_or_later() {
            put("enable-debug-command", "yes", false);
            put("enable-module-command", "yes", false);
        }
        if self.opts.cluster {
            put("cluster-enabled", "yes", false);
            put("cluster-config-file", "nodes.conf", false);
        }
        if self.opts.load_module {
            let m = self.opts.module.clone().unwrap_or_else(module_path);
            let mut line = format!("loadmodule {}", quote_conf(&m.to_string_lossy()));
            for a in &self.opts.module_args {
                line.push(' ');
                line.push_str(&quote_conf(a));
            }
            let _ = writeln!(c, "{line}");
        }
        for (k, v) in &self.opts.config {
            let _ = writeln!(c, "{k} {}", conf_value(v));
        }
        let path = self.dir.join("server.conf");
        fs::write(&path, c).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// Spawns the process on `self.port` with the existing directory and waits
    /// for PING.
    fn launch(&self) -> Result<(), StartError> {
        let conf = self.write_config();
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("stdout.log"))
            .expect("open stdout.log");
        let err = out.try_clone().expect("dup stdout.log");
        let log_len = fs::metadata(self.log_path()).map(|m| m.len()).unwrap_or(0);
        let child = Command::new(&self.kind.bin)
            .arg(&conf)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| {
                StartError::Failed(format!("cannot spawn {}: {e}", self.kind.bin.display()))
            })?;
        *lock(&self.child) = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.exit_status() {
                let log = self.log_since(log_len);
                if log.contains("Address already in use") {
                    return Err(StartError::PortInUse);
                }
                return Err(StartError::Failed(format!(
                    "{} on port {} exited during startup ({status}).\n--- server.log (new part) ---\n{}\n--- stdout.log ---\n{}",
                    self.kind.name,
                    self.port,
                    tail_lines(&log, 40),
                    tail_lines(&fs::read_to_string(self.dir.join("stdout.log")).unwrap_or_default(), 20),
                )));
            }
            if let Ok(mut c) = self.try_connect(false, Duration::from_millis(500)) {
                match redis::cmd("PING").query::<String>(&mut c) {
                    Ok(_) => return Ok(()),
                    Err(e) if e.code() == Some("LOADING") => {}
                    Err(_) => {}
                }
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(StartError::Failed(format!(
                    "{} on port {} did not answer PING within {:?}.\n--- server.log ---\n{}",
                    self.kind.name,
                    self.port,
                    START_TIMEOUT,
                    self.log_tail(40)
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log_since(&self, offset: u64) -> String {
        let mut s = String::new();
        if let Ok(mut f) = fs::File::open(self.log_path()) {
            let _ = f.seek(SeekFrom::Start(offset));
            let mut buf = Vec::new();
            let _ = f.read_to_end(&mut buf);
            s = String::from_utf8_lossy(&buf).into_owned();
        }
        s
    }

    fn exit_status(&self) -> Option<ExitStatus> {
        let mut g = lock(&self.child);
        match g.as_mut() {
            Some(c) => c.try_wait().ok().flatten(),
            None => None,
        }
    }

    fn kill(&self) {
        if let Some(mut c) = lock(&self.child).take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn try_connect(&self, resp3: bool, timeout: Duration) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url(resp3))?;
        let c = client.get_connection_with_timeout(timeout)?;
        c.set_read_timeout(Some(IO_TIMEOUT))?;
        c.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(c)
    }

    fn url(&self, resp3: bool) -> String {
        if resp3 {
            format!("redis://127.0.0.1:{}/?protocol=resp3", self.port)
        } else {
            format!("redis://127.0.0.1:{}/", self.port)
        }
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

    /// `INFO <section>` parsed into `field -> value` (lines `k:v`).
    pub fn info(&self, section: &str) -> HashMap<String, String> {
        let mut c = self.conn();
        let s: String = redis::cmd("INFO")
            .arg(section)
            .query(&mut c)
            .unwrap_or_else(|e| panic!("{} INFO {section}: {e}", self.kind.name));
        parse_info(&s)
    }

    /// [`dump_keyspace`] over a fresh RESP2 connection.
    pub fn dump_keyspace(&self) -> BTreeMap<String, KeyDump> {
        dump_keyspace(&mut self.conn())
    }

    // ----------------------------------------------------------- restarts

    fn reset_conns(&self) {
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
    /// Follow with [`wait_replica_synced`].
    pub fn replicate_from(&self, primary: &Server) {
        let v = self.cmd_value(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()]);
        assert_eq!(v, v_ok(), "{}: REPLICAOF failed", self.kind.name);
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

fn tail_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Parses `INFO` text (`k:v` lines; `#` headers ignored) into a map.
pub fn parse_info(s: &str) -> HashMap<String, String> {
    s.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.trim_end().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
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

// ================================================================ keyspace

/// Contents of one key, as captured by [`dump_keyspace`]. All byte strings
/// are rendered losslessly with [`escape_bytes`] (valid UTF-8 stays readable).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyValue {
    /// `GET`.
    String(String),
    /// `HGETALL`, field/value pairs sorted by field.
    Hash(Vec<(String, String)>),
    /// `ZRANGE key 0 -1 WITHSCORES` in rank order: (member, score text as the
    /// server formats it on RESP2).
    ZSet(Vec<(String, String)>),
    /// `SMEMBERS`, sorted.
    Set(Vec<String>),
    /// `LRANGE key 0 -1`.
    List(Vec<String>),
    /// Anything else (streams, module types): the `DUMP` payload.
    Dump(String),
}

/// One key as captured by [`dump_keyspace`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KeyDump {
    /// Output of `TYPE` (`string`, `hash`, `zset`, ... or a module type name).
    pub key_type: String,
    /// Whether the key has a TTL (`PTTL >= 0`). The TTL value itself is not
    /// compared because it keeps changing.
    pub has_expire: bool,
    /// Full contents.
    pub value: KeyValue,
}

/// Lossless, readable rendering of bytes: valid UTF-8 is kept (with `\` →
/// `\\` and control characters as `\xNN`); invalid bytes become `\xNN`.
pub fn escape_bytes(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        for ch in chunk.valid().chars() {
            match ch {
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                    let _ = write!(out, "\\x{:02x}", c as u32);
                }
                c => out.push(c),
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out
}

/// The bytes of a string-like reply (bulk, simple, verbatim, OK), if any.
pub fn value_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.clone().into_bytes()),
        Value::Okay => Some(b"OK".to_vec()),
        Value::VerbatimString { text, .. } => Some(text.clone().into_bytes()),
        _ => None,
    }
}

/// A string rendering of scalar replies: bulk/simple/verbatim text (lossy
/// UTF-8), `OK`, integers, doubles (Rust `{}` formatting), booleans.
/// `None` for nil, aggregates and errors.
pub fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::Int(i) => Some(i.to_string()),
        Value::Double(d) => Some(d.to_string()),
        Value::Boolean(b) => Some(b.to_string()),
        other => value_bytes(other).map(|b| String::from_utf8_lossy(&b).into_owned()),
    }
}

fn items(v: Value) -> Vec<Value> {
    match v {
        Value::Array(a) | Value::Set(a) => a,
        Value::Map(m) => m.into_iter().flat_map(|(k, v)| [k, v]).collect(),
        Value::Nil => Vec::new(),
        other => panic!("expected an aggregate reply, got {other:?}"),
    }
}

fn flatten_pairs(v: Value) -> Vec<Value> {
    // RESP3 WITHSCORES replies are arrays of [member, score] pairs.
    items(v)
        .into_iter()
        .flat_map(|x| match x {
            Value::Array(inner) => inner,
            other => vec![other],
        })
        .collect()
}

fn q(conn: &mut redis::Connection, args: &[&[u8]]) -> Value {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(*a);
    }
    match conn.req_command(&cmd) {
        Ok(Value::ServerError(e)) => panic!(
            "{:?}: {}",
            args.iter()
                .map(|a| String::from_utf8_lossy(a))
                .collect::<Vec<_>>(),
            server_error_text(&e)
        ),
        Ok(v) => v,
        Err(e) => panic!("dump_keyspace: connection error: {e}"),
    }
}

/// Captures every key of every non-empty DB (from `INFO keyspace`) with its
/// type, TTL presence and full contents, keyed `"db<N>:<escaped key>"`
/// (e.g. `"db0:user:1"`). Compare two dumps with `assert_eq!` to prove a
/// replica equals its primary or a reload equals the state before.
///
/// Pass a RESP2 connection (zset scores are then the server's own text).
/// The connection is left on `SELECT 0`.
pub fn dump_keyspace(conn: &mut redis::Connection) -> BTreeMap<String, KeyDump> {
    let info = value_text(&q(conn, &[b"INFO", b"keyspace"])).unwrap_or_default();
    let dbs: Vec<u32> = parse_info(&info)
        .keys()
        .filter_map(|k| k.strip_prefix("db")?.parse().ok())
        .collect();
    let mut out = BTreeMap::new();
    for db in dbs {
        let dbs = db.to_string();
        q(conn, &[b"SELECT", dbs.as_bytes()]);
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut cursor = b"0".to_vec();
        loop {
            let mut r = items(q(conn, &[b"SCAN", &cursor, b"COUNT", b"1000"])).into_iter();
            cursor = value_bytes(&r.next().expect("SCAN cursor")).expect("SCAN cursor");
            keys.extend(
                items(r.next().expect("SCAN keys"))
                    .iter()
                    .filter_map(value_bytes),
            );
            if cursor == b"0" {
                break;
            }
        }
        keys.sort();
        keys.dedup();
        for key in keys {
            let k = key.as_slice();
            let key_type = value_text(&q(conn, &[b"TYPE", k])).unwrap_or_default();
            if key_type == "none" {
                continue; // expired meanwhile
            }
            let pttl = match q(conn, &[b"PTTL", k]) {
                Value::Int(i) => i,
                other => panic!("PTTL: {other:?}"),
            };
            if pttl == -2 {
                continue;
            }
            let esc = |v: &Value| escape_bytes(&value_bytes(v).unwrap_or_default());
            let pairs = |v: Vec<Value>| -> Vec<(String, String)> {
                v.chunks(2)
                    .map(|c| {
                        let score = match &c[1] {
                            Value::Double(d) => d.to_string(),
                            other => esc(other),
                        };
                        (esc(&c[0]), score)
                    })
                    .collect()
            };
            let value = match key_type.as_str() {
                "string" => KeyValue::String(esc(&q(conn, &[b"GET", k]))),
                "hash" => {
                    let mut p = pairs(items(q(conn, &[b"HGETALL", k])));
                    p.sort();
                    KeyValue::Hash(p)
                }
                "zset" => KeyValue::ZSet(pairs(flatten_pairs(q(
                    conn,
                    &[b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"],
                )))),
                "set" => {
                    let mut m: Vec<String> =
                        items(q(conn, &[b"SMEMBERS", k])).iter().map(esc).collect();
                    m.sort();
                    KeyValue::Set(m)
                }
                "list" => KeyValue::List(
                    items(q(conn, &[b"LRANGE", k, b"0", b"-1"]))
                        .iter()
                        .map(esc)
                        .collect(),
                ),
                _ => KeyValue::Dump(esc(&q(conn, &[b"DUMP", k]))),
            };
            out.insert(
                format!("db{db}:{}", escape_bytes(k)),
                KeyDump {
                    key_type,
                    has_expire: pttl >= 0,
                    value,
                },
            );
        }
    }
    q(conn, &[b"SELECT", b"0"]);
    out
}

// ================================================================== cluster

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

// ================================================================== helpers

/// Calls `f` every 20 ms until it returns true (→ `true`) or `timeout`
/// passes (→ `false`). Use as `assert!(wait_until(..., || ...))`.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The server's clock in Unix ms, from `TIME` (what the module reads as "now").
pub fn server_ms(srv: &Server) -> i64 {
    match srv.cmd_value(&["TIME"]) {
        Value::Array(v) if v.len() == 2 => {
            let s: i64 = value_text(&v[0])
                .and_then(|t| t.parse().ok())
                .expect("TIME secs");
            let us: i64 = value_text(&v[1])
                .and_then(|t| t.parse().ok())
                .expect("TIME us");
            s * 1000 + us / 1000
        }
        other => panic!("TIME gave {other:?}"),
    }
}

/// Sends `cmds` as one pipeline on `conn` and returns one reply per command;
/// error replies stay `Value::ServerError` (nothing is checked here).
pub fn pipeline<A: AsRef<[u8]>>(conn: &mut redis::Connection, cmds: &[Vec<A>]) -> Vec<Value> {
    let mut pipe = redis::pipe();
    for c in cmds {
        let mut cmd = redis::Cmd::new();
        for a in c {
            cmd.arg(a.as_ref());
        }
        pipe.add_command(cmd);
    }
    let out = conn
        .req_packed_commands(&pipe.get_packed_pipeline(), 0, cmds.len())
        .expect("pipeline");
    assert_eq!(out.len(), cmds.len());
    out
}

/// `EXISTS key` is 1.
pub fn exists(srv: &Server, key: impl AsRef<[u8]>) -> bool {
    srv.cmd_value(&[b"EXISTS".as_slice(), key.as_ref()]) == v_int(1)
}

/// The hash at `key` as a sorted field -> value map (empty if missing).
pub fn hgetall(srv: &Server, key: impl AsRef<[u8]>) -> BTreeMap<String, String> {
    let v = srv.cmd_value(&[b"HGETALL".as_slice(), key.as_ref()]);
    let Value::Array(items) = v else {
        panic!("HGETALL gave {v:?}")
    };
    items
        .chunks(2)
        .map(|c| (value_text(&c[0]).unwrap(), value_text(&c[1]).unwrap()))
        .collect()
}

/// The slot fields of a tally hash: every field but the `_`-prefixed bookkeeping
/// (`_tally`, `_state`).
pub fn slot_fields(srv: &Server, key: impl AsRef<[u8]>) -> BTreeMap<String, String> {
    hgetall(srv, key)
        .into_iter()
        .filter(|(f, _)| !f.starts_with('_'))
        .collect()
}

/// Field/value pairs of a map reply, in server order: a RESP3 `Value::Map` or
/// the RESP2 flat array `[k1, v1, k2, v2, ...]`.
pub fn map_pairs(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Map(m) => m
            .iter()
            .map(|(k, v)| (value_text(k).unwrap(), v.clone()))
            .collect(),
        Value::Array(a) => a
            .chunks(2)
            .map(|c| (value_text(&c[0]).unwrap(), c[1].clone()))
            .collect(),
        other => panic!("expected a map reply, got {other:?}"),
    }
}

// ========================================================= seeded randomness

/// splitmix64: a tiny seeded PRNG for reproducible workloads (no rand crate).
/// The same seed always gives the same sequence, so a failing seed can be
/// replayed.
///
/// ```ignore
/// let mut rng = Rng(7);
/// let member = format!("m{}", rng.below(30)); // 0..30
/// ```
pub struct Rng(pub u64);

impl Rng {
    /// The next raw 64-bit value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n <= 0` counts as 1, giving 0).
    pub fn below(&mut self, n: i64) -> i64 {
        (self.next_u64() % n.max(1) as u64) as i64
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: i64) -> bool {
        self.below(100) < percent
    }

    /// A uniformly chosen element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as i64) as usize]
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal via Box-Muller.
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1], safe for ln
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Log-normal, exp(3 + N(0, 1)): positive, skewed, spanning several decades.
    pub fn lognormal(&mut self) -> f64 {
        (3.0 + self.normal()).exp()
    }
}

/// Expected integer reply: `Value::Int`.
pub fn v_int(i: i64) -> Value {
    Value::Int(i)
}

/// Expected bulk-string reply: `Value::BulkString`.
pub fn v_bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

/// Expected binary bulk-string reply: `Value::BulkString`.
pub fn v_bulk_bytes(b: &[u8]) -> Value {
    Value::BulkString(b.to_vec())
}

/// Expected array reply: `Value::Array`.
pub fn v_arr(items: Vec<Value>) -> Value {
    Value::Array(items)
}

/// Expected array of bulk strings, e.g. `v_bulks(&["a", "1"])`.
pub fn v_bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| v_bulk(s)).collect())
}

/// Expected nil (RESP2 `$-1` / `*-1`, RESP3 `_`): `Value::Nil`.
pub fn v_nil() -> Value {
    Value::Nil
}

/// Expected `+OK`: `Value::Okay` (the crate maps the simple string "OK" to it).
pub fn v_ok() -> Value {
    Value::Okay
}

/// Expected simple-string reply other than OK (e.g. `PONG`): `Value::SimpleString`.
pub fn v_simple(s: &str) -> Value {
    Value::SimpleString(s.to_string())
}

/// Expected RESP3 double: `Value::Double` (on RESP2 a double is a bulk
/// string: use `v_bulk("1.5")`).
pub fn v_double(d: f64) -> Value {
    Value::Double(d)
}

/// Expected RESP3 map, in the order the server sends it: `Value::Map` (on
/// RESP2 the same reply is a flat `v_arr(vec![k1, v1, k2, v2])`).
pub fn v_map(pairs: Vec<(Value, Value)>) -> Value {
    Value::Map(pairs)
}

/// Expected RESP3 set: `Value::Set` (on RESP2 an array).
pub fn v_set(items: Vec<Value>) -> Value {
    Value::Set(items)
}

/// Expected RESP3 boolean: `Value::Boolean` (on RESP2 an integer 0/1).
pub fn v_bool(b: bool) -> Value {
    Value::Boolean(b)
}

/// Expected error reply with its full text, e.g. `v_err("ERR syntax error")`
/// or `v_err("WRONGTYPE Operation against a key holding the wrong kind of
/// value")`: builds the same `Value::ServerError` the client produces by
/// parsing `-<text>\r\n`.
pub fn v_err(text: &str) -> Value {
    let raw = format!("-{text}\r\n");
    redis::parse_redis_value(raw.as_bytes())
        .unwrap_or_else(|e| panic!("cannot build error value for {text:?}: {e}"))
}

/// Full text of a server error (`"<CODE> <detail>"`), e.g. `"ERR syntax error"`.
pub fn server_error_text(e: &redis::ServerError) -> String {
    match e.details() {
        Some(d) => format!("{} {d}", e.code()),
        None => e.code().to_string(),
    }
}

/// Full error text if `v` is an error reply (`Value::ServerError`), else None.
pub fn error_text(v: &Value) -> Option<String> {
    match v {
        Value::ServerError(e) => Some(server_error_text(e)),
        _ => None,
    }
}

/// Full server error text of a `RedisError` (e.g. from the cluster client or
/// `cmd.query`), `"<CODE> <detail>"`; falls back to its Display form for
/// non-server errors.
pub fn redis_error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(c), Some(d)) => format!("{c} {d}"),
        (Some(c), None) => c.to_string(),
        _ => e.to_string(),
    }
}

// `Server` and `Cluster` can be shared with worker threads (`thread::scope`).
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Server>();
    assert_send_sync::<Cluster>();
};

// ============================================== keyspace census (appended)

/// Every key of database `db`, by `SCAN` (sorted, deduplicated). Leaves the
/// connection on `db`. On a primary, `SCAN` also deletes the logically expired
/// keys it meets (lazy expiry), so the list holds only live keys.
pub fn scan_db_keys(conn: &mut redis::Connection, db: u32) -> Vec<Vec<u8>> {
    let dbs = db.to_string();
    q(conn, &[b"SELECT", dbs.as_bytes()]);
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut cursor = b"0".to_vec();
    loop {
        let mut r = items(q(conn, &[b"SCAN", &cursor, b"COUNT", b"1000"])).into_iter();
        cursor = value_bytes(&r.next().expect("SCAN cursor")).expect("SCAN cursor");
        keys.extend(
            items(r.next().expect("SCAN keys"))
                .iter()
                .filter_map(value_bytes),
        );
        if cursor == b"0" {
            break;
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

/// One key of a [`key_census`]: its `TYPE` and, for hashes, whether it has the
/// `_tally` field that marks counters, statistics objects and leaderboard metas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyKind {
    /// Output of `TYPE` (`none` if the key vanished between SCAN and TYPE).
    pub key_type: String,
    /// A hash with a `_tally` field (whatever its value).
    pub has_tally_field: bool,
}

/// Every key of database `db` with its [`KeyKind`] (SCAN, then one pipeline of
/// `TYPE` + `HEXISTS key _tally`). Leaves the connection on `db`.
pub fn key_census(conn: &mut redis::Connection, db: u32) -> BTreeMap<Vec<u8>, KeyKind> {
    let keys = scan_db_keys(conn, db);
    let mut cmds: Vec<Vec<&[u8]>> = Vec::new();
    for k in &keys {
        cmds.push(vec![b"TYPE", k]);
        cmds.push(vec![b"HEXISTS", k, b"_tally"]);
    }
    let replies = if cmds.is_empty() {
        Vec::new()
    } else {
        pipeline(conn, &cmds)
    };
    keys.into_iter()
        .zip(replies.chunks(2))
        .map(|(k, r)| {
            let key_type = value_text(&r[0]).unwrap_or_default();
            let has_tally_field = r[1] == Value::Int(1);
            (
                k,
                KeyKind {
                    key_type,
                    has_tally_field,
                },
            )
        })
        .collect()
}

/// A numeric field of `INFO <section>` read on `conn` (e.g. `tally_tracked_objects`).
pub fn info_field_i64(conn: &mut redis::Connection, section: &str, field: &str) -> Option<i64> {
    let text = value_text(&q(conn, &[b"INFO", section.as_bytes()]))?;
    parse_info(&text).get(field)?.trim().parse().ok()
}

// ============================================================ shared assertions

/// `usec_per_call` of a command in `INFO commandstats` (0.0 if never called).
pub fn usec_per_call(srv: &Server, command: &str) -> f64 {
    let stats = srv.info("commandstats");
    let Some(line) = stats.get(&format!("cmdstat_{command}")) else {
        return 0.0;
    };
    line.split(',')
        .find_map(|kv| kv.strip_prefix("usec_per_call="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no usec_per_call in {line}"))
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
