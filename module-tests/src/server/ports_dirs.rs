//! Port and directory allocation for servers, the config-file quoting, and the warning
//! about a module older than `src/`.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use super::kinds::ServerKind;
use super::lock::lock;
use super::paths::repo_root;

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

pub(super) fn sanitize(s: &str) -> String {
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
pub(super) fn alloc_dir(kind: &ServerKind, tag: Option<&str>) -> PathBuf {
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

pub(super) fn quote_conf(s: &str) -> String {
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

pub(super) fn conf_value(v: &str) -> String {
    if v.is_empty() || v.contains(['"', '\'', '\\', '\n']) {
        quote_conf(v)
    } else {
        v.to_string()
    }
}

pub(super) fn warn_if_module_stale(module: &Path) {
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
