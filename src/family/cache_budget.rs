//! The read caches as one budget: what the families keep in memory (each measured by its
//! [`Family::cache_bytes`](super::Family::cache_bytes): the counter mirrors, the STATS
//! windows) together holds at most `tally.cache-max-memory` bytes, and nothing while the
//! server is close to `maxmemory`.
//!
//! Why: module memory counts in `used_memory`, so a cache that grows makes the server
//! evict users' keys. Each cache counts its own bytes and, before it grows, asks what
//! the budget leaves it after the other; under memory pressure the budget is zero and
//! each cache empties itself at its next use.
//!
//! Owns: the budget rules and the INFO figures of the caches. May not touch: keys.

use crate::host::server::used_memory_ratio;

/// Above this share of `maxmemory` the caches give their memory back: the server evicts
/// keys at 1.0, and the caches must be gone well before.
const TIGHT_MEMORY_RATIO: f32 = 0.9;

/// True while the server is close to its `maxmemory` (never without one).
fn memory_is_tight() -> bool {
    used_memory_ratio() > TIGHT_MEMORY_RATIO
}

/// What the caches of the family with marker word `word` may hold now: the budget less
/// what the other families' caches hold, or nothing while memory is tight.
pub fn budget_of(word: &str) -> usize {
    if memory_is_tight() {
        return 0;
    }
    let others: usize = super::all()
        .iter()
        .filter(|family| family.marker_word != Some(word))
        .map(|family| (family.cache_bytes)())
        .sum();
    crate::host::config::cache_max_memory().saturating_sub(others)
}

/// What the STATS cache may hold now.
pub fn stats_budget() -> usize {
    budget_of(crate::layout::STATS)
}

/// Estimated bytes held by every family's read caches.
pub fn bytes() -> usize {
    super::all()
        .iter()
        .map(|family| (family.cache_bytes)())
        .sum()
}
