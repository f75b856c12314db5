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
//! Files: `capacity.rs` (boards with CAPACITY), `model.rs`, `around.rs` (AROUND, RANK ... TIES and MSCORE against the model), `expiry.rs`, `persistence.rs` (replication, reloads, keyspace
//! operations), `errors.rs`, `replies.rs`, `access.rs` (ACL, cluster mode); `rem.rs`
//! (TSRANK.REM and negative INCRBY), `history.rs` (TSRANK.HISTORY), `layout.rs` (the
//! meta's layouts, old boards migrated by their next write), `notify.rs` (keyspace
//! notifications); this file holds the shared error texts and reply helpers.

use module_tests::*;
use std::time::{Duration, Instant};

const OUTSIDE: &str = "ERR timestamp is outside the kept range";
const FUTURE: &str = "ERR timestamp is too far in the future";
const HOUR: i64 = 3_600_000;
const NO_HASH_TAG: &str = "ERR in cluster mode a leaderboard key must contain a hash tag, e.g. '{board}', so that its derived keys share its slot";

mod access;
mod around;
mod capacity;
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

/// A new board (24 h window, 1 h slots) for a seeded workload: its generator, the
/// server's clock when it was created and the slot index of that moment.
fn seeded_board(srv: &Server, seed: u64, board: &str) -> (Rng, i64, i64) {
    let rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    assert_eq!(
        srv.cmd_value(&["TSRANK.CREATE", board, "WINDOW", "24h", "SLOT", "1h"]),
        v_ok()
    );
    let t0 = server_ms(srv);
    (rng, t0, t0 / HOUR)
}

/// A one-node cluster holding every slot, its state ok.
fn cluster_node(kind: &ServerKind) -> Server {
    let node = Server::start_with(kind, ServerOptions::new().cluster(true));
    let mut cmd = strings(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    if node.cmd(&cmd).is_err() {
        cmd = strings(&["CLUSTER", "ADDSLOTS"]);
        cmd.extend((0..16384).map(|i| i.to_string()));
        assert_eq!(node.cmd_value(&cmd), v_ok(), "{}", kind.name);
    }
    assert!(wait_until(Duration::from_secs(10), || {
        value_text(&node.cmd_value(&["CLUSTER", "INFO"]))
            .unwrap_or_default()
            .contains("cluster_state:ok")
    }));
    node
}

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
