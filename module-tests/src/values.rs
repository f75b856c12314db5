//! Expected replies (`v_int`, `v_bulk`, `v_err`, ...) and readers of actual replies
//! (`value_text`, `error_text`, `map_pairs`, ...). See the table in the crate docs.

use redis::ConnectionLike as _;
use redis::Value;

/// Expected integer reply: `Value::Int`.
pub fn v_int(i: i64) -> Value {
    Value::Int(i)
}

/// Expected bulk-string reply: `Value::BulkString`.
pub fn v_bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

/// Expected binary bulk-string reply: `Value::BulkString`.
pub fn v_bulk_bytes(b: &[u8]) -> Value {
    Value::BulkString(b.to_vec())
}

/// Expected array reply: `Value::Array`.
pub fn v_arr(items: Vec<Value>) -> Value {
    Value::Array(items)
}

/// Expected array of bulk strings, e.g. `v_bulks(&["a", "1"])`.
pub fn v_bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| v_bulk(s)).collect())
}

/// Expected nil (RESP2 `$-1` / `*-1`, RESP3 `_`): `Value::Nil`.
pub fn v_nil() -> Value {
    Value::Nil
}

/// Expected `+OK`: `Value::Okay` (the crate maps the simple string "OK" to it).
pub fn v_ok() -> Value {
    Value::Okay
}

/// Expected simple-string reply other than OK (e.g. `PONG`): `Value::SimpleString`.
pub fn v_simple(s: &str) -> Value {
    Value::SimpleString(s.to_string())
}

/// The server's error for a command on a key of another type (tally answers it too, for
/// a key that is not its object).
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// True if `v` is a `WRONGTYPE` error reply.
pub fn is_wrongtype(v: &Value) -> bool {
    error_text(v).is_some_and(|e| e.starts_with("WRONGTYPE"))
}

/// Expected RESP3 double: `Value::Double` (on RESP2 a double is a bulk
/// string: use `v_bulk("1.5")`).
pub fn v_double(d: f64) -> Value {
    Value::Double(d)
}

/// Expected RESP3 map, in the order the server sends it: `Value::Map` (on
/// RESP2 the same reply is a flat `v_arr(vec![k1, v1, k2, v2])`).
pub fn v_map(pairs: Vec<(Value, Value)>) -> Value {
    Value::Map(pairs)
}

/// Expected RESP3 set: `Value::Set` (on RESP2 an array).
pub fn v_set(items: Vec<Value>) -> Value {
    Value::Set(items)
}

/// Expected RESP3 boolean: `Value::Boolean` (on RESP2 an integer 0/1).
pub fn v_bool(b: bool) -> Value {
    Value::Boolean(b)
}

/// Expected error reply with its full text, e.g. `v_err("ERR syntax error")`
/// or `v_err("WRONGTYPE Operation against a key holding the wrong kind of
/// value")`: builds the same `Value::ServerError` the client produces by
/// parsing `-<text>\r\n`.
pub fn v_err(text: &str) -> Value {
    let raw = format!("-{text}\r\n");
    redis::parse_redis_value(raw.as_bytes())
        .unwrap_or_else(|e| panic!("cannot build error value for {text:?}: {e}"))
}

/// Full text of a server error (`"<CODE> <detail>"`), e.g. `"ERR syntax error"`.
pub fn server_error_text(e: &redis::ServerError) -> String {
    match e.details() {
        Some(d) => format!("{} {d}", e.code()),
        None => e.code().to_string(),
    }
}

/// Full error text if `v` is an error reply (`Value::ServerError`), else None.
pub fn error_text(v: &Value) -> Option<String> {
    match v {
        Value::ServerError(e) => Some(server_error_text(e)),
        _ => None,
    }
}

/// Full server error text of a `RedisError` (e.g. from the cluster client or
/// `cmd.query`), `"<CODE> <detail>"`; falls back to its Display form for
/// non-server errors.
pub fn redis_error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(c), Some(d)) => format!("{c} {d}"),
        (Some(c), None) => c.to_string(),
        _ => e.to_string(),
    }
}

/// The bytes of a string-like reply (bulk, simple, verbatim, OK), if any.
pub fn value_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.clone().into_bytes()),
        Value::Okay => Some(b"OK".to_vec()),
        Value::VerbatimString { text, .. } => Some(text.clone().into_bytes()),
        _ => None,
    }
}

/// A string rendering of scalar replies: bulk/simple/verbatim text (lossy
/// UTF-8), `OK`, integers, doubles (Rust `{}` formatting), booleans.
/// `None` for nil, aggregates and errors.
pub fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::Int(i) => Some(i.to_string()),
        Value::Double(d) => Some(d.to_string()),
        Value::Boolean(b) => Some(b.to_string()),
        other => value_bytes(other).map(|b| String::from_utf8_lossy(&b).into_owned()),
    }
}

/// `[member, total, ...]` pairs of a flat reply: `TSRANK.TOP ... WITHSCORES` in RESP2,
/// `ZREVRANGE ... WITHSCORES` (a score such as `5` or `5.0` reads as the integer 5).
pub fn member_totals(v: &Value) -> Vec<(String, i64)> {
    let Value::Array(items) = v else {
        panic!("not an array: {v:?}")
    };
    items
        .chunks(2)
        .map(|c| {
            let total: f64 = value_text(&c[1]).expect("score").parse().expect("number");
            (value_text(&c[0]).expect("member"), total as i64)
        })
        .collect()
}

/// Field/value pairs of a map reply, in server order: a RESP3 `Value::Map` or
/// the RESP2 flat array `[k1, v1, k2, v2, ...]`.
pub fn map_pairs(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Map(m) => m
            .iter()
            .map(|(k, v)| (value_text(k).unwrap(), v.clone()))
            .collect(),
        Value::Array(a) => a
            .chunks(2)
            .map(|c| (value_text(&c[0]).unwrap(), c[1].clone()))
            .collect(),
        other => panic!("expected a map reply, got {other:?}"),
    }
}

pub(crate) fn items(v: Value) -> Vec<Value> {
    match v {
        Value::Array(a) | Value::Set(a) => a,
        Value::Map(m) => m.into_iter().flat_map(|(k, v)| [k, v]).collect(),
        Value::Nil => Vec::new(),
        other => panic!("expected an aggregate reply, got {other:?}"),
    }
}

pub(crate) fn q(conn: &mut redis::Connection, args: &[&[u8]]) -> Value {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(*a);
    }
    match conn.req_command(&cmd) {
        Ok(Value::ServerError(e)) => panic!(
            "{:?}: {}",
            args.iter()
                .map(|a| String::from_utf8_lossy(a))
                .collect::<Vec<_>>(),
            server_error_text(&e)
        ),
        Ok(v) => v,
        Err(e) => panic!("dump_keyspace: connection error: {e}"),
    }
}

/// What an error about a duration's form says after `ERR invalid duration '<text>': `.
pub const DURATION_FORM: &str = "a duration is a positive integer of milliseconds or with a \
     unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)";

/// What an error about a duration's length says after `ERR invalid duration '<text>': `.
pub const DURATION_MOST: &str = "a duration is at most 10000 years (315576000000000ms)";

/// The error of a duration whose form is wrong (`5x`, `0`, `5M`).
pub fn bad_duration(text: &str) -> String {
    format!("ERR invalid duration '{text}': {DURATION_FORM}")
}

/// The error of a duration longer than 10,000 years.
pub fn long_duration(text: &str) -> String {
    format!("ERR invalid duration '{text}': {DURATION_MOST}")
}
