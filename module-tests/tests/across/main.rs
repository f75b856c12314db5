//! Reads across keys: TSCOUNTER.MSUM (each window summed over several counters) and
//! STATS.MGET / STATS.MQUANTILE (one summary of several statistics objects), and
//! STATS.ADD ... REPORT ... BY. Seeded random workloads are checked against models (a
//! brute-force SUM per key for MSUM, the union of every value for MGET and MQUANTILE);
//! then exact replies and errors, key declarations and key permissions.
//!
//! Files: `msum.rs`, `mget.rs`, `report.rs`; the cluster case is `across_cluster.rs`.

mod mget;
mod msum;
mod report;
