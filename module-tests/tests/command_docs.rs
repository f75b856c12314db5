//! Self-describing commands: `COMMAND DOCS` answers for every tally command (summary,
//! since, group, complexity, argument tree), `commands.json` at the repository root holds
//! exactly what the built module answers, and `redis-cli` turns it into argument hints.
//!
//! `commands.json` is written by this file too: `make commands-json` runs
//! `commands_json_is_what_command_docs_answers` with `TALLY_WRITE_COMMANDS_JSON=1`, which
//! writes the file instead of comparing it. So the file and the check cannot drift apart.

use std::io::Write;
use std::process::{Command, Stdio};

use module_tests::*;

// ------------------------------------------------------------------ commands.json

/// A JSON value: what commands.json needs, printed as RedisTimeSeries' file is (four
/// spaces of indentation, `"key": value`), without a JSON crate.
enum Json {
    Str(String),
    Int(i64),
    Bool(bool),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

fn quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 || !c.is_ascii() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn write_json(out: &mut String, value: &Json, indent: usize) {
    let pad = |n: usize| " ".repeat(n);
    match value {
        Json::Str(s) => out.push_str(&quoted(s)),
        Json::Int(i) => out.push_str(&i.to_string()),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Arr(items) if items.is_empty() => out.push_str("[]"),
        Json::Obj(fields) if fields.is_empty() => out.push_str("{}"),
        Json::Arr(items) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                out.push_str(&pad(indent + 4));
                write_json(out, item, indent + 4);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(indent));
            out.push(']');
        }
        Json::Obj(fields) => {
            out.push_str("{\n");
            for (i, (key, item)) in fields.iter().enumerate() {
                out.push_str(&pad(indent + 4));
                out.push_str(&quoted(key));
                out.push_str(": ");
                write_json(out, item, indent + 4);
                out.push_str(if i + 1 < fields.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(indent));
            out.push('}');
        }
    }
}

fn text(value: &Value) -> String {
    value_text(value).unwrap_or_else(|| panic!("expected a string, got {value:?}"))
}

fn list(value: &Value) -> &[Value] {
    match value {
        Value::Array(items) | Value::Set(items) => items,
        other => panic!("expected an array, got {other:?}"),
    }
}

/// One argument of a `COMMAND DOCS` reply in commands.json's form. Every field the
/// server sends is kept, except `display_text` when it only repeats the name (Redis 7.2+
/// and Valkey add it, Redis 7.0 does not); a field this function does not know fails.
fn argument_json(reply: &Value) -> Json {
    let fields = map_pairs(reply);
    let get = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let name = text(get("name").expect("an argument has a name"));
    let mut out = vec![("name".to_string(), Json::Str(name.clone()))];
    for (key, value) in &fields {
        match key.as_str() {
            "name" | "flags" | "arguments" => {}
            "display_text" if text(value) == name => {}
            "key_spec_index" => out.push((key.clone(), Json::Int(value_i64(value)))),
            "type" | "token" | "display_text" | "summary" | "since" | "deprecated_since" => {
                out.push((key.clone(), Json::Str(text(value))))
            }
            other => panic!("argument {name}: unknown field {other:?} in COMMAND DOCS"),
        }
    }
    if let Some(flags) = get("flags") {
        for flag in list(flags) {
            out.push((text(flag), Json::Bool(true)));
        }
    }
    if let Some(args) = get("arguments") {
        let args = list(args).iter().map(argument_json).collect();
        out.push(("arguments".to_string(), Json::Arr(args)));
    }
    Json::Obj(out)
}

fn value_i64(value: &Value) -> i64 {
    match value {
        Value::Int(i) => *i,
        other => panic!("expected an integer, got {other:?}"),
    }
}

/// One command's `COMMAND DOCS` entry in commands.json's form: summary, complexity,
/// arguments, since, group (RedisTimeSeries' order).
fn command_json(name: &str, reply: &Value) -> Json {
    let fields = map_pairs(reply);
    let mut known = [
        ("summary", None),
        ("complexity", None),
        ("arguments", None),
        ("since", None),
        ("group", None),
    ];
    for (key, value) in &fields {
        match known.iter_mut().find(|(k, _)| k == key) {
            Some((_, slot)) => *slot = Some(value),
            None if key == "module" => assert_eq!(text(value), "tally", "{name}"),
            None => panic!("{name}: unknown field {key:?} in COMMAND DOCS"),
        }
    }
    let out = known
        .iter()
        .filter_map(|(key, value)| {
            let value = (*value)?;
            let json = match *key {
                "arguments" => Json::Arr(list(value).iter().map(argument_json).collect()),
                _ => Json::Str(text(value)),
            };
            Some((key.to_string(), json))
        })
        .collect();
    Json::Obj(out)
}

/// commands.json as the server's `COMMAND DOCS` describes tally's commands (sorted by
/// name, upper case as in RedisTimeSeries' file).
fn commands_json_from(srv: &Server) -> String {
    let mut names: Vec<String> =
        list(&srv.cmd_value(&["COMMAND", "LIST", "FILTERBY", "MODULE", "tally"]))
            .iter()
            .map(text)
            .collect();
    names.sort();
    assert!(names.len() >= 20, "tally's commands: {names:?}");
    let mut commands = Vec::new();
    for name in names {
        let reply = srv.cmd_value(&["COMMAND", "DOCS", &name]);
        let entries = map_pairs(&reply);
        let [(documented, doc)] = entries.as_slice() else {
            panic!("COMMAND DOCS {name}: {reply:?}");
        };
        assert_eq!(documented, &name);
        commands.push((name.to_uppercase(), command_json(&name, doc)));
    }
    let mut out = String::new();
    write_json(&mut out, &Json::Obj(commands), 0);
    out.push('\n');
    out
}

per_server!(commands_json_is_what_command_docs_answers);
/// commands.json at the root equals what the built module answers to `COMMAND DOCS` on
/// this server (with `TALLY_WRITE_COMMANDS_JSON=1`: writes it).
fn commands_json_is_what_command_docs_answers(kind: &ServerKind) {
    let srv = Server::start(kind);
    let generated = commands_json_from(&srv);
    let path = repo_root().join("commands.json");
    if std::env::var_os("TALLY_WRITE_COMMANDS_JSON").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write commands.json");
        println!("wrote {}", path.display());
        return;
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    if stored != generated {
        let line = stored
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| stored.lines().count().min(generated.lines().count()));
        panic!(
            "{}: commands.json differs from COMMAND DOCS from line {}:\n  file:   {:?}\n  server: {:?}\nrun `make commands-json` and review the diff",
            kind.name,
            line + 1,
            stored.lines().nth(line),
            generated.lines().nth(line),
        );
    }
    // Every command says something in each field.
    for command in generated.split("\n    \"").skip(1) {
        for field in ["summary", "complexity", "arguments", "since", "group"] {
            assert!(
                command.contains(&format!("\"{field}\": ")),
                "{field} in {command}"
            );
        }
    }
    srv.assert_alive();
}

/// One argument as `COMMAND DOCS` answers it in RESP2: `name`, `type`, then
/// `display_text` (the name again) on servers that add it, then `extra`.
fn arg(kind: &ServerKind, name: &str, type_: &str, extra: Vec<(&str, Value)>) -> Value {
    let mut out = vec![v_bulk("name"), v_bulk(name), v_bulk("type"), v_bulk(type_)];
    // Redis 7.2+ and Valkey give every argument but a block or one-of a display text.
    if kind.name != "redis" && type_ != "block" && type_ != "oneof" {
        out.extend([v_bulk("display_text"), v_bulk(name)]);
    }
    for (key, value) in extra {
        out.extend([v_bulk(key), value]);
    }
    v_arr(out)
}

fn flags(names: &[&str]) -> Value {
    v_arr(names.iter().map(|f| v_simple(f)).collect())
}

per_server!(command_docs_answer_exactly);
/// The exact `COMMAND DOCS` reply for two commands with blocks, tokens, optional and
/// multiple arguments and a second key.
fn command_docs_answer_exactly(kind: &ServerKind) {
    let srv = Server::start(kind);
    let version = cargo_version();
    let doc = |name: &str, summary: &str, complexity: &str, args: Vec<Value>| {
        v_arr(vec![
            v_bulk(name),
            v_arr(vec![
                v_bulk("summary"),
                v_bulk(summary),
                v_bulk("since"),
                v_bulk(&version),
                v_bulk("group"),
                v_bulk("module"),
                v_bulk("complexity"),
                v_bulk(complexity),
                v_bulk("module"),
                v_bulk("tally"),
                v_bulk("arguments"),
                v_arr(args),
            ]),
        ])
    };
    let key = arg(kind, "key", "key", vec![("key_spec_index", v_int(0))]);
    let at = arg(
        kind,
        "ts",
        "integer",
        vec![("token", v_bulk("AT")), ("flags", flags(&["optional"]))],
    );
    assert_eq!(
        srv.cmd_value(&["COMMAND", "DOCS", "tscounter.limit"]),
        doc(
            "tscounter.limit",
            "Apply an increment only if every window's sum stays within its maximum",
            "O(P + S) where P is the number of window/max pairs and S the number of slots the windows cover, plus TSCOUNTER.INCRBY's cost when the increment is applied",
            vec![
                key.clone(),
                arg(kind, "increment", "integer", vec![]),
                arg(
                    kind,
                    "limit",
                    "block",
                    vec![
                        ("flags", flags(&["multiple"])),
                        (
                            "arguments",
                            v_arr(vec![
                                arg(kind, "window", "string", vec![]),
                                arg(kind, "max", "integer", vec![]),
                            ]),
                        ),
                    ],
                ),
                at.clone(),
                arg(
                    kind,
                    "details",
                    "pure-token",
                    vec![
                        ("token", v_bulk("DETAILS")),
                        ("flags", flags(&["optional"])),
                    ],
                ),
            ],
        ),
        "{}",
        kind.name
    );
    assert_eq!(
        srv.cmd_value(&["COMMAND", "DOCS", "STATS.ADD"]),
        doc(
            "stats.add",
            "Add values to the statistics of their period, optionally ranking the period by its mean or another statistic",
            "O(V + B) where V is the number of values and B the number of quantile-sketch buckets of the period (its sketch is read and rewritten); with REPORT, plus O(log(N)) where N is the number of members of the ranking, and O(B) more to rank by a quantile (BY p50, p90 or p99)",
            vec![
                key,
                arg(
                    kind,
                    "value",
                    "double",
                    vec![("flags", flags(&["multiple"]))]
                ),
                at,
                arg(
                    kind,
                    "report",
                    "block",
                    vec![
                        ("token", v_bulk("REPORT")),
                        ("flags", flags(&["optional"])),
                        (
                            "arguments",
                            v_arr(vec![
                                arg(kind, "rankkey", "key", vec![("key_spec_index", v_int(1))]),
                                arg(kind, "member", "string", vec![]),
                                arg(
                                    kind,
                                    "n",
                                    "integer",
                                    vec![("token", v_bulk("KEEP")), ("flags", flags(&["optional"]))],
                                ),
                                arg(
                                    kind,
                                    "stat",
                                    "oneof",
                                    vec![
                                        ("token", v_bulk("BY")),
                                        ("flags", flags(&["optional"])),
                                        (
                                            "arguments",
                                            v_arr(
                                                ["mean", "max", "count", "sum", "p50", "p90", "p99"]
                                                    .iter()
                                                    .map(|stat| {
                                                        arg(
                                                            kind,
                                                            stat,
                                                            "pure-token",
                                                            vec![(
                                                                "token",
                                                                v_bulk(&stat.to_uppercase()),
                                                            )],
                                                        )
                                                    })
                                                    .collect(),
                                            ),
                                        ),
                                    ],
                                ),
                            ]),
                        ),
                    ],
                ),
            ],
        ),
        "{}",
        kind.name
    );
    srv.assert_alive();
}

// ------------------------------------------------------------------ redis-cli hints

/// Drives an interactive `redis-cli` through a pseudo-terminal (python3's `pty`): types
/// `argv[3]`, answers the terminal's cursor-position queries, and prints what the
/// terminal received once the typed text is echoed with a hint after it (or after 10 s).
const TYPE_IN_REDIS_CLI: &str = r#"
import fcntl, os, pty, select, struct, sys, termios, time
cli, port, typed = sys.argv[1], sys.argv[2], sys.argv[3]
pid, fd = pty.fork()
if pid == 0:
    # The terminal's size before redis-cli starts: set after the fork by the parent, it
    # raced redis-cli's first read of it, which then wrapped every line at one column.
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 300, 0, 0))
    os.environ["TERM"] = "xterm"
    os.environ["HOME"] = os.environ.get("TALLY_CLI_HOME", "/nonexistent")
    os.execv(cli, [cli, "-p", port])
seen = b""
def pump(seconds, until=None):
    global seen
    end = time.time() + seconds
    while time.time() < end:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:
            return
        if not data:
            return
        seen += data
        if b"\x1b[6n" in data:
            os.write(fd, b"\x1b[1;1R")
        if until is not None and until in seen:
            return
pump(3, b"> ")
os.write(fd, typed.encode())
pump(10, typed.encode() + b"\x1b[0;90;49m")
pump(0.3)
os.write(fd, b"\x03\x04")
pump(1)
try:
    os.kill(pid, 9)
except OSError:
    pass
os.waitpid(pid, 0)
sys.stdout.write(seen.decode("utf-8", "replace"))
"#;

/// The hint `redis-cli` shows after `typed` (the grey text after the last echo of it).
fn cli_hint(srv: &Server, typed: &str) -> Option<String> {
    let home = srv.dir().join("cli-home");
    std::fs::create_dir_all(&home).expect("cli home");
    let mut child = Command::new("python3")
        .arg("-")
        .arg(redis_cli())
        .arg(srv.port().to_string())
        .arg(typed)
        .env("TALLY_CLI_HOME", &home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 runs (needed to drive redis-cli through a pseudo-terminal)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(TYPE_IN_REDIS_CLI.as_bytes())
        .expect("script to python3");
    let output = child.wait_with_output().expect("python3 ends");
    assert!(output.status.success(), "python3 failed: {output:?}");
    let screen = String::from_utf8_lossy(&output.stdout).into_owned();
    let echoed = format!("> {typed}\x1b[0;90;49m");
    let start = screen.rfind(&echoed)? + echoed.len();
    let hint = &screen[start..];
    Some(hint[..hint.find("\x1b[0m")?].to_string())
}

per_server!(redis_cli_shows_argument_hints);
/// `redis-cli` (it reads `COMMAND DOCS` at start) shows each command's arguments while
/// the user types it, and what is left of them after some are typed.
fn redis_cli_shows_argument_hints(kind: &ServerKind) {
    let srv = Server::start(kind);
    let cases = [
        (
            "tscounter.create c ",
            "[RESOLUTIONS res:samples [res:samples ...]]",
        ),
        (
            "tscounter.limit ",
            "key increment window max [window max ...] [AT ts] [DETAILS]",
        ),
        (
            "TSCOUNTER.LIMIT k 1 5s 10 ",
            "[window max ...] [AT ts] [DETAILS]",
        ),
        (
            "tscounter.range ",
            "key resolution [FROM from_ts] [TO to_ts] [EMPTY]",
        ),
        (
            "tsrank.top board 10 ",
            "[OFFSET offset] [WITHSCORES] [WINDOW dur]",
        ),
        (
            "stats.add k 1.5 ",
            "[value ...] [AT ts] [REPORT rankkey member [KEEP n] [BY MEAN|MAX|COUNT|SUM|P50|P90|P99]]",
        ),
    ];
    for (typed, hint) in cases {
        assert_eq!(
            cli_hint(&srv, typed).as_deref(),
            Some(hint),
            "{}: hint after {typed:?}",
            kind.name
        );
    }
    srv.assert_alive();
}
