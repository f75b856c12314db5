//! One test case per server kind: [`per_server!`](crate::per_server) turns a function
//! `fn name(kind: &ServerKind)` into a module `name` with one `#[test]` per known kind
//! (`name::redis`, `name::redis8`, `name::valkey`), so a failure on one server does not
//! hide the result on another, and `cargo test name::valkey` runs just one.

use std::sync::OnceLock;

use crate::server::{server_kinds, ServerKind};

/// The kinds [`per_server!`](crate::per_server) makes a test case for, in the Makefile's
/// order. A `TALLY_SERVERS` entry with another name is not run by those tests (a warning
/// says so).
pub const KNOWN_SERVER_KINDS: [&str; 3] = ["redis", "redis8", "valkey"];

/// True when the environment variable `CI` is `true` (any case): a continuous-integration
/// run, where a server kind that cannot run is a failure, not a skip.
pub fn is_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Runs `body` with the kind called `name` in [`server_kinds`]. When there is no such
/// kind (neither `TALLY_SERVERS` nor the default set has it), or its binary is not
/// there, it prints `skipped: ...` and returns, except under CI ([`is_ci`]), where it
/// fails the test: CI must not pass by testing less. The test cases
/// [`per_server!`](crate::per_server) writes call this.
pub fn run_for_server_kind(name: &str, body: impl FnOnce(&ServerKind)) {
    let kinds = server_kinds();
    static WARNED: OnceLock<()> = OnceLock::new();
    WARNED.get_or_init(|| {
        for kind in kinds
            .iter()
            .filter(|k| !KNOWN_SERVER_KINDS.contains(&k.name.as_str()))
        {
            eprintln!(
                "module-tests: WARNING server kind {:?} is not one of {KNOWN_SERVER_KINDS:?}: per-server tests do not run it",
                kind.name
            );
        }
    });
    let missing = match kinds.iter().find(|k| k.name == name) {
        Some(kind) if kind.bin.is_file() => return body(kind),
        Some(kind) => format!("{name} server binary {} not found", kind.bin.display()),
        None => format!("no {name} server configured"),
    };
    assert!(
        !is_ci(),
        "CI=true and {missing}: every server kind must run under CI (set TALLY_SERVERS or run scripts/deps.sh)"
    );
    println!("skipped: {missing}");
}

/// Makes one `#[test]` per known server kind ([`KNOWN_SERVER_KINDS`]) from a function
/// taking `&ServerKind`. Two forms:
///
/// ```ignore
/// use module_tests::*;
///
/// // A function of the test file (formatted and linted like any other code):
/// per_server!(incr_counts_every_resolution);
/// /// What the test checks.
/// fn incr_counts_every_resolution(kind: &ServerKind) {
///     let srv = Server::start(kind);
///     // ...
/// }
///
/// // Or the body inside the macro:
/// per_server! {
///     fn ping_answers(kind: &ServerKind) {
///         assert_eq!(Server::start(kind).cmd_value(&["PING"]), v_simple("PONG"));
///     }
/// }
/// ```
///
/// Either way a module of the same name holds the cases `redis`, `redis8` and `valkey`,
/// so `cargo test` lists `incr_counts_every_resolution::valkey`. Each case looks its kind
/// up in [`server_kinds`] and runs the function, or prints `skipped: ...` and passes
/// when there is no such server or its binary is missing; under CI (`CI=true`) that
/// fails the case instead ([`run_for_server_kind`]).
///
/// `per_server!(one_kind_at_a_time: name);` does the same, but the cases of `name` never
/// run at the same time as each other (as when one test looped over the kinds): for
/// tests that load the machine and measure latency, where two kinds side by side on
/// a small machine would measure each other.
#[macro_export]
macro_rules! per_server {
    (one_kind_at_a_time: $($name:ident),+ $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($name), "` on each known server kind, one at a time.")]
            mod $name {
                static ONE_KIND_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

                fn run(kind: &str) {
                    let _turn = ONE_KIND_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
                    $crate::run_for_server_kind(kind, super::$name);
                }

                #[test]
                fn redis() {
                    run("redis");
                }

                #[test]
                fn redis8() {
                    run("redis8");
                }

                #[test]
                fn valkey() {
                    run("valkey");
                }
            }
        )+
    };
    ($($name:ident),+ $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($name), "` on each known server kind.")]
            mod $name {
                #[test]
                fn redis() {
                    $crate::run_for_server_kind("redis", super::$name);
                }

                #[test]
                fn redis8() {
                    $crate::run_for_server_kind("redis8", super::$name);
                }

                #[test]
                fn valkey() {
                    $crate::run_for_server_kind("valkey", super::$name);
                }
            }
        )+
    };
    ($(
        $(#[$attr:meta])*
        fn $name:ident($kind:ident: &ServerKind) $body:block
    )+) => {
        $(
            $(#[$attr])*
            fn $name($kind: &$crate::ServerKind) $body

            $crate::per_server!($name);
        )+
    };
}
