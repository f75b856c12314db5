//! A newcomer's first steps that are not examples of commands: `make` stops at once,
//! saying what to do, when Rust is missing or older than Cargo.toml's `rust-version`
//! (`scripts/check-rust.sh`, run by `scripts/deps.sh` before anything else), and the
//! README names that version.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use module_tests::repo_root;

/// Cargo.toml's `rust-version`.
fn required_rust() -> String {
    let cargo = fs::read_to_string(repo_root().join("Cargo.toml")).expect("Cargo.toml");
    cargo
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("Cargo.toml names a rust-version")
        .to_string()
}

/// `scripts/check-rust.sh` with `RUSTC` set: its exit status and what it printed.
fn check_rust(rustc: &Path) -> (bool, String) {
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/check-rust.sh"))
        .env("RUSTC", rustc)
        .output()
        .expect("bash runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fake `rustc` in `dir` that reports `version`.
fn fake_rustc(dir: &Path, version: &str) -> std::path::PathBuf {
    let path = dir.join(format!("rustc-{version}"));
    fs::write(
        &path,
        format!("#!/bin/sh\necho 'rustc {version} (0000000 2025-01-01)'\n"),
    )
    .expect("write");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

#[test]
fn the_rust_check_stops_early_and_says_what_to_do() {
    let need = required_rust();
    let dir = std::env::temp_dir().join(format!("tally-first-steps-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("temp dir");

    let (ok, said) = check_rust(&dir.join("no-such-rustc"));
    assert!(!ok, "a missing rustc passes the check");
    assert!(
        said.contains(&format!("tally needs Rust {need} or later")) && said.contains("rustup"),
        "missing rustc: {said}"
    );

    let (ok, said) = check_rust(&fake_rustc(&dir, "1.70.0"));
    assert!(!ok, "rustc 1.70.0 passes the check");
    assert!(
        said.contains(&format!("tally needs Rust {need} or later")) && said.contains("1.70.0"),
        "old rustc: {said}"
    );

    let (ok, said) = check_rust(&fake_rustc(&dir, &format!("{need}.0")));
    assert!(ok, "rustc {need}.0 fails the check: {said}");
    let (ok, said) = check_rust(&fake_rustc(&dir, "1.100.0"));
    assert!(ok, "rustc 1.100.0 fails the check: {said}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn deps_checks_rust_first_and_the_readme_names_the_version() {
    let deps = fs::read_to_string(repo_root().join("scripts/deps.sh")).expect("deps.sh");
    let check = deps
        .find("bash scripts/check-rust.sh")
        .expect("deps.sh runs scripts/check-rust.sh");
    let first_install = deps.find("apt-get").expect("deps.sh installs with apt-get");
    assert!(
        check < first_install,
        "the Rust check comes before any install"
    );
    let readme = fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    assert!(
        readme.contains(&format!("You need Rust {} or later", required_rust())),
        "README.md names the Rust version Cargo.toml requires"
    );
}
