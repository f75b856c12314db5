//! Starting and talking to one server process: [`ServerKind`] / [`server_kinds`] (which
//! binaries to test), [`ServerOptions`], [`Server`] (process, directory, connections,
//! restarts) and the port / directory allocation behind them.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use redis::ConnectionLike as _;
use redis::Value;

use crate::values::{error_text, server_error_text, v_ok};

/// How long [`Server::start`] waits for the first `PING` to succeed.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

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

/// The configured server kinds; each [`per_server!`](crate::per_server) case picks its
/// own from this list.
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
pub(crate) fn alloc_port() -> u16 {
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
    pub(crate) port: u16,
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

    pub(crate) fn url(&self, resp3: bool) -> String {
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

pub(crate) fn tail_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
