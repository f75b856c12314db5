//! The module's command table as a test sees it: what the running server answers, so no
//! test repeats the list. `COMMAND LIST FILTERBY MODULE tally` names the commands (Redis
//! 7.0, 8.2 and Valkey 9 answer it alike, in no fixed order) and `COMMAND INFO` gives
//! each one's flags. A cross-cutting test keeps a table of per-command cases and calls
//! [`assert_cases_cover`], which fails naming every command without a case.

use std::collections::BTreeSet;

use redis::Value;

use crate::server::Server;
use crate::values::value_text;

/// One command of the module's table, as `COMMAND INFO` describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TallyCommand {
    /// The name in upper case, as the tests spell it (`TSCOUNTER.INCRBY`).
    pub name: String,
    /// `COMMAND INFO` flags it `write`.
    pub write: bool,
    /// `COMMAND INFO` flags it `movablekeys`: where its keys are (and how many there
    /// are) depends on its arguments (`numkeys key [key ...]`, `REPORT rankkey`), so it
    /// may name more than one key.
    pub movable_keys: bool,
}

/// Every command the module registered on `srv`, sorted by name (a seeded fuzzer picks
/// from it in the same order on every server).
pub fn tally_commands(srv: &Server) -> Vec<TallyCommand> {
    let k = &srv.kind().name;
    let listed = srv.cmd_value(&["COMMAND", "LIST", "FILTERBY", "MODULE", "tally"]);
    let Value::Array(items) = listed else {
        panic!("{k}: COMMAND LIST FILTERBY MODULE tally gave {listed:?}")
    };
    let mut names: Vec<String> = items
        .iter()
        .map(|v| value_text(v).unwrap_or_else(|| panic!("{k}: command name {v:?}")))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "{k}: the module registered no command");
    let mut args = vec!["COMMAND".to_string(), "INFO".to_string()];
    args.extend(names.iter().cloned());
    let info = srv.cmd_value(&args);
    let Value::Array(entries) = info else {
        panic!("{k}: COMMAND INFO gave {info:?}")
    };
    assert_eq!(entries.len(), names.len(), "{k}: COMMAND INFO {names:?}");
    names
        .iter()
        .zip(&entries)
        .map(|(name, entry)| {
            let Value::Array(fields) = entry else {
                panic!("{k}: COMMAND INFO {name} gave {entry:?}")
            };
            assert_eq!(
                fields.first().and_then(value_text).as_deref(),
                Some(name.as_str()),
                "{k}: COMMAND INFO answers in the order asked"
            );
            let flags: Vec<String> = match fields.get(2) {
                Some(Value::Array(f) | Value::Set(f)) => f.iter().filter_map(value_text).collect(),
                other => panic!("{k}: COMMAND INFO {name} flags {other:?}"),
            };
            TallyCommand {
                name: name.to_uppercase(),
                write: flags.iter().any(|f| f == "write"),
                movable_keys: flags.iter().any(|f| f == "movablekeys"),
            }
        })
        .collect()
}

/// The names of [`tally_commands`], upper case, sorted.
pub fn tally_command_names(srv: &Server) -> Vec<String> {
    tally_commands(srv).into_iter().map(|c| c.name).collect()
}

/// The names of the commands [`tally_commands`] flags `write`, upper case, sorted.
pub fn tally_write_commands(srv: &Server) -> Vec<String> {
    tally_commands(srv)
        .into_iter()
        .filter(|c| c.write)
        .map(|c| c.name)
        .collect()
}

/// Fails unless `covered` (the command names a test has cases for, any case) holds every
/// name of `wanted` (from [`tally_commands`]), naming the missing ones, and names no
/// command the server does not have (a case for a command that was renamed or removed).
#[track_caller]
pub fn assert_cases_cover<S: AsRef<str>>(
    srv: &Server,
    what: &str,
    wanted: &[String],
    covered: impl IntoIterator<Item = S>,
) {
    let k = &srv.kind().name;
    let covered: BTreeSet<String> = covered
        .into_iter()
        .map(|s| s.as_ref().to_uppercase())
        .collect();
    let missing: Vec<&String> = wanted.iter().filter(|n| !covered.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "{k}: {what}: no case for {missing:?} (the module's table has them; add a case)"
    );
    let all: BTreeSet<String> = tally_command_names(srv).into_iter().collect();
    let unknown: Vec<&String> = covered.iter().filter(|n| !all.contains(*n)).collect();
    assert!(
        unknown.is_empty(),
        "{k}: {what}: cases for {unknown:?}, which the module does not register"
    );
}
