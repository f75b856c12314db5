//! ACL: key permissions are enforced for every key a tally command reads or writes,
//! derived keys included, on every server kind. One test function per family.
//!
//! * a user limited to key patterns cannot read or write other keys through any tally
//!   command: `NOPERM`, and nothing is written (the keyspace is compared before/after);
//! * a read-only user (`%R~*`: read-only key permission) cannot run any write command
//!   but can run every read;
//! * TSRANK derives keys from its main key (`key|meta`, `key|slot|<n>`): a user allowed
//!   the main key but not the derived keys gets `NOPERM` and nothing is written;
//! * STATS.ADD `REPORT rankkey` outside the user's patterns: `NOPERM`, nothing written;
//! * `write_and_read_categories_cover_tally_commands`: `-@write` / `+@read` users (ACL categories), on servers
//!   whose module API can declare categories (Redis >= 7.2, Valkey).

use module_tests::*;
use std::collections::{BTreeMap, BTreeSet};

/// The exact refusal a case expects.
#[derive(Clone, Copy)]
enum Refusal<'a> {
    /// The server refused a key the command declares (its text differs by server).
    Key,
    /// tally refused a key the command derives from its main key (TSRANK's `|meta` and
    /// `|slot|<n>` hashes): the refused key's name is in the text.
    Derived(&'a str),
    /// tally refused one of the slot hashes of board `.0` (`<board>|slot|<n>`, `n` from
    /// the clock).
    DerivedSlot(&'a str),
    /// The server refused the command itself (ACL categories), for this user.
    Command(&'a str),
}

impl Refusal<'_> {
    fn text(self, kind: &ServerKind, args: &[&str]) -> String {
        match self {
            Refusal::Key if !kind.is_valkey() && kind.version() < (7, 2, 0) => {
                "NOPERM this user has no permissions to access one of the keys used as arguments"
                    .to_string()
            }
            Refusal::Key => "NOPERM No permissions to access a key".to_string(),
            Refusal::Derived(key) => format!(
                "NOPERM this user has no permissions to access the key '{key}' of this leaderboard"
            ),
            Refusal::DerivedSlot(_) => unreachable!("matched in assert_refused"),
            Refusal::Command(user) => format!(
                "NOPERM User {user} has no permissions to run the '{}' command",
                args[0].to_lowercase()
            ),
        }
    }
}

/// `args` is refused with exactly the NOPERM reply of `why`.
#[track_caller]
fn assert_refused(srv: &Server, c: &mut redis::Connection, args: &[&str], why: Refusal) {
    let v = conn_value(c, args);
    if let Refusal::DerivedSlot(board) = why {
        let text = error_text(&v).unwrap_or_default();
        let head = format!("NOPERM this user has no permissions to access the key '{board}|slot|");
        let slot = text
            .strip_prefix(&head)
            .and_then(|t| t.strip_suffix("' of this leaderboard"));
        assert!(
            slot.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
            "{}: {args:?} should be refused on a slot hash of {board}, got {v:?}",
            srv.kind().name
        );
        return;
    }
    assert_eq!(
        error_text(&v),
        Some(why.text(srv.kind(), args)),
        "{}: {args:?} should be refused with NOPERM, got {v:?}",
        srv.kind().name
    );
}

/// `args` is refused because a key it declares is outside the user's permissions.
#[track_caller]
fn assert_noperm(srv: &Server, c: &mut redis::Connection, args: &[&str]) {
    assert_refused(srv, c, args, Refusal::Key);
}

fn assert_allowed(srv: &Server, c: &mut redis::Connection, args: &[&str]) {
    let v = conn_value(c, args);
    assert!(
        error_text(&v).is_none_or(|e| !e.starts_with("NOPERM")),
        "{}: {args:?} should be allowed, got {v:?}",
        srv.kind().name
    );
}

/// A family's command list: every command on a key, as (args, is_write).
type FamilyCmds = fn(&str) -> Vec<(Vec<String>, bool)>;

/// Every family's command list: together they hold a case for every command of the
/// module's table (`acl_cases_cover_every_command_and_every_key`).
const FAMILIES: [FamilyCmds; 4] = [counter_cmds, rank_cmds, stats_cmds, throttle_cmds];

/// A key inside every user's patterns (`~allowed:*`, `~*`, `%R~*`) that commands of
/// several keys name beside `$K`: a case per key position, so each declared key is
/// refused alone.
const ALSO: &str = "allowed:{9}";

/// The case's words with `$K` replaced by `k` and `$A` by [`ALSO`].
fn case(k: &str, a: &[&str]) -> Vec<String> {
    a.iter()
        .map(|s| s.replace("$K", k).replace("$A", ALSO))
        .collect()
}

/// Every command of a family, as (args, is_write), on key `k`.
fn counter_cmds(k: &str) -> Vec<(Vec<String>, bool)> {
    let v = |a: &[&str]| case(k, a);
    vec![
        (v(&["TSCOUNTER.CREATE", "$K"]), true),
        (v(&["TSCOUNTER.INCRBY", "$K", "5"]), true),
        (v(&["TSCOUNTER.INCR", "$K"]), true),
        (v(&["TSCOUNTER.SUM", "$K", "1m"]), false),
        (v(&["TSCOUNTER.RANGE", "$K", "1s"]), false),
        (v(&["TSCOUNTER.INFO", "$K"]), false),
        (v(&["TSCOUNTER.MSUM", "1", "$K", "1m", "1h"]), false),
        (v(&["TSCOUNTER.MSUM", "2", "$A", "$K", "1m"]), false),
        (v(&["TSCOUNTER.LIMIT", "$K", "1", "1m", "100"]), true),
        (
            v(&["TSCOUNTER.LIMIT", "$K", "1", "1m", "100", "DETAILS"]),
            true,
        ),
        (
            v(&[
                "TSCOUNTER.MLIMIT",
                "2",
                "$K",
                "$A",
                "1",
                "1",
                "1m",
                "100",
                "1",
                "1m",
                "100",
            ]),
            true,
        ),
        (
            v(&[
                "TSCOUNTER.MLIMIT",
                "2",
                "$A",
                "$K",
                "1",
                "1",
                "1m",
                "100",
                "1",
                "1h",
                "100",
            ]),
            true,
        ),
    ]
}

fn rank_cmds(k: &str) -> Vec<(Vec<String>, bool)> {
    let v = |a: &[&str]| case(k, a);
    vec![
        (
            v(&["TSRANK.CREATE", "$K", "WINDOW", "1h", "SLOT", "1m"]),
            true,
        ),
        (v(&["TSRANK.INCRBY", "$K", "3", "a", "1", "b"]), true),
        (v(&["TSRANK.TOP", "$K", "10"]), false),
        (
            v(&["TSRANK.TOP", "$K", "10", "WITHSCORES", "WINDOW", "1m"]),
            false,
        ),
        (v(&["TSRANK.SCORE", "$K", "a"]), false),
        (v(&["TSRANK.RANK", "$K", "a"]), false),
        (v(&["TSRANK.RANK", "$K", "a", "TIES"]), false),
        (v(&["TSRANK.MSCORE", "$K", "a", "b"]), false),
        (v(&["TSRANK.AROUND", "$K", "a", "2", "WITHSCORES"]), false),
        (v(&["TSRANK.INFO", "$K"]), false),
        (v(&["TSRANK.HISTORY", "$K", "a"]), false),
        (v(&["TSRANK.HISTORY", "$K", "a", "WINDOW", "1m"]), false),
        (v(&["TSRANK.REM", "$K", "b"]), true),
    ]
}

fn stats_cmds(k: &str) -> Vec<(Vec<String>, bool)> {
    let v = |a: &[&str]| case(k, a);
    vec![
        (
            v(&["STATS.CREATE", "$K", "PERIOD", "1m", "KEEP", "5"]),
            true,
        ),
        (v(&["STATS.ADD", "$K", "1.5", "2"]), true),
        (v(&["STATS.ADD", "$A", "3", "REPORT", "$K", "m"]), true),
        (v(&["STATS.GET", "$K"]), false),
        (v(&["STATS.QUANTILE", "$K", "0.5"]), false),
        (v(&["STATS.CDF", "$K", "2"]), false),
        (v(&["STATS.RANGE", "$K"]), false),
        (v(&["STATS.INFO", "$K"]), false),
        (v(&["STATS.MGET", "1", "$K"]), false),
        (v(&["STATS.MGET", "2", "$A", "$K"]), false),
        (v(&["STATS.MQUANTILE", "1", "$K", "0.5"]), false),
        (v(&["STATS.MQUANTILE", "2", "$A", "$K", "0.5"]), false),
    ]
}

fn throttle_cmds(k: &str) -> Vec<(Vec<String>, bool)> {
    let v = |a: &[&str]| case(k, a);
    vec![
        (v(&["TSTHROTTLE.ALLOW", "$K", "5", "10", "1m"]), true),
        (
            v(&["TSTHROTTLE.ALLOW", "$K", "5", "10", "1m", "QUANTITY", "0"]),
            true,
        ),
    ]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Runs every command of `cmds(key)` as a user limited to `allowed:*`, on a missing key
/// and on an existing object outside the patterns (refused, nothing written), then on
/// an allowed key (accepted).
fn key_patterns(kind: &ServerKind, cmds: FamilyCmds, seed: &[&str]) {
    let srv = Server::start(kind);
    // An existing object outside the user's patterns, created by the default user.
    let mut seed_cmd: Vec<&str> = seed.to_vec();
    seed_cmd[1] = "other:{1}";
    assert!(
        error_text(&srv.cmd_value(&seed_cmd)).is_none(),
        "{seed_cmd:?}"
    );
    let mut c = conn_as_user(&srv, "u", &["~allowed:*"]);
    let before = srv.dump_keyspace();
    for key in ["other:{1}", "other:{2}"] {
        for (args, _) in cmds(key) {
            assert_noperm(&srv, &mut c, &strs(&args));
        }
    }
    assert_eq!(
        srv.dump_keyspace(),
        before,
        "{}: a refused command wrote",
        kind.name
    );
    for (args, _) in cmds("allowed:{1}") {
        if args[0].ends_with(".CREATE") {
            continue; // tested on the missing key below
        }
        assert_allowed(&srv, &mut c, &strs(&args));
    }
    for (args, _) in cmds("allowed:{2}") {
        assert_allowed(&srv, &mut c, &strs(&args));
    }
    srv.assert_alive();
}

/// A read-only user (`%R~*`) runs every read but no write; nothing is written.
fn read_only(kind: &ServerKind, cmds: FamilyCmds, seed: &[&str]) {
    let srv = Server::start(kind);
    let mut seed_cmd: Vec<&str> = seed.to_vec();
    seed_cmd[1] = "obj:{1}";
    assert!(
        error_text(&srv.cmd_value(&seed_cmd)).is_none(),
        "{seed_cmd:?}"
    );
    let mut c = conn_as_user(&srv, "ro", &["%R~*"]);
    let before = srv.dump_keyspace();
    for key in ["obj:{1}", "new:{1}"] {
        for (args, write) in cmds(key) {
            if write {
                assert_noperm(&srv, &mut c, &strs(&args));
            } else {
                assert_allowed(&srv, &mut c, &strs(&args));
            }
        }
    }
    assert_eq!(
        srv.dump_keyspace(),
        before,
        "{}: a refused command wrote",
        kind.name
    );
    srv.assert_alive();
}

// ============================================================ completeness

per_server!(acl_cases_cover_every_command_and_every_key);
/// The cases above cover the module's table as the server answers it: every command has
/// a case, and every key a command declares is the refused one (`$K`) in some case of it
/// (`COMMAND GETKEYS` of each case; a command whose keys move, `movablekeys`, has a case
/// with `$K` after another key). TSRANK's derived keys: `rank_derived_keys_...` runs
/// every case of `rank_cmds`.
fn acl_cases_cover_every_command_and_every_key(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    let table = tally_commands(&srv);
    let cases: Vec<Vec<String>> = FAMILIES
        .iter()
        .flat_map(|family| family("K"))
        .map(|(args, _)| args)
        .collect();
    assert_cases_cover(
        &srv,
        "acl.rs (counter_cmds, rank_cmds, stats_cmds, throttle_cmds)",
        &tally_command_names(&srv),
        cases.iter().map(|args| &args[0]),
    );
    // Per command: the most keys a case declares, and the positions `$K` held.
    let mut positions: BTreeMap<String, (usize, BTreeSet<usize>)> = BTreeMap::new();
    for args in &cases {
        let mut getkeys = vec!["COMMAND".to_string(), "GETKEYS".to_string()];
        getkeys.extend(args.iter().cloned());
        let keys = srv.cmd_value(&getkeys);
        let Value::Array(keys) = keys else {
            panic!("{k}: COMMAND GETKEYS {args:?} gave {keys:?}")
        };
        let seen = positions.entry(args[0].clone()).or_default();
        seen.0 = seen.0.max(keys.len());
        for (i, key) in keys.iter().enumerate() {
            if value_text(key).as_deref() == Some("K") {
                seen.1.insert(i);
            }
        }
    }
    let mut uncovered = Vec::new();
    for command in &table {
        let (most, refused) = positions.get(&command.name).cloned().unwrap_or_default();
        let most = most.max(if command.movable_keys { 2 } else { 1 });
        for i in (0..most).filter(|i| !refused.contains(i)) {
            uncovered.push(format!("{} key #{}", command.name, i + 1));
        }
    }
    assert!(
        uncovered.is_empty(),
        "{k}: no acl.rs case refuses {uncovered:?} (add a case with $K there)"
    );
}

// ============================================================== TSCOUNTER

per_server!(counter_commands_obey_key_patterns_and_read_only_users);
fn counter_commands_obey_key_patterns_and_read_only_users(kind: &ServerKind) {
    let seed = ["TSCOUNTER.INCRBY", "", "7"];
    key_patterns(kind, counter_cmds, &seed);
    read_only(kind, counter_cmds, &seed);
}

// ================================================================= TSRANK

per_server!(rank_commands_obey_key_patterns_and_read_only_users);
fn rank_commands_obey_key_patterns_and_read_only_users(kind: &ServerKind) {
    let seed = ["TSRANK.INCRBY", "", "4", "a", "2", "b"];
    key_patterns(kind, rank_cmds, &seed);
    read_only(kind, rank_cmds, &seed);
}

per_server!(rank_derived_keys_need_their_own_key_permission);
/// TSRANK keeps its settings in `key|meta` and per-slot counts in `key|slot|<n>`: a user
/// allowed only the main key (or the main key and the meta hash) must not reach them.
fn rank_derived_keys_need_their_own_key_permission(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    // Existing leaderboards, created by the default user.
    for key in ["lb{y}", "lb{w}"] {
        assert_eq!(
            srv.cmd_value(&["TSRANK.INCRBY", key, "4", "a", "2", "b"]),
            v_arr(vec![v_int(4), v_int(2)]),
            "{k}"
        );
    }
    let before = srv.dump_keyspace();
    assert!(
        before.contains_key("db0:lb{y}|meta"),
        "{k}: layout changed? {before:?}"
    );

    // Only the main keys (exact patterns: braces are not special in ACL globs).
    let mut c = conn_as_user(&srv, "main", &["~lb{x}", "~lb{y}"]);
    for key in ["lb{x}", "lb{y}"] {
        let meta = format!("{key}|meta");
        for (args, _) in rank_cmds(key) {
            assert_refused(&srv, &mut c, &strs(&args), Refusal::Derived(&meta));
        }
    }
    // Main key and meta hash, but no slot hash: writes touch a slot hash.
    let mut c = conn_as_user(
        &srv,
        "noslots",
        &["~lb{x}", "~lb{x}|meta", "~lb{y}", "~lb{y}|meta"],
    );
    for key in ["lb{x}", "lb{y}"] {
        assert_refused(
            &srv,
            &mut c,
            &["TSRANK.INCRBY", key, "1", "a"],
            Refusal::DerivedSlot(key),
        );
    }
    assert_refused(
        &srv,
        &mut c,
        &["TSRANK.REM", "lb{y}", "b"],
        Refusal::DerivedSlot("lb{y}"),
    );
    // Read-only derived keys: reads work, writes are refused.
    let mut c = conn_as_user(&srv, "rderived", &["~lb{w}", "%R~lb{w}|*"]);
    for args in [
        ["TSRANK.INCRBY", "lb{w}", "1", "a"],
        ["TSRANK.REM", "lb{w}", "b", "a"],
    ] {
        assert_refused(&srv, &mut c, &args, Refusal::Derived("lb{w}|meta"));
    }
    assert_eq!(
        conn_value(&mut c, &["TSRANK.SCORE", "lb{w}", "a"]),
        v_int(4),
        "{k}"
    );
    assert_eq!(
        conn_value(&mut c, &["TSRANK.TOP", "lb{w}", "5"]),
        v_bulks(&["a", "b"]),
        "{k}"
    );
    assert_eq!(srv.dump_keyspace(), before, "{k}: a refused command wrote");

    // Every key of the leaderboard: everything works.
    let mut c = conn_as_user(&srv, "all", &["~lb{y}*"]);
    assert_eq!(
        conn_value(&mut c, &["TSRANK.INCRBY", "lb{y}", "1", "b"]),
        v_int(3),
        "{k}"
    );
    assert_eq!(
        conn_value(&mut c, &["TSRANK.TOP", "lb{y}", "5"]),
        v_bulks(&["a", "b"]),
        "{k}"
    );
    srv.assert_alive();
}

// ================================================================== STATS

per_server!(stats_commands_obey_key_patterns_and_read_only_users);
fn stats_commands_obey_key_patterns_and_read_only_users(kind: &ServerKind) {
    let seed = ["STATS.ADD", "", "1", "2", "3"];
    key_patterns(kind, stats_cmds, &seed);
    read_only(kind, stats_cmds, &seed);
}

per_server!(stats_report_key_needs_key_permission);
/// `REPORT rankkey`: the ranking is a key of the command like any other.
fn stats_report_key_needs_key_permission(kind: &ServerKind) {
    let srv = Server::start(kind);
    let k = kind.name.as_str();
    assert_eq!(srv.cmd_value(&["ZADD", "other:rank", "1", "x"]), v_int(1));
    let mut c = conn_as_user(&srv, "u", &["~s:*"]);
    let before = srv.dump_keyspace();
    assert_noperm(
        &srv,
        &mut c,
        &["STATS.ADD", "s:1", "5", "REPORT", "other:rank", "m"],
    );
    assert_noperm(
        &srv,
        &mut c,
        &[
            "STATS.ADD",
            "s:1",
            "5",
            "AT",
            "1000",
            "REPORT",
            "other:new",
            "m",
            "KEEP",
            "3",
        ],
    );
    assert_eq!(srv.dump_keyspace(), before, "{k}: a refused command wrote");
    assert_eq!(
        conn_value(&mut c, &["STATS.ADD", "s:1", "5", "REPORT", "s:rank", "m"]),
        v_int(1),
        "{k}"
    );
    assert_eq!(
        srv.cmd_value(&["ZSCORE", "s:rank", "m"]),
        v_bulk("5"),
        "{k}"
    );
    // A ranking the user may only read is refused too (REPORT writes it).
    let mut c = conn_as_user(&srv, "r", &["~s:*", "%R~ro:*"]);
    assert_eq!(srv.cmd_value(&["ZADD", "ro:rank", "1", "x"]), v_int(1));
    let before = srv.dump_keyspace();
    assert_noperm(
        &srv,
        &mut c,
        &["STATS.ADD", "s:2", "5", "REPORT", "ro:rank", "m"],
    );
    assert_eq!(srv.dump_keyspace(), before, "{k}: a refused command wrote");
    srv.assert_alive();
}

// ============================================================= TSTHROTTLE

per_server!(throttle_commands_obey_key_patterns_and_read_only_users);
fn throttle_commands_obey_key_patterns_and_read_only_users(kind: &ServerKind) {
    let seed = ["TSTHROTTLE.ALLOW", "", "5", "10", "1m"];
    key_patterns(kind, throttle_cmds, &seed);
    read_only(kind, throttle_cmds, &seed);
}

// ============================================================= categories

per_server!(write_and_read_categories_cover_tally_commands);
/// A user without `@write` must not run tally writes; a `+@read` user runs tally reads.
/// Needs `RedisModule_SetCommandACLCategories` (Redis >= 7.2, Valkey); on Redis 7.0 the
/// module API cannot put module commands in any category, so `-@write` does not stop
/// them there (use key permissions such as `%R~*`, tested above).
fn write_and_read_categories_cover_tally_commands(kind: &ServerKind) {
    if !kind.is_valkey() && kind.version() < (7, 2, 0) {
        eprintln!(
            "{}: no module ACL categories before Redis 7.2, skipped",
            kind.name
        );
        return;
    }
    let srv = Server::start(kind);
    let before = srv.dump_keyspace();
    let mut nowrite = conn_as_user(&srv, "nowrite", &["~*", "+@all", "-@write"]);
    let mut reader = conn_as_user(&srv, "reader", &["~*", "+@read"]);
    for (args, write) in counter_cmds("c")
        .into_iter()
        .chain(rank_cmds("lb{r}"))
        .chain(stats_cmds("s"))
        .chain(throttle_cmds("t"))
    {
        if write {
            let args = strs(&args);
            assert_refused(&srv, &mut nowrite, &args, Refusal::Command("nowrite"));
            assert_refused(&srv, &mut reader, &args, Refusal::Command("reader"));
        } else {
            assert_allowed(&srv, &mut nowrite, &strs(&args));
            assert_allowed(&srv, &mut reader, &strs(&args));
        }
    }
    assert_eq!(
        srv.dump_keyspace(),
        before,
        "{}: a refused command wrote",
        kind.name
    );
}
