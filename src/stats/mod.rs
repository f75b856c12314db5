//! The statistics family (STATS): its pure model (`model`: periods, records, the read
//! cache of windows, REPORT's statistic) and its commands over native hashes (`commands`),
//! next to each other.

#[forbid(unsafe_code)]
pub mod model;

#[cfg(not(test))]
pub(crate) mod commands;
