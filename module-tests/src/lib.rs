//! Integration-test harness for the `tally` Redis module.
//!
//! Every test in `module-tests/tests/*.rs` starts real server processes
//! (Redis and Valkey) on `127.0.0.1`, loads `libtally.so` into them and talks
//! to them with the [`redis`] crate (re-exported as `module_tests::redis`).
//!
//! # Typical test
//!
//! ```ignore
//! use module_tests::*;
//!
//! per_server!(set_then_lpush_is_wrongtype);
//! /// One `#[test]` per server kind: `set_then_lpush_is_wrongtype::redis`, `::redis8`,
//! /// `::valkey` (a kind missing from `TALLY_SERVERS`, or whose binary is missing,
//! /// prints "skipped" and passes, except under `CI=true`, where it fails).
//! fn set_then_lpush_is_wrongtype(kind: &ServerKind) {
//!     let srv = Server::start(kind); // loads the module
//!     assert_eq!(srv.cmd_value(&["SET", "k", "v"]), v_ok(), "{}", kind.name);
//!     assert_eq!(srv.cmd_value(&["GET", "k"]), v_bulk("v"));
//!     assert_eq!(srv.cmd_value(&["LPUSH", "k", "x"]),
//!         v_err("WRONGTYPE Operation against a key holding the wrong kind of value"));
//!     assert!(srv.is_alive());
//! }
//! ```
//!
//! Helpers every test file needs (clocks, pipelines, INFO fields, ACL users, replica
//! equality, the `TALLY_LONG` switch) belong here, not copied into test files.
//!
//! # Layout
//!
//! Everything below is re-exported at the crate root, so `use module_tests::*;` is
//! all a test needs.
//!
//! * [`server`] — [`ServerKind`], [`server_kinds`], [`ServerOptions`], [`Server`]
//!   (process, directory, connections, restarts), ports and directories.
//! * [`cluster`] — [`Cluster`], [`start_cluster`], [`start_cluster_with`].
//! * [`replication`] — [`wait_replica_synced`], [`assert_replica_equal`],
//!   [`compare_replica`], [`repl_offset`].
//! * [`values`] — expected replies (`v_*`) and reply readers ([`value_text`],
//!   [`value_bytes`], [`error_text`], [`map_pairs`], ...).
//! * [`dump`] — [`dump_keyspace`] ([`KeyDump`], [`KeyValue`]), [`scan_db_keys`],
//!   [`key_census`].
//! * [`info`] — [`parse_info`], [`info_i64`], [`info_field_i64`], [`usec_per_call`].
//! * [`commands`] — [`wait_until`], [`server_ms`], [`local_ms`], [`pipeline`],
//!   [`conn_value`], [`conn_as_user`], [`exists`], [`hgetall`], [`slot_fields`],
//!   [`strings`].
//! * [`stall`] — latency bounds less the time the machine took away: [`Lost`],
//!   [`StallWatch`], [`ping_held`], [`max_ping_held`], [`STALL_LIMIT_US`].
//! * [`table`] — the module's command table as the running server answers it:
//!   [`tally_commands`], [`tally_command_names`], [`tally_write_commands`], and
//!   [`assert_cases_cover`] (a cross-cutting test fails on a command without a case).
//! * [`workload`] — [`Rng`], [`long_run`].
//! * [`rank_model`] — [`RankModel`], the reference model of a leaderboard.
//! * [`per_server`] — the [`per_server!`] macro: one test case per server kind.
//!
//! # Expected replies ([`Value`] variants, redis crate 1.8)
//!
//! | server reply              | RESP2 connection ([`Server::conn`], [`Server::cmd_value`]) | RESP3 connection ([`Server::conn_resp3`], [`Server::cmd_value_resp3`]) |
//! |---------------------------|-----------------------------------|-----------------------------------|
//! | `+OK`                     | `Value::Okay` ([`v_ok`])          | `Value::Okay` ([`v_ok`])          |
//! | other simple string       | `Value::SimpleString` ([`v_simple`]) e.g. PING → `v_simple("PONG")` | same |
//! | integer                   | `Value::Int` ([`v_int`])          | `Value::Int` ([`v_int`])          |
//! | bulk string               | `Value::BulkString` ([`v_bulk`], [`v_bulk_bytes`]) | same |
//! | nil (`$-1`, `*-1`, `_`)   | `Value::Nil` ([`v_nil`])          | `Value::Nil` ([`v_nil`])          |
//! | array                     | `Value::Array` ([`v_arr`], [`v_bulks`]) | `Value::Array`              |
//! | map (HGETALL, CONFIG GET, module `reply_with_map`) | flat `Value::Array` of k, v, k, v | `Value::Map` ([`v_map`]) in server order |
//! | set (SMEMBERS, module `reply_with_set`) | `Value::Array`        | `Value::Set` ([`v_set`])          |
//! | double (ZSCORE, module `reply_with_double`) | `Value::BulkString` with the server's text, e.g. `v_bulk("1.5")` | `Value::Double` ([`v_double`]) |
//! | boolean                   | `Value::Int` 0/1                  | `Value::Boolean` ([`v_bool`])     |
//! | verbatim (INFO, ...)      | `Value::BulkString`               | `Value::VerbatimString`           |
//! | error reply               | `Value::ServerError` ([`v_err`]) — use [`error_text`] to get `"ERR syntax error"` | same |
//!
//! `cmd_value*` return error replies as values (they never panic on an error
//! *reply*, only on connection failures), so `assert_eq!(srv.cmd_value(..),
//! v_err("ERR syntax error"))` checks the exact error text. [`Server::cmd`]
//! returns `Result<Value, String>` with the full error text in `Err`.
//!
//! # Shared test helpers
//!
//! [`server_ms`] / [`local_ms`] (the server's / this machine's clock), [`pipeline`]
//! (one round trip, one reply per command), [`conn_value`] (a command on a connection
//! of your own), [`conn_as_user`] (a connection authenticated as a new ACL user),
//! [`exists`], [`hgetall`], [`slot_fields`], [`map_pairs`] (RESP2/RESP3 map replies as
//! pairs), [`info_i64`], [`assert_replica_equal`] / [`compare_replica`] (the one way to
//! check a replica), [`long_run`] (`TALLY_LONG`) and [`Rng`] (seeded splitmix64 for
//! reproducible workloads).
//!
//! # Environment
//!
//! * `TALLY_SERVERS` — `name=path,name=path` list of server binaries to test
//!   against (default: `redis=<redis-server on PATH>` plus
//!   `redis8=<repo>/.tools/bin/redis8-server` and
//!   `valkey=<repo>/.tools/bin/valkey-server` if they exist; `scripts/deps.sh`
//!   installs all three).
//! * `TALLY_MODULE` — module to load (default `<repo>/target/release/libtally.so`,
//!   built by `cargo build --release`).
//! * `TALLY_REDIS_CLI` — `redis-cli` used by [`start_cluster`] (default: on PATH).
//!
//! Paths in these variables may be absolute, bare names looked up on PATH
//! (`redis=redis-server`), or relative to the repository root
//! (`valkey=.tools/bin/valkey-server`).
//!
//! Server directories (config, log, RDB/AOF, nodes.conf) live under
//! `<repo>/target/module-tests-tmp/<test binary>/<test name>-<kind>-<n>/` and
//! are left there for debugging; the same path is wiped when it is reused.

pub use redis;
pub use redis::Value;

pub mod cluster;
pub mod commands;
pub mod dump;
pub mod events;
pub mod info;
pub mod per_server;
pub mod rank_model;
pub mod replication;
pub mod server;
pub mod stall;
pub mod table;
pub mod values;
pub mod workload;

pub use cluster::*;
pub use commands::*;
pub use dump::*;
pub use events::*;
pub use info::*;
pub use per_server::*;
pub use rank_model::*;
pub use replication::*;
pub use server::*;
pub use stall::*;
pub use table::*;
pub use values::*;
pub use workload::*;
