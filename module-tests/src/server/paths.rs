//! Where things are: the repository root, the module to load, `redis-cli`, and how a
//! path given in an environment variable is resolved.

use std::path::{Path, PathBuf};

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
pub(super) fn resolve_user_path(p: &str) -> PathBuf {
    let path = Path::new(p);
    if path.is_absolute() {
        path.to_path_buf()
    } else if !p.contains('/') {
        find_on_path(p).unwrap_or_else(|| path.to_path_buf())
    } else {
        repo_root().join(path)
    }
}

pub(super) fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The package version in the repository's `Cargo.toml` (the module's version).
pub fn cargo_version() -> String {
    let manifest = std::fs::read_to_string(repo_root().join("Cargo.toml")).expect("Cargo.toml");
    manifest
        .lines()
        .skip_while(|line| line.trim() != "[package]")
        .find_map(|line| {
            let value = line
                .trim()
                .strip_prefix("version")?
                .trim()
                .strip_prefix('=')?;
            Some(value.trim().trim_matches('"').to_string())
        })
        .expect("a version in Cargo.toml's [package]")
}
