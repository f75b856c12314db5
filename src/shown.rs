//! Replies formatted once: a summary map (a count, then eight named doubles, each with its
//! shortest text) that a family builds and caches and the reply layer sends as it is.
//! Shared by the statistics family, which builds it, and `host::reply`, which sends it,
//! so neither imports the other.

use std::rc::Rc;

/// A count, then eight named doubles in reply order, each with its text already made.
#[derive(Debug, PartialEq)]
pub struct ShownSummary {
    pub count: u64,
    pub doubles: [(&'static str, f64, Rc<str>); 8],
}
