//! Small command helpers shared by the tests: polling, the server clock, pipelines and
//! reading hashes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::ConnectionLike as _;
use redis::Value;

use crate::server::Server;
use crate::values::{v_int, v_ok, value_text};

/// Calls `f` every 20 ms until it returns true (→ `true`) or `timeout`
/// passes (→ `false`). Use as `assert!(wait_until(..., || ...))`.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The server's clock in Unix ms, from `TIME` (what the module reads as "now").
pub fn server_ms(srv: &Server) -> i64 {
    match srv.cmd_value(&["TIME"]) {
        Value::Array(v) if v.len() == 2 => {
            let s: i64 = value_text(&v[0])
                .and_then(|t| t.parse().ok())
                .expect("TIME secs");
            let us: i64 = value_text(&v[1])
                .and_then(|t| t.parse().ok())
                .expect("TIME us");
            s * 1000 + us / 1000
        }
        other => panic!("TIME gave {other:?}"),
    }
}

/// Sends `cmds` as one pipeline on `conn` and returns one reply per command;
/// error replies stay `Value::ServerError` (nothing is checked here).
pub fn pipeline<A: AsRef<[u8]>>(conn: &mut redis::Connection, cmds: &[Vec<A>]) -> Vec<Value> {
    let mut pipe = redis::pipe();
    for c in cmds {
        let mut cmd = redis::Cmd::new();
        for a in c {
            cmd.arg(a.as_ref());
        }
        pipe.add_command(cmd);
    }
    let out = conn
        .req_packed_commands(&pipe.get_packed_pipeline(), 0, cmds.len())
        .expect("pipeline");
    assert_eq!(out.len(), cmds.len());
    out
}

/// `EXISTS key` is 1.
pub fn exists(srv: &Server, key: impl AsRef<[u8]>) -> bool {
    srv.cmd_value(&[b"EXISTS".as_slice(), key.as_ref()]) == v_int(1)
}

/// The hash at `key` as a sorted field -> value map (empty if missing).
pub fn hgetall(srv: &Server, key: impl AsRef<[u8]>) -> BTreeMap<String, String> {
    let v = srv.cmd_value(&[b"HGETALL".as_slice(), key.as_ref()]);
    let Value::Array(items) = v else {
        panic!("HGETALL gave {v:?}")
    };
    items
        .chunks(2)
        .map(|c| (value_text(&c[0]).unwrap(), value_text(&c[1]).unwrap()))
        .collect()
}

/// The slot fields of a tally hash: every field but the `_`-prefixed bookkeeping
/// (`_tally`, `_state`).
pub fn slot_fields(srv: &Server, key: impl AsRef<[u8]>) -> BTreeMap<String, String> {
    hgetall(srv, key)
        .into_iter()
        .filter(|(f, _)| !f.starts_with('_'))
        .collect()
}

/// This machine's clock in Unix ms (the client side; [`server_ms`] is the server's).
pub fn local_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Runs one command on `conn` and returns the raw reply; error replies come back as
/// `Value::ServerError` (like [`Server::cmd_value`] on a connection of your own). Panics
/// on connection errors.
pub fn conn_value<A: AsRef<[u8]>>(conn: &mut redis::Connection, args: &[A]) -> Value {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(a.as_ref());
    }
    conn.req_command(&cmd).expect("connection")
}

/// The password [`conn_as_user`] gives its users.
pub const USER_PASSWORD: &str = "pw-tally";

/// Creates (or resets) ACL user `user` with `rules`, plus `on`, the password
/// [`USER_PASSWORD`] and `+@all` unless the rules name commands themselves (a rule
/// starting with `+` or `-`), and returns a new connection authenticated as it.
/// E.g. `conn_as_user(&srv, "u", &["~lb", "~lb|slot|*"])`.
pub fn conn_as_user(srv: &Server, user: &str, rules: &[&str]) -> redis::Connection {
    let mut args = vec!["ACL", "SETUSER", user, "reset", "on"];
    let pw = format!(">{USER_PASSWORD}");
    args.push(&pw);
    if !rules
        .iter()
        .any(|r| r.starts_with('+') || r.starts_with('-'))
    {
        args.push("+@all");
    }
    args.extend(rules);
    assert_eq!(
        srv.cmd_value(&args),
        v_ok(),
        "{}: {args:?}",
        srv.kind().name
    );
    let mut c = srv.conn();
    let auth: Result<(), _> = redis::cmd("AUTH")
        .arg(user)
        .arg(USER_PASSWORD)
        .query(&mut c);
    auth.unwrap_or_else(|e| panic!("AUTH {user}: {e}"));
    c
}

/// Owned strings from string slices, for command lines built as `Vec<String>`.
pub fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// `CONFIG SET name value` is refused with a text ending in `tail`, and the config keeps
/// its value.
#[track_caller]
pub fn assert_config_refused(srv: &Server, name: &str, value: &str, tail: &str) {
    let k = &srv.kind().name;
    let before = srv.cmd_value(&["CONFIG", "GET", name]);
    let got = srv.cmd_value(&["CONFIG", "SET", name, value]);
    let text =
        crate::values::error_text(&got).unwrap_or_else(|| panic!("{k}: {name} {value}: {got:?}"));
    assert!(
        text.starts_with("ERR") && text.ends_with(tail),
        "{k}: {text}"
    );
    assert_eq!(srv.cmd_value(&["CONFIG", "GET", name]), before, "{k}");
}
