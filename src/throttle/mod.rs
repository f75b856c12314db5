//! The throttle family (TSTHROTTLE, and redis-cell's CL.THROTTLE): its pure model
//! (`model`: the GCRA decision and the replies' rounding) and its commands over native
//! strings (`commands`), next to each other.

#[forbid(unsafe_code)]
pub mod model;

#[cfg(not(test))]
pub(crate) mod commands;
