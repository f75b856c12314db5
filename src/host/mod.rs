//! The FFI layer, the only code with raw module API calls: the server around tally
//! (`server`: API check, clock, databases, role, command filter), what the server tells
//! it (`events`: keyspace and server events, the tracked names, `INFO tally`), keys
//! (`store`: hashes, sorted sets, scans, ACL, field TTLs), replication of effects
//! (`replicate`), replies (`reply`), the command table's registration (`cmdinfo`) and the
//! module configs (`config`).
//!
//! Owns: every raw call. May not touch: command logic.

pub mod cmdinfo;
pub mod config;
pub mod events;
pub mod replicate;
pub mod reply;
pub mod server;
pub mod store;
