//! Whole-keyspace capture for equality checks ([`dump_keyspace`]: replica == primary,
//! reload == before, a refused command wrote nothing) and key listings ([`scan_db_keys`],
//! [`key_census`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use redis::Value;

use crate::commands::pipeline;
use crate::info::parse_info;
use crate::server::Server;
use crate::values::{items, q, value_bytes, value_text};

/// Contents of one key, as captured by [`dump_keyspace`]. All byte strings
/// are rendered losslessly with [`escape_bytes`] (valid UTF-8 stays readable).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyValue {
    /// `GET`.
    String(String),
    /// `HGETALL`, field/value pairs sorted by field.
    Hash(Vec<(String, String)>),
    /// `ZRANGE key 0 -1 WITHSCORES` in rank order: (member, score text as the
    /// server formats it on RESP2).
    ZSet(Vec<(String, String)>),
    /// `SMEMBERS`, sorted.
    Set(Vec<String>),
    /// `LRANGE key 0 -1`.
    List(Vec<String>),
    /// Anything else (streams, module types): the `DUMP` payload.
    Dump(String),
}

/// One key as captured by [`dump_keyspace`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KeyDump {
    /// Output of `TYPE` (`string`, `hash`, `zset`, ... or a module type name).
    pub key_type: String,
    /// Whether the key has a TTL (`PTTL >= 0`). The TTL value itself is not
    /// compared because it keeps changing.
    pub has_expire: bool,
    /// Full contents.
    pub value: KeyValue,
}

/// Lossless, readable rendering of bytes: valid UTF-8 is kept (with `\` →
/// `\\` and control characters as `\xNN`); invalid bytes become `\xNN`.
pub fn escape_bytes(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        for ch in chunk.valid().chars() {
            match ch {
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                    let _ = write!(out, "\\x{:02x}", c as u32);
                }
                c => out.push(c),
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out
}

fn flatten_pairs(v: Value) -> Vec<Value> {
    // RESP3 WITHSCORES replies are arrays of [member, score] pairs.
    items(v)
        .into_iter()
        .flat_map(|x| match x {
            Value::Array(inner) => inner,
            other => vec![other],
        })
        .collect()
}

/// Captures every key of every non-empty DB (from `INFO keyspace`) with its
/// type, TTL presence and full contents, keyed `"db<N>:<escaped key>"`
/// (e.g. `"db0:user:1"`). Compare two dumps with `assert_eq!` to prove a
/// replica equals its primary or a reload equals the state before.
///
/// Pass a RESP2 connection (zset scores are then the server's own text).
/// The connection is left on `SELECT 0`.
pub fn dump_keyspace(conn: &mut redis::Connection) -> BTreeMap<String, KeyDump> {
    let info = value_text(&q(conn, &[b"INFO", b"keyspace"])).unwrap_or_default();
    let dbs: Vec<u32> = parse_info(&info)
        .keys()
        .filter_map(|k| k.strip_prefix("db")?.parse().ok())
        .collect();
    let mut out = BTreeMap::new();
    for db in dbs {
        for key in scan_db_keys(conn, db) {
            let k = key.as_slice();
            let key_type = value_text(&q(conn, &[b"TYPE", k])).unwrap_or_default();
            if key_type == "none" {
                continue; // expired meanwhile
            }
            let pttl = match q(conn, &[b"PTTL", k]) {
                Value::Int(i) => i,
                other => panic!("PTTL: {other:?}"),
            };
            if pttl == -2 {
                continue;
            }
            let esc = |v: &Value| escape_bytes(&value_bytes(v).unwrap_or_default());
            let pairs = |v: Vec<Value>| -> Vec<(String, String)> {
                v.chunks(2)
                    .map(|c| {
                        let score = match &c[1] {
                            Value::Double(d) => d.to_string(),
                            other => esc(other),
                        };
                        (esc(&c[0]), score)
                    })
                    .collect()
            };
            let value = match key_type.as_str() {
                "string" => KeyValue::String(esc(&q(conn, &[b"GET", k]))),
                "hash" => {
                    let mut p = pairs(items(q(conn, &[b"HGETALL", k])));
                    p.sort();
                    KeyValue::Hash(p)
                }
                "zset" => KeyValue::ZSet(pairs(flatten_pairs(q(
                    conn,
                    &[b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"],
                )))),
                "set" => {
                    let mut m: Vec<String> =
                        items(q(conn, &[b"SMEMBERS", k])).iter().map(esc).collect();
                    m.sort();
                    KeyValue::Set(m)
                }
                "list" => KeyValue::List(
                    items(q(conn, &[b"LRANGE", k, b"0", b"-1"]))
                        .iter()
                        .map(esc)
                        .collect(),
                ),
                _ => KeyValue::Dump(esc(&q(conn, &[b"DUMP", k]))),
            };
            out.insert(
                format!("db{db}:{}", escape_bytes(k)),
                KeyDump {
                    key_type,
                    has_expire: pttl >= 0,
                    value,
                },
            );
        }
    }
    q(conn, &[b"SELECT", b"0"]);
    out
}

/// Every key of database `db`, by `SCAN` (sorted, deduplicated). Leaves the
/// connection on `db`. On a primary, `SCAN` also deletes the logically expired
/// keys it meets (lazy expiry), so the list holds only live keys.
pub fn scan_db_keys(conn: &mut redis::Connection, db: u32) -> Vec<Vec<u8>> {
    let dbs = db.to_string();
    q(conn, &[b"SELECT", dbs.as_bytes()]);
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut cursor = b"0".to_vec();
    loop {
        let mut r = items(q(conn, &[b"SCAN", &cursor, b"COUNT", b"1000"])).into_iter();
        cursor = value_bytes(&r.next().expect("SCAN cursor")).expect("SCAN cursor");
        keys.extend(
            items(r.next().expect("SCAN keys"))
                .iter()
                .filter_map(value_bytes),
        );
        if cursor == b"0" {
            break;
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

/// One key of a [`key_census`]: its `TYPE` and, for hashes, whether it has the
/// `_tally` field that marks counters, statistics objects and leaderboard metas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyKind {
    /// Output of `TYPE` (`none` if the key vanished between SCAN and TYPE).
    pub key_type: String,
    /// A hash with a `_tally` field (whatever its value).
    pub has_tally_field: bool,
}

/// Every key of database `db` with its [`KeyKind`] (SCAN, then one pipeline of
/// `TYPE` + `HEXISTS key _tally`). Leaves the connection on `db`.
pub fn key_census(conn: &mut redis::Connection, db: u32) -> BTreeMap<Vec<u8>, KeyKind> {
    let keys = scan_db_keys(conn, db);
    let mut cmds: Vec<Vec<&[u8]>> = Vec::new();
    for k in &keys {
        cmds.push(vec![b"TYPE", k]);
        cmds.push(vec![b"HEXISTS", k, b"_tally"]);
    }
    let replies = if cmds.is_empty() {
        Vec::new()
    } else {
        pipeline(conn, &cmds)
    };
    keys.into_iter()
        .zip(replies.chunks(2))
        .map(|(k, r)| {
            let key_type = value_text(&r[0]).unwrap_or_default();
            let has_tally_field = r[1] == Value::Int(1);
            (
                k,
                KeyKind {
                    key_type,
                    has_tally_field,
                },
            )
        })
        .collect()
}

impl Server {
    /// [`dump_keyspace`] over a fresh RESP2 connection.
    pub fn dump_keyspace(&self) -> BTreeMap<String, KeyDump> {
        dump_keyspace(&mut self.conn())
    }
}
