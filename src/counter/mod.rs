//! The counter family (TSCOUNTER, with its rate limits LIMIT and MLIMIT): its pure model
//! (`model`: settings, slots, windows, the limit's decision, the read mirrors) and its
//! commands over native hashes (`commands`), next to each other.

#[forbid(unsafe_code)]
pub mod model;

#[cfg(not(test))]
pub(crate) mod commands;
