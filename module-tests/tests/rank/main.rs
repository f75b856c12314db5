//! Integration tests of the TSRANK family against real servers (every `server_kinds()`).
//!
//! * a seeded model-based workload (members, increments, `AT` across the window) checked
//!   against a reference model: TOP (count, OFFSET, WITHSCORES, WINDOW), SCORE, RANK, ties
//!   ordered as `ZREVRANGE` orders them, and `ZREVRANGE key 0 -1` equal to TOP;
//! * real-time expiry with tiny slots, exact at every moment;
//! * a slot of 200k members (`TALLY_LONG=1`: a million) expiring while another client PINGs
//!   (latency measured);
//! * replica equality, AOF/RDB reload equality, expiry resuming after restart and after
//!   promotion; DEL/UNLINK/EXPIRE/RENAME of the main key; errors with exact texts; RESP2
//!   and RESP3 shapes; ACL on derived keys; hash tags in cluster mode.
//!
//! Determinism: model tests use a 1h SLOT and `AT` timestamps well inside the window, so
//! they do not depend on the wall clock; real-time tests bracket each read between two
//! `TIME` calls and only assert when both give the same window.
//!
//! Files: `model.rs`, `expiry.rs`, `persistence.rs` (replication, reloads, keyspace
//! operations), `errors.rs`, `replies.rs`, `access.rs` (ACL, cluster mode); `rem.rs`
//! (TSRANK.REM and negative INCRBY), `history.rs` (TSRANK.HISTORY), `layout.rs` (the
//! meta's layouts, old boards migrated by their next write), `notify.rs` (keyspace
//! notifications); this file holds the shared error texts and reply helpers.

use module_tests::*;
use std::time::{Duration, Instant};

const OUTSIDE: &str = "ERR timestamp is outside the kept range";
const FUTURE: &str = "ERR timestamp is too far in the future";
const HOUR: i64 = 3_600_000;

mod access;
mod errors;
mod expiry;
mod history;
mod layout;
mod model;
mod notify;
mod persistence;
mod rem;
mod replies;

// ================================================================= helpers

fn members(v: &Value) -> Vec<String> {
    let Value::Array(items) = v else {
        panic!("not an array: {v:?}")
    };
    items
        .iter()
        .map(|m| value_text(m).expect("member"))
        .collect()
}

/// Keys matching `pattern`, sorted.
fn keys(srv: &Server, pattern: &str) -> Vec<String> {
    let mut k = members(&srv.cmd_value(&["KEYS", pattern]));
    k.sort();
    k
}
