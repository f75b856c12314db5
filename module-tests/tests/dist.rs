//! Release hygiene: the module's version is `Cargo.toml`'s (`MODULE LIST`, `INFO tally`),
//! and the release archive `make dist` packs (scripts/dist.sh) holds the module, LICENSE,
//! README.md, commands.json and docs/, and its module loads into a real server.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use module_tests::*;

/// The version as `MODULE LIST` shows it: major * 10000 + minor * 100 + patch.
fn version_number(version: &str) -> i64 {
    let parts: Vec<i64> = version
        .split('.')
        .map(|p| p.parse().expect("a numeric version part"))
        .collect();
    let [major, minor, patch] = parts[..] else {
        panic!("version {version} is not major.minor.patch");
    };
    major * 10_000 + minor * 100 + patch
}

/// `MODULE LIST`'s entry for tally: its `ver` and `path`.
fn listed_module(srv: &Server) -> (i64, String) {
    let list = srv.cmd_value(&["MODULE", "LIST"]);
    let Value::Array(modules) = &list else {
        panic!("MODULE LIST: {list:?}");
    };
    let tally = modules
        .iter()
        .map(map_pairs)
        .find(|m| {
            m.iter()
                .any(|(k, v)| k == "name" && value_text(v).as_deref() == Some("tally"))
        })
        .unwrap_or_else(|| panic!("tally not in MODULE LIST: {list:?}"));
    let field = |name: &str| {
        tally
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {name} in {tally:?}"))
    };
    let ver = match field("ver") {
        Value::Int(v) => v,
        other => panic!("ver: {other:?}"),
    };
    (ver, value_text(&field("path")).unwrap_or_default())
}

/// Checks that the server runs tally at Cargo.toml's version.
fn assert_runs_cargo_version(srv: &Server, kind: &ServerKind) -> String {
    let version = cargo_version();
    let (ver, path) = listed_module(srv);
    assert_eq!(
        ver,
        version_number(&version),
        "{}: MODULE LIST ver",
        kind.name
    );
    assert_eq!(
        srv.info("tally")
            .get("tally_version")
            .map(|v| v.trim().to_string()),
        Some(version),
        "{}: INFO tally",
        kind.name
    );
    path
}

per_server!(module_version_is_the_cargo_version);
/// `MODULE LIST` and `INFO tally` show the version of Cargo.toml (0.1.0: ver 100).
fn module_version_is_the_cargo_version(kind: &ServerKind) {
    let srv = Server::start(kind);
    assert_runs_cargo_version(&srv, kind);
    srv.assert_alive();
}

/// Runs scripts/dist.sh on the module under test into a fresh directory (beside the
/// servers' directories), once per test run, and unpacks the archive: (archive, unpacked
/// directory inside it).
fn unpacked_archive() -> &'static (PathBuf, PathBuf) {
    static UNPACKED: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    UNPACKED.get_or_init(|| {
        let work = repo_root().join("target/module-tests-tmp/dist/archive");
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).expect("work directory");
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/dist.sh"))
            .arg(module_path())
            .arg(work.join("dist"))
            .output()
            .expect("bash runs scripts/dist.sh");
        assert!(out.status.success(), "scripts/dist.sh failed: {out:?}");
        let archive = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let archive = if archive.is_absolute() {
            archive
        } else {
            repo_root().join(archive)
        };
        let unpacked = work.join("unpacked");
        std::fs::create_dir_all(&unpacked).expect("unpack directory");
        let tar = Command::new("tar")
            .arg("-xzf")
            .arg(&archive)
            .arg("-C")
            .arg(&unpacked)
            .status()
            .expect("tar runs");
        assert!(tar.success(), "tar -xzf {}", archive.display());
        let top = unpacked.join(
            archive
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".tar.gz"))
                .expect("a .tar.gz archive"),
        );
        (archive, top)
    })
}

/// The names in a directory, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn archive_holds_the_release_files() {
    let (archive, top) = unpacked_archive();
    let version = cargo_version();
    let arch = String::from_utf8_lossy(
        &Command::new("uname")
            .arg("-m")
            .output()
            .expect("uname")
            .stdout,
    )
    .trim()
    .to_string();
    assert_eq!(
        archive.file_name().and_then(|n| n.to_str()),
        Some(format!("tally-{version}-linux-{arch}.tar.gz").as_str())
    );
    let root = repo_root();
    let mut expected = vec!["LICENSE", "README.md", "commands.json", "libtally.so"];
    if root.join("docs").is_dir() {
        expected.push("docs");
        assert_eq!(names_in(&top.join("docs")), names_in(&root.join("docs")));
    }
    expected.sort();
    assert_eq!(names_in(top), expected, "archive {}", archive.display());
    for file in ["LICENSE", "README.md", "commands.json"] {
        assert_eq!(
            std::fs::read(top.join(file)).expect("file in the archive"),
            std::fs::read(root.join(file)).expect("file in the repository"),
            "{file}"
        );
    }
    let license = std::fs::read_to_string(top.join("LICENSE")).expect("LICENSE");
    assert!(license.starts_with("BSD 3-Clause License\n\nCopyright (c) 2026, the tally authors\n"));
}

per_server!(module_from_the_archive_loads);
/// The `.so` from the unpacked archive loads into a real server, at Cargo.toml's version,
/// and serves commands with their docs.
fn module_from_the_archive_loads(kind: &ServerKind) {
    let (_, top) = unpacked_archive();
    let module = top.join("libtally.so");
    let srv = Server::start_with(kind, ServerOptions::new().module(&module));
    let path = assert_runs_cargo_version(&srv, kind);
    assert_eq!(Path::new(&path), module, "{}: MODULE LIST path", kind.name);
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.INCR", "c"]),
        v_int(1),
        "{}",
        kind.name
    );
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.SUM", "c", "1m"]),
        v_int(1),
        "{}",
        kind.name
    );
    let docs = srv.cmd_value(&["COMMAND", "DOCS", "tscounter.incr"]);
    let docs = map_pairs(&docs);
    let summary = docs
        .first()
        .map(|(_, doc)| map_pairs(doc))
        .and_then(|doc| doc.into_iter().find(|(k, _)| k == "summary"))
        .and_then(|(_, v)| value_text(&v));
    assert_eq!(
        summary.as_deref(),
        Some("Add 1 to a counter at every resolution that keeps the time"),
        "{}",
        kind.name
    );
    srv.assert_alive();
}
