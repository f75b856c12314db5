//! Checks of the source itself, run by `cargo test`: the layering rules in `lib.rs` hold.
//! Raw module calls live only in the FFI layer, each `unsafe` block says why it is sound,
//! every module API function called is checked at load, and the pure modules import
//! nothing from Redis.

use std::fs;
use std::path::{Path, PathBuf};

/// Files allowed to call the module API directly.
const FFI_LAYER: [&str; 11] = [
    "host/server.rs",
    "host/events.rs",
    "host/cmdinfo.rs",
    "host/reply.rs",
    "host/replicate.rs",
    "host/store/mod.rs",
    "host/store/acl.rs",
    "host/store/field_ttl.rs",
    "host/store/scan.rs",
    "host/store/string.rs",
    "host/store/zset.rs",
];

/// Modules that must stay free of Redis imports (unit-tested with plain `cargo test`), by
/// path under `src/` (each family's pure model sits beside its commands: `<family>/model`).
const PURE: [&str; 12] = [
    "args",
    "shown",
    "error",
    "layout",
    "window",
    "counter/model",
    "rank/model",
    "stats/model",
    "moments",
    "sketch",
    "throttle/model",
    "collections",
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
            // Lint attributes (`forbid(unsafe_code)`, ...) name unsafe code without any.
            let attribute = code(line).trim_start().starts_with('#');
            assert!(
                attribute || !code(line).contains("unsafe"),
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
        .find(|(name, _)| name == "host/server.rs")
        .map(|(_, text)| text.as_str())
        .unwrap_or_default();
    let list_start = server
        .find("required_api! {")
        .expect("required_api! list in host/server.rs");
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
        let pure = PURE.iter().any(|module| {
            name == format!("{module}.rs") || name.starts_with(&format!("{module}/"))
        });
        if pure {
            checked += 1;
            assert!(
                !text.contains("redis_module") && !text.contains("crate::host"),
                "{name} is pure arithmetic and may not import Redis or the FFI layer"
            );
        }
    }
    assert!(checked >= 10, "only {checked} pure files found");
}

#[test]
fn pure_modules_forbid_unsafe_code_and_unsafe_blocks_are_documented() {
    let sources = sources();
    let lib = sources
        .iter()
        .find(|(name, _)| name == "lib.rs")
        .map(|(_, text)| text.as_str())
        .unwrap_or_default();
    assert!(
        lib.contains("#![warn(clippy::undocumented_unsafe_blocks)]"),
        "lib.rs turns on clippy::undocumented_unsafe_blocks"
    );
    for module in PURE {
        // Declared in lib.rs, or in its parent's mod.rs (`rank/model` in `rank/mod.rs`).
        let (parent, leaf) = module.rsplit_once('/').unwrap_or(("", module));
        let file = match parent {
            "" => "lib.rs".to_string(),
            parent => format!("{parent}/mod.rs"),
        };
        let text = (sources.iter())
            .find(|(name, _)| *name == file)
            .map(|(_, text)| text.as_str())
            .unwrap_or_default();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        let declared = format!("pub mod {leaf};");
        let at = lines
            .iter()
            .position(|l| *l == declared)
            .unwrap_or_else(|| panic!("{file} declares no `{declared}`"));
        assert!(
            at > 0 && lines.get(at - 1) == Some(&"#[forbid(unsafe_code)]"),
            "{file}: `{declared}` is pure: `#[forbid(unsafe_code)]` goes on the line above"
        );
    }
}

/// The parameters of each function declared in `text` that is neither `unsafe` nor
/// `extern "C"`, as (line, name, parameters).
fn safe_fn_params(text: &str) -> Vec<(usize, String, String)> {
    let mut found = Vec::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some(at) = rest.find("fn ") {
        let start = offset + at;
        let before = text.get(..start).unwrap_or_default();
        let head = before.rsplit('\n').next().unwrap_or_default();
        let word_start = before.ends_with(|c: char| c.is_whitespace()) || before.is_empty();
        let after = text.get(start + 3..).unwrap_or_default();
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let open = after.find('(');
        if word_start && !name.is_empty() && !head.contains("//") {
            if let Some(open) = open {
                let mut depth = 0;
                let mut close = None;
                for (i, c) in after.char_indices().skip(open) {
                    match c {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                close = Some(i);
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let params = close
                    .and_then(|close| after.get(open + 1..close))
                    .unwrap_or_default();
                if !head.contains("unsafe") && !head.contains("extern") {
                    found.push((before.lines().count() + 1, name, params.to_string()));
                }
            }
        }
        offset = start + 3;
        rest = text.get(offset..).unwrap_or_default();
    }
    found
}

#[test]
fn no_safe_function_takes_a_raw_pointer() {
    let sources = sources();
    let mut checked = 0;
    for (name, text) in &sources {
        if name == "layering.rs" {
            continue;
        }
        for (line, function, params) in safe_fn_params(text) {
            checked += 1;
            assert!(
                !params.contains("*mut") && !params.contains("*const"),
                "{name}:{line}: the safe fn {function} takes a raw pointer ({params}): take \
                 a safe wrapper, or make it an unsafe fn with a # Safety contract"
            );
        }
    }
    assert!(checked > 300, "only {checked} functions found");
}

/// The names (letters, digits, `_`) that follow each `prefix` in `text` from `start` to
/// the first `end` after it; `None` without `start`.
fn names_between(text: &str, start: &str, end: char, prefix: &str) -> Option<Vec<String>> {
    let part = text.split(start).nth(1)?.split(end).next()?;
    let names = part.split(prefix).skip(1).map(|after| {
        after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    });
    Some(names.collect())
}

#[test]
fn the_bench_floor_subscribes_to_the_classes_tally_subscribes_to() {
    let sources = sources();
    let events = sources
        .iter()
        .find(|(name, _)| name == "host/events.rs")
        .map(|(_, text)| text.as_str())
        .unwrap_or_default();
    let mut tally = names_between(
        events,
        "pub fn keyspace_classes() -> NotifyEvent {",
        '}',
        "NotifyEvent::",
    )
    .expect("keyspace_classes in host/events.rs");
    let floor = fs::read_to_string(src_dir().join("../scripts/floor_module.c"))
        .expect("scripts/floor_module.c");
    let mut empty_subscriber = names_between(&floor, "TALLY_CLASSES =", ';', "REDISMODULE_NOTIFY_")
        .expect("TALLY_CLASSES in scripts/floor_module.c");
    tally.sort();
    empty_subscriber.sort();
    assert!(tally.len() >= 5, "keyspace_classes: {tally:?}");
    assert_eq!(
        tally, empty_subscriber,
        "the host tax rows compare tally with a subscriber to the same classes"
    );
}

/// The entries of ARCHITECTURE.md's file map that describe `src/`: each entry's path (a
/// file `src/x.rs` or a folder `src/x/`) and its text (the rest of its first line and the
/// indented lines after it).
fn file_map() -> Vec<(String, String)> {
    let doc = fs::read_to_string(src_dir().join("../ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let block = doc
        .split("## Code layout")
        .nth(1)
        .and_then(|after| after.split("```").nth(1))
        .expect("a code block under ARCHITECTURE.md's \"## Code layout\"");
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in block.lines() {
        if line.starts_with(' ') {
            if let Some((_, text)) = entries.last_mut() {
                text.push(' ');
                text.push_str(line.trim());
            }
        } else if let Some(path) = line
            .split_whitespace()
            .next()
            .filter(|p| p.starts_with("src/"))
        {
            let text = line
                .get(path.len()..)
                .unwrap_or_default()
                .trim()
                .to_string();
            entries.push((path.to_string(), text));
        } else {
            // A heading line or another tree (module-tests/, scripts/): not checked.
            entries.push((String::new(), String::new()));
        }
    }
    entries.retain(|(path, _)| !path.is_empty());
    entries
}

/// The folder an entry's names are relative to: the folder itself, or a file's folder.
fn folder_of(path: &str) -> &str {
    if path.ends_with('/') {
        path
    } else {
        path.rfind('/').map_or("", |at| &path[..=at])
    }
}

/// The `*.rs` names in an entry's text (`mod.rs`, `tests/mod.rs`, `src/testutil.rs`).
fn named_files(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '/' || c == '.'))
        .map(|word| word.trim_end_matches('.'))
        .filter(|word| word.ends_with(".rs"))
        .collect()
}

#[test]
fn the_file_map_names_every_source_file_and_only_those() {
    let entries = file_map();
    assert!(entries.len() > 20, "file map entries: {entries:?}");
    let mut unnamed = Vec::new();
    for (name, _) in sources() {
        let path = format!("src/{name}");
        if entries.iter().any(|(entry, _)| *entry == path) {
            continue;
        }
        // The entry that covers the file: the deepest folder entry above it, or the entry
        // of the module file whose folder holds it (`src/args.rs` for `src/args/tests.rs`).
        let base = |entry: &str| -> String {
            match entry.strip_suffix(".rs") {
                Some(stem) => format!("{stem}/"),
                None => entry.to_string(),
            }
        };
        let covering = entries
            .iter()
            .filter(|(entry, _)| path.starts_with(&base(entry)))
            .max_by_key(|(entry, _)| base(entry).len());
        let named = covering.is_some_and(|(entry, text)| {
            let relative = path.strip_prefix(folder_of(entry)).unwrap_or(&path);
            named_files(text).contains(&relative)
        });
        if !named {
            unnamed.push(path);
        }
    }
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md's file map does not name: {unnamed:?}"
    );

    let root = src_dir().join("..");
    let mut missing = Vec::new();
    for (entry, text) in &entries {
        if !root.join(entry).exists() {
            missing.push(entry.clone());
        }
        for file in named_files(text) {
            let path = if file.starts_with("src/") {
                file.to_string()
            } else {
                format!("{}{file}", folder_of(entry))
            };
            if !root.join(&path).is_file() {
                missing.push(path);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's file map names what does not exist: {missing:?}"
    );
}
