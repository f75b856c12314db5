//! Under CI (`CI=true`) a server kind that cannot run fails its per-server test cases
//! instead of skipping them; outside CI it is skipped with a message. Checked by running
//! this test binary's own `probe` cases in a child process with a chosen environment.

use std::process::{Command, Output};

use module_tests::*;

per_server!(probe);
/// Does nothing: only whether `per_server!` runs, skips or fails it matters here.
fn probe(_kind: &ServerKind) {}

/// Runs `probe::valkey` alone in a child test process with `TALLY_SERVERS` and `CI`.
fn run_probe(servers: &str, ci: Option<&str>) -> Output {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args([
        "probe::valkey",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("TALLY_SERVERS", servers)
    .env_remove("CI");
    if let Some(ci) = ci {
        cmd.env("CI", ci);
    }
    cmd.output().expect("the test binary runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_missing_server_kind_fails_under_ci_and_is_skipped_otherwise() {
    let missing_binary = "redis=/usr/bin/redis-server,valkey=/nonexistent/valkey-server";
    let unconfigured = "redis=/usr/bin/redis-server";
    for servers in [missing_binary, unconfigured] {
        for ci in ["true", "TRUE"] {
            let out = run_probe(servers, Some(ci));
            assert!(!out.status.success(), "CI={ci} {servers}: {}", text(&out));
            assert!(
                text(&out).contains("every server kind must run under CI"),
                "{}",
                text(&out)
            );
        }
        for ci in [None, Some("false"), Some("")] {
            let out = run_probe(servers, ci);
            assert!(out.status.success(), "CI={ci:?} {servers}: {}", text(&out));
            assert!(text(&out).contains("skipped: "), "{}", text(&out));
            assert!(text(&out).contains("1 passed"), "{}", text(&out));
        }
    }
    // A configured binary that exists runs under CI (this binary stands in for a server:
    // `probe` never starts it).
    let exe = std::env::current_exe().expect("the test binary's path");
    let present = format!("valkey={}", exe.display());
    let out = run_probe(&present, Some("true"));
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("skipped"), "{}", text(&out));
    assert!(text(&out).contains("1 passed"), "{}", text(&out));
}
