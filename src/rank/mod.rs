//! The leaderboard family (TSRANK): its pure model (`model`: settings, key names, the
//! algorithms over a board store, what the family keeps in memory) and its commands over
//! native keys (`commands`), next to each other.

#[forbid(unsafe_code)]
pub mod model;

#[cfg(not(test))]
pub(crate) mod commands;
