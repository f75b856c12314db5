//! Checks of the source itself, run by `cargo test`: the layering rules in `lib.rs` hold.
//! Raw module calls live only in the FFI layer, each `unsafe` block says why it is sound,
//! every module API function called is checked at load, and the pure modules import
//! nothing from Redis.

use std::fs;
use std::path::{Path, PathBuf};

/// Files allowed to call the module API directly.
const FFI_LAYER: [&str; 8] = [
    "server.rs",
    "cmdinfo.rs",
    "reply.rs",
    "replicate.rs",
    "store/mod.rs",
    "store/acl.rs",
    "store/scan.rs",
    "store/zset.rs",
];

/// Modules that must stay free of Redis imports (unit-tested with plain `cargo test`).
const PURE: [&str; 14] = [
    "args",
    "error",
    "layout",
    "window",
    "counter",
    "rank",
    "stats",
    "moments",
    "sketch",
    "limit",
    "due_queue",
    "memo_map",
    "sharded_map",
    "inline_vec",
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `src/`, as (path relative to `src/`, text).
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, base, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = path.strip_prefix(base).unwrap_or(&path);
                let text = fs::read_to_string(&path).unwrap_or_default();
                out.push((name.to_string_lossy().replace('\\', "/"), text));
            }
        }
    }
    let mut out = Vec::new();
    walk(&src_dir(), &src_dir(), &mut out);
    assert!(out.len() > 20, "sources not found under {:?}", src_dir());
    out
}

/// The code part of a line (before a `//` comment).
fn code(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

#[test]
fn unsafe_code_lives_only_in_the_ffi_layer() {
    for (name, text) in sources() {
        if FFI_LAYER.contains(&name.as_str()) || name == "layering.rs" {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            assert!(
                !code(line).contains("unsafe"),
                "{name}:{}: unsafe outside the FFI layer: {line}",
                n + 1
            );
        }
    }
}

#[test]
fn every_unsafe_block_says_why_it_is_sound() {
    for (name, text) in sources() {
        if name == "layering.rs" {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let c = code(line);
            if !(c.contains("unsafe {") || c.contains("unsafe fn")) {
                continue;
            }
            // The reason is in the comment lines just above (or the `# Safety` section of
            // an unsafe fn's doc), within the statement that holds the block.
            let from = n.saturating_sub(8);
            let above = lines.get(from..=n).unwrap_or(&[]);
            assert!(
                above
                    .iter()
                    .any(|l| l.contains("SAFETY") || l.contains("# Safety")),
                "{name}:{}: unsafe without a SAFETY comment: {line}",
                n + 1
            );
        }
    }
}

#[test]
fn every_module_api_function_called_is_checked_at_load() {
    let sources = sources();
    let server = sources
        .iter()
        .find(|(name, _)| name == "server.rs")
        .map(|(_, text)| text.as_str())
        .unwrap_or_default();
    let list_start = server
        .find("required_api! {")
        .expect("required_api! list in server.rs");
    let list = server.get(list_start..).unwrap_or_default();
    let list = list.get(..list.find('}').unwrap_or(0)).unwrap_or_default();
    let mut calls = 0;
    for (name, text) in &sources {
        for part in text.split("api!(").skip(1) {
            let symbol: String = part
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if symbol.starts_with("RedisModule_") {
                calls += 1;
                assert!(
                    list.contains(&format!("{symbol},")),
                    "{name}: {symbol} is called through api! but not checked at load"
                );
            }
        }
    }
    assert!(calls > 40, "found only {calls} api! calls");
}

#[test]
fn pure_modules_import_nothing_from_redis() {
    let mut checked = 0;
    for (name, text) in sources() {
        let module = name.split(['/', '.']).next().unwrap_or_default();
        if PURE.contains(&module) {
            checked += 1;
            assert!(
                !text.contains("redis_module") && !text.contains("crate::store"),
                "{name} is pure arithmetic and may not import Redis or the store"
            );
        }
    }
    assert!(checked >= 10, "only {checked} pure files found");
}
