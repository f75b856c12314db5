//! The examples in README.md and docs/ cannot rot: every `redis-cli` block is run against
//! a real server with the module, on every server kind, and each reply is compared with
//! what the block shows.
//!
//! The convention, for anyone writing an example:
//!
//! * A fenced block whose info string is `redis-cli` runs on a RESP2 connection;
//!   `redis-cli resp3` runs on a RESP3 one (what `redis-cli -3` shows).
//! * A line `127.0.0.1:6379> COMMAND arg ...` is a command, split into arguments as
//!   redis-cli splits them (spaces; double or single quotes around an argument); the lines
//!   up to the next command are its reply exactly as `redis-cli --no-raw` prints it.
//! * A line starting with `#` is a comment and is skipped.
//! * In a reply, `<name>` (for example `<ts>`, `<ms>`, `<bytes>`) stands for a number
//!   that depends on when or where the example runs: a Unix time, a wait, a size.
//! * RESP3 doubles are printed in their shortest form, as Redis 7.2+ and Valkey send them;
//!   Redis 7.0 sends 17 significant digits, so a RESP3 example shows only doubles whose
//!   shortest form has those digits too (1.5, 230).
//!
//! Each file runs in order, block after block, on one fresh server. The examples write
//! without `AT` (the server's now) where the time does not matter to the reply, so a file
//! must run within one second of the server's clock for its replies to stay exact
//! (a 1-second slot never changes under it): the run starts at the beginning of a second
//! and starts over on a fresh server when it crossed into the next one.
//!
//! The reply printer follows redis-cli's own (`cliFormatReplyTTY`);
//! `printer_matches_redis_cli` compares it with the real `redis-cli --no-raw`.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use module_tests::*;
use redis::ConnectionLike as _;

/// The prompt redis-cli shows before a command.
const PROMPT: &str = "127.0.0.1:6379> ";

/// A file is run again on a fresh server at most this many times when its run crossed a
/// second of the server's clock.
const ATTEMPTS: usize = 6;

/// One command of an example and the reply lines shown under it.
struct Step {
    line: usize,
    command: String,
    expected: Vec<String>,
}

/// One `redis-cli` block.
struct Block {
    resp3: bool,
    steps: Vec<Step>,
}

/// README.md and every Markdown file under docs/, sorted.
fn doc_files() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The `redis-cli` blocks of a Markdown text. A prompt line in any other fenced block is
/// an error: it would look like an example and never run.
fn parse_blocks(text: &str, file: &str) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    let mut fence: Option<(String, usize)> = None;
    let mut current: Option<Block> = None;
    for (index, raw) in text.lines().enumerate() {
        let line_no = index + 1;
        let trimmed = raw.trim_start();
        if let Some((info, start)) = &fence {
            if trimmed.starts_with("```") {
                if let Some(block) = current.take() {
                    if block.steps.is_empty() {
                        return Err(format!(
                            "{file}:{start}: a redis-cli block without commands"
                        ));
                    }
                    blocks.push(block);
                }
                fence = None;
                continue;
            }
            let Some(block) = current.as_mut() else {
                if raw.starts_with(PROMPT.trim_end()) {
                    return Err(format!(
                        "{file}:{line_no}: a redis-cli prompt in a ```{info} block: use ```redis-cli so it runs"
                    ));
                }
                continue;
            };
            if raw.starts_with('#') {
                continue;
            }
            if let Some(command) = raw.strip_prefix(PROMPT) {
                block.steps.push(Step {
                    line: line_no,
                    command: command.to_string(),
                    expected: Vec::new(),
                });
            } else if let Some(step) = block.steps.last_mut() {
                step.expected.push(raw.to_string());
            } else {
                return Err(format!("{file}:{line_no}: a reply line before any command"));
            }
        } else if let Some(info) = trimmed.strip_prefix("```") {
            let info = info.trim().to_string();
            current = match info.as_str() {
                "redis-cli" => Some(Block {
                    resp3: false,
                    steps: Vec::new(),
                }),
                "redis-cli resp3" => Some(Block {
                    resp3: true,
                    steps: Vec::new(),
                }),
                _ => None,
            };
            fence = Some((info, line_no));
        }
    }
    match fence {
        Some((_, start)) => Err(format!("{file}:{start}: a fenced block that never ends")),
        None => Ok(blocks),
    }
}

/// Splits a command line as redis-cli does (`sdssplitargs`): spaces separate arguments;
/// `"..."` takes `\"`, `\\`, `\n`, `\r`, `\t` and `\xHH` escapes; `'...'` takes `\'`.
fn split_args(line: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut args = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == bytes.len() {
            return Ok(args);
        }
        let mut arg = Vec::new();
        match bytes[i] {
            b'"' => {
                i += 1;
                loop {
                    match bytes.get(i) {
                        None => return Err(format!("unbalanced quotes in {line:?}")),
                        Some(b'"') => break,
                        Some(b'\\') => {
                            let (byte, used) = unescape(&bytes[i + 1..])
                                .ok_or_else(|| format!("bad escape in {line:?}"))?;
                            arg.push(byte);
                            i += 1 + used;
                        }
                        Some(&b) => {
                            arg.push(b);
                            i += 1;
                        }
                    }
                }
                i += 1;
            }
            b'\'' => {
                i += 1;
                loop {
                    match bytes.get(i) {
                        None => return Err(format!("unbalanced quotes in {line:?}")),
                        Some(b'\'') => break,
                        Some(b'\\') if bytes.get(i + 1) == Some(&b'\'') => {
                            arg.push(b'\'');
                            i += 2;
                        }
                        Some(&b) => {
                            arg.push(b);
                            i += 1;
                        }
                    }
                }
                i += 1;
            }
            _ => {
                while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                    arg.push(bytes[i]);
                    i += 1;
                }
            }
        }
        if i < bytes.len() && !bytes[i].is_ascii_whitespace() {
            return Err(format!(
                "a closing quote must be followed by a space in {line:?}"
            ));
        }
        args.push(arg);
    }
}

/// One escape after a backslash inside double quotes: the byte and how many bytes it used.
fn unescape(rest: &[u8]) -> Option<(u8, usize)> {
    match rest.first()? {
        b'n' => Some((b'\n', 1)),
        b'r' => Some((b'\r', 1)),
        b't' => Some((b'\t', 1)),
        b'x' => {
            let hex = std::str::from_utf8(rest.get(1..3)?).ok()?;
            Some((u8::from_str_radix(hex, 16).ok()?, 3))
        }
        &b => Some((b, 1)),
    }
}

/// A bulk string as redis-cli quotes it (`sdscatrepr`).
fn quoted(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            b if b.is_ascii_graphic() || b == b' ' => out.push(b as char),
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

/// A reply as `redis-cli --no-raw` prints it (`cliFormatReplyTTY`), one `\n` per line.
fn render(value: &Value, prefix: &str) -> String {
    match value {
        Value::Okay => "OK\n".to_string(),
        Value::SimpleString(s) => format!("{s}\n"),
        Value::Int(i) => format!("(integer) {i}\n"),
        Value::Double(d) => format!("(double) {d}\n"),
        Value::Boolean(b) => format!("({b})\n"),
        Value::Nil => "(nil)\n".to_string(),
        Value::BulkString(b) => format!("{}\n", quoted(b)),
        Value::VerbatimString { text, .. } => format!("{text}\n"),
        Value::ServerError(_) => format!("(error) {}\n", error_text(value).unwrap_or_default()),
        Value::Array(items) => render_aggregate(items, ')', "(empty array)", prefix),
        Value::Set(items) => render_aggregate(items, '~', "(empty set)", prefix),
        Value::Map(pairs) => {
            let items: Vec<Value> = pairs
                .iter()
                .flat_map(|(k, v)| [k.clone(), v.clone()])
                .collect();
            render_aggregate(&items, '#', "(empty hash)", prefix)
        }
        other => format!("{other:?}\n"),
    }
}

/// Arrays, sets and maps (`separator` `)`, `~`, `#`): numbered from 1, the numbers right
/// aligned, nested replies indented past their number. A map's items are key, value,
/// key, value: each pair takes one number and prints `key => value`, a nested aggregate
/// value starting on the next line.
fn render_aggregate(items: &[Value], separator: char, empty: &str, prefix: &str) -> String {
    if items.is_empty() {
        return format!("{empty}\n");
    }
    let map = separator == '#';
    let count = if map { items.len() / 2 } else { items.len() };
    let width = count.to_string().len();
    let inner = format!("{prefix}{}", " ".repeat(width + 2));
    let mut out = String::new();
    let mut i = 0;
    while i < items.len() {
        let number = if map { i / 2 + 1 } else { i + 1 };
        let lead = if i == 0 { "" } else { prefix };
        out.push_str(&format!("{lead}{number:>width$}{separator} "));
        out.push_str(&render(&items[i], &inner));
        if map {
            out.pop();
            out.push_str(" => ");
            if let Some(value) = items.get(i + 1) {
                // A nested aggregate starts on the next line, numbered like the rest.
                let nested = matches!(value, Value::Array(v) | Value::Set(v) if !v.is_empty())
                    || matches!(value, Value::Map(v) if !v.is_empty());
                if nested {
                    out.push('\n');
                    out.push_str(&inner);
                }
                out.push_str(&render(value, &inner));
            }
            i += 1;
        }
        i += 1;
    }
    out
}

/// True if `actual` is `expected` with each `<name>` standing for a number. Spaces at the
/// end of a line do not count (redis-cli prints one after a map key whose value is
/// nested; editors strip it).
fn line_matches(expected: &str, actual: &str) -> bool {
    let mut rest = actual.trim_end();
    let mut pattern = expected.trim_end();
    while let Some(open) = pattern.find('<') {
        let Some(close) = pattern[open..].find('>').map(|c| open + c) else {
            break;
        };
        let name = &pattern[open + 1..close];
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
            break;
        }
        let Some(after) = rest.strip_prefix(&pattern[..open]) else {
            return false;
        };
        let digits = after
            .find(|c: char| !(c.is_ascii_digit() || c == '-' || c == '.'))
            .unwrap_or(after.len());
        if !after[..digits].bytes().any(|b| b.is_ascii_digit()) {
            return false;
        }
        rest = &after[digits..];
        pattern = &pattern[close + 1..];
    }
    rest == pattern
}

/// The server's clock in ms, on a connection of the run.
fn server_clock(conn: &mut redis::Connection) -> i64 {
    let parts: Vec<i64> = match conn_value(conn, &["TIME"]) {
        Value::Array(items) => items
            .iter()
            .filter_map(|v| value_text(v).and_then(|t| t.parse().ok()))
            .collect(),
        other => panic!("TIME gave {other:?}"),
    };
    assert_eq!(parts.len(), 2, "TIME");
    parts[0] * 1000 + parts[1] / 1000
}

/// What one run of a file found.
enum Run {
    /// Every reply as shown, or the mismatches (empty when all matched).
    Done(Vec<String>),
    /// The run crossed a second of the server's clock: its replies prove nothing.
    CrossedSecond,
}

/// Runs the blocks of one file on a fresh server.
fn run_file(kind: &ServerKind, name: &str, blocks: &[Block]) -> Run {
    let srv = Server::start(kind);
    let mut resp2 = srv.conn();
    let mut resp3 = srv.conn_resp3();
    let mut commands = Vec::new();
    for block in blocks {
        for step in &block.steps {
            match split_args(&step.command) {
                Ok(args) if !args.is_empty() => commands.push((block.resp3, step, args)),
                Ok(_) => return Run::Done(vec![format!("{name}:{}: empty command", step.line)]),
                Err(e) => return Run::Done(vec![format!("{name}:{}: {e}", step.line)]),
            }
        }
    }
    // Start early in a second, so the whole file runs within it.
    loop {
        let ms = server_clock(&mut resp2).rem_euclid(1000);
        if ms < 100 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis((1000 - ms) as u64));
    }
    let start = server_clock(&mut resp2);
    let mut replies = Vec::new();
    for (is_resp3, _, args) in &commands {
        let conn = if *is_resp3 { &mut resp3 } else { &mut resp2 };
        let mut cmd = redis::Cmd::new();
        for a in args {
            cmd.arg(&a[..]);
        }
        let reply = conn
            .req_command(&cmd)
            .unwrap_or_else(|e| panic!("{}: {name}: {e}\n{}", kind.name, srv.log_tail(30)));
        replies.push(reply);
    }
    let end = server_clock(&mut resp2);
    if start.div_euclid(1000) != end.div_euclid(1000) {
        return Run::CrossedSecond;
    }
    let mut mismatches = Vec::new();
    for ((_, step, _), reply) in commands.iter().zip(&replies) {
        let printed = render(reply, "");
        let actual: Vec<&str> = printed.lines().collect();
        let same = actual.len() == step.expected.len()
            && actual
                .iter()
                .zip(&step.expected)
                .all(|(a, e)| line_matches(e, a));
        if !same {
            mismatches.push(format!(
                "{name}:{}: {}{}\n--- shown:\n{}\n--- {} replies:\n{}",
                step.line,
                PROMPT,
                step.command,
                step.expected.join("\n"),
                kind.name,
                actual.join("\n")
            ));
        }
    }
    srv.assert_alive();
    Run::Done(mismatches)
}

per_server!(every_example_block_replies_as_documented);
/// Every `redis-cli` block of README.md and docs/ replies as shown, file by file on a
/// fresh server.
fn every_example_block_replies_as_documented(kind: &ServerKind) {
    let root = repo_root();
    let mut failures = Vec::new();
    let mut total = 0;
    for path in doc_files() {
        let name = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .display()
            .to_string();
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let blocks = match parse_blocks(&text, &name) {
            Ok(blocks) => blocks,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        if blocks.is_empty() {
            continue;
        }
        total += blocks.iter().map(|b| b.steps.len()).sum::<usize>();
        let mut attempt = 0;
        loop {
            attempt += 1;
            match run_file(kind, &name, &blocks) {
                Run::Done(mismatches) => {
                    failures.extend(mismatches);
                    break;
                }
                Run::CrossedSecond if attempt < ATTEMPTS => {
                    println!("{name}: the run crossed a second of the server's clock, again");
                    continue;
                }
                Run::CrossedSecond => {
                    failures.push(format!(
                        "{name}: every one of {ATTEMPTS} runs crossed a second of the server's clock"
                    ));
                    break;
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{}: {} example(s) differ from the docs:\n\n{}",
        kind.name,
        failures.len(),
        failures.join("\n\n")
    );
    // The user-facing files must have examples, or this test proves nothing.
    assert!(
        total >= 50,
        "{}: only {total} example commands found",
        kind.name
    );
}

/// The pause between two commands of the tour in `the_tour_replies_as_shown_at_typing_speed`:
/// a person typing at their own pace. Longer than a 1-second slot and than a 5-second window,
/// so a reply that depends on either differs from the README.
const TYPING_PAUSE: std::time::Duration = std::time::Duration::from_secs(6);

/// The README's quick tour: its `redis-cli` blocks, from its heading to the next section.
fn tour_blocks() -> Vec<Block> {
    let path = repo_root().join("README.md");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("README.md: {e}"));
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| *l == "## Quick tour")
        .expect("README.md has a '## Quick tour' section")
        + 1;
    let end = lines[start..]
        .iter()
        .position(|l| l.starts_with("## "))
        .map_or(lines.len(), |i| start + i);
    let blocks = parse_blocks(&text, "README.md").unwrap_or_else(|e| panic!("{e}"));
    blocks
        .into_iter()
        .filter(|b| b.steps.iter().all(|s| (start..end).contains(&s.line)))
        .filter(|b| b.steps.first().is_some_and(|s| s.line > start))
        .collect()
}

per_server!(the_tour_replies_as_shown_at_typing_speed);
/// The README's tour replies as shown to a person typing it: each of its blocks (they use
/// distinct keys) runs on its own connection, all at once, with `TYPING_PAUSE` between
/// two commands. The tour says that a reply of its hourly counter restarts at the top of
/// an hour, so the run starts where no hour ends before it is done.
fn the_tour_replies_as_shown_at_typing_speed(kind: &ServerKind) {
    let blocks = tour_blocks();
    assert!(blocks.len() >= 4, "the tour has {} blocks", blocks.len());
    let longest = blocks.iter().map(|b| b.steps.len()).max().unwrap_or(0) as u32;
    let srv = Server::start(kind);
    let mut clock = srv.conn();
    let run_ms = i64::from(longest) * TYPING_PAUSE.as_millis() as i64 + 10_000;
    let to_hour = 3_600_000 - server_clock(&mut clock).rem_euclid(3_600_000);
    if to_hour < run_ms {
        std::thread::sleep(std::time::Duration::from_millis(to_hour as u64 + 500));
    }
    let failures: Vec<String> = std::thread::scope(|scope| {
        let runs: Vec<_> = blocks
            .iter()
            .map(|block| {
                let mut conn = if block.resp3 { srv.conn_resp3() } else { srv.conn() };
                scope.spawn(move || {
                    let mut failures = Vec::new();
                    for (i, step) in block.steps.iter().enumerate() {
                        if i > 0 {
                            std::thread::sleep(TYPING_PAUSE);
                        }
                        let args = split_args(&step.command).unwrap_or_else(|e| panic!("{e}"));
                        let mut cmd = redis::Cmd::new();
                        for a in &args {
                            cmd.arg(&a[..]);
                        }
                        let reply = conn
                            .req_command(&cmd)
                            .unwrap_or_else(|e| panic!("README.md:{}: {e}", step.line));
                        let printed = render(&reply, "");
                        let actual: Vec<&str> = printed.lines().collect();
                        let same = actual.len() == step.expected.len()
                            && actual
                                .iter()
                                .zip(&step.expected)
                                .all(|(a, e)| line_matches(e, a));
                        if !same {
                            failures.push(format!(
                                "README.md:{}: {PROMPT}{}\n--- shown:\n{}\n--- typed, {} s apart:\n{}",
                                step.line,
                                step.command,
                                step.expected.join("\n"),
                                TYPING_PAUSE.as_secs(),
                                actual.join("\n")
                            ));
                        }
                    }
                    failures
                })
            })
            .collect();
        runs.into_iter()
            .flat_map(|run| run.join().expect("a tour block's thread"))
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{}: the tour at typing speed differs from the README:\n\n{}",
        kind.name,
        failures.join("\n\n")
    );
    srv.assert_alive();
}

/// The rows of docs/errors.md's table: (line, exact reply, example command).
fn error_rows(text: &str) -> Vec<(usize, String, String)> {
    let code = |cell: &str| {
        let cell = cell.trim();
        cell.strip_prefix('`')
            .and_then(|c| c.strip_suffix('`'))
            .unwrap_or_else(|| panic!("docs/errors.md: a cell that is not code: {cell}"))
            .to_string()
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with("| `"))
        .map(|(i, line)| {
            let cells: Vec<&str> = line
                .trim_start_matches('|')
                .trim_end_matches('|')
                .split(" | ")
                .collect();
            assert_eq!(cells.len(), 4, "docs/errors.md:{}: four cells", i + 1);
            (i + 1, code(cells[0]), code(cells[3]))
        })
        .collect()
}

per_server!(the_errors_table_replies_as_documented);
/// Every row of docs/errors.md's table: its example, on a server holding the page's keys
/// (its `redis-cli` block), answers exactly the row's reply and changes nothing.
fn the_errors_table_replies_as_documented(kind: &ServerKind) {
    let path = repo_root().join("docs/errors.md");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("docs/errors.md: {e}"));
    let srv = Server::start(kind);
    for block in parse_blocks(&text, "docs/errors.md").unwrap_or_else(|e| panic!("{e}")) {
        for step in &block.steps {
            let args = split_args(&step.command).unwrap_or_else(|e| panic!("{e}"));
            let reply = srv.cmd_value(&args);
            assert!(
                error_text(&reply).is_none(),
                "setup: {}: {reply:?}",
                step.command
            );
        }
    }
    let rows = error_rows(&text);
    assert!(
        rows.len() >= 40,
        "only {} rows in docs/errors.md",
        rows.len()
    );
    let before = srv.dump_keyspace();
    let mut failures = Vec::new();
    for (line, want, example) in &rows {
        let args = split_args(example).unwrap_or_else(|e| panic!("{e}"));
        let got = error_text(&srv.cmd_value(&args)).unwrap_or_else(|| "(no error)".into());
        // The server words its arity error with the command's name in its own case.
        let same = if want.contains("wrong number of arguments") {
            got.eq_ignore_ascii_case(want)
        } else {
            got == *want
        };
        if !same {
            failures.push(format!(
                "docs/errors.md:{line}: {example}\n--- shown: {want}\n--- {}: {got}",
                kind.name
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{}: {} error(s) differ from docs/errors.md:\n\n{}",
        kind.name,
        failures.len(),
        failures.join("\n\n")
    );
    assert_eq!(
        srv.dump_keyspace(),
        before,
        "{}: an error wrote something",
        kind.name
    );
    srv.assert_alive();
}

per_server!(printer_matches_redis_cli);
/// The reply printer above prints what `redis-cli --no-raw` prints, for every shape the
/// docs show: integers, strings, nil, errors, empty and nested arrays, RESP3 maps and
/// doubles, ten items and more (numbers right aligned).
fn printer_matches_redis_cli(kind: &ServerKind) {
    let srv = Server::start(kind);
    let setup: &[&[&str]] = &[
        &["TSCOUNTER.CREATE", "c", "RESOLUTIONS", "1h:9000", "1d:1000"],
        &["TSCOUNTER.INCRBY", "c", "3", "AT", "1795046400000"],
        &["TSCOUNTER.INCRBY", "c", "2", "AT", "1795308000000"],
        &["STATS.ADD", "s", "1.5", "2.5", "230"],
        &["HSET", "h", "a", "1", "b q\"\\", "x\ty"],
        &["ZADD", "z", "2.5", "m"],
        &[
            "RPUSH", "l", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11",
        ],
    ];
    for args in setup {
        assert!(srv.cmd(args).is_ok(), "{}: {args:?}", kind.name);
    }
    let checks: &[(bool, &[&str])] = &[
        (false, &["PING"]),
        (false, &["TSCOUNTER.SUM", "c", "1h", "AT", "1795046400000"]),
        (false, &["TSCOUNTER.RANGE", "c", "1d"]),
        (false, &["TSCOUNTER.INFO", "missing"]),
        (false, &["TSCOUNTER.RANGE", "missing", "1h"]),
        (false, &["TSCOUNTER.SUM", "c", "x"]),
        (false, &["STATS.GET", "s"]),
        (true, &["ZSCORE", "z", "m"]),
        (true, &["TSCOUNTER.INFO", "c"]),
        (true, &["HGETALL", "nothing"]),
        (false, &["HGETALL", "h"]),
        (false, &["LRANGE", "l", "0", "-1"]),
        (true, &["SMEMBERS", "nothing"]),
    ];
    for (resp3, args) in checks {
        let value = if *resp3 {
            srv.cmd_value_resp3(args)
        } else {
            srv.cmd_value(args)
        };
        let mut cli = Command::new(redis_cli());
        cli.args(["-p", &srv.port().to_string(), "--no-raw"]);
        if *resp3 {
            cli.arg("-3");
        }
        let out = cli
            .args(*args)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", redis_cli().display()));
        let printed = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(
            render(&value, ""),
            printed,
            "{}: {args:?} (resp3: {resp3})",
            kind.name
        );
    }
}

#[test]
fn placeholders_match_numbers_only() {
    assert!(line_matches("(integer) <ts>", "(integer) 1795046400000"));
    assert!(line_matches("2) (integer) <ms>", "2) (integer) -1"));
    assert!(line_matches("\"<bytes>\" x", "\"12.5\" x"));
    assert!(!line_matches("(integer) <ts>", "(integer) "));
    assert!(!line_matches("(integer) <ts>", "(nil)"));
    assert!(!line_matches("(integer) <ts>", "(integer) 12 3"));
    assert!(line_matches("(integer) 5", "(integer) 5"));
    assert!(!line_matches("(integer) 5", "(integer) 6"));
}

#[test]
fn commands_split_as_redis_cli_splits_them() {
    let split = |line: &str| -> Vec<String> {
        split_args(line)
            .unwrap()
            .iter()
            .map(|a| String::from_utf8_lossy(a).to_string())
            .collect()
    };
    assert_eq!(split("HSET  k f \"a b\""), ["HSET", "k", "f", "a b"]);
    assert_eq!(split("SET k 'it\\'s' "), ["SET", "k", "it's"]);
    assert_eq!(split("SET k \"\\x41\\n\""), ["SET", "k", "A\n"]);
    assert!(split_args("SET k \"open").is_err());
}

#[test]
fn a_prompt_outside_a_redis_cli_block_is_refused() {
    let text = "```text\n127.0.0.1:6379> PING\nPONG\n```\n";
    assert!(parse_blocks(text, "x.md").is_err());
    let text = "```redis-cli\n# a comment\n127.0.0.1:6379> PING\nPONG\n```\n";
    let blocks = parse_blocks(text, "x.md").unwrap();
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].steps[0].expected, ["PONG"]);
    // The file list always has the README.
    assert!(doc_files().iter().any(|p| p.ends_with("README.md")));
}
