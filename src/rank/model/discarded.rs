//! Totals no longer used, kept to be freed by the timer in steps: they may be dropped
//! inside a user's command or a keyspace event, where freeing a million members at once
//! would hold the server for tens of milliseconds.
//!
//! Owns: that list. May not touch: Redis (pure).

use super::ranked::RankedSet;
use super::totals::Totals;

/// What can be freed in steps.
pub trait FreedInSteps {
    fn is_empty(&self) -> bool;
    fn bytes(&self) -> usize;
    /// Frees about `work` members' worth; true once all is freed.
    fn free_step(&mut self, work: usize) -> bool;
}

impl FreedInSteps for Totals {
    fn is_empty(&self) -> bool {
        Totals::is_empty(self)
    }
    fn bytes(&self) -> usize {
        Totals::bytes(self)
    }
    fn free_step(&mut self, work: usize) -> bool {
        Totals::free_step(self, work)
    }
}

impl FreedInSteps for RankedSet {
    fn is_empty(&self) -> bool {
        RankedSet::is_empty(self)
    }
    fn bytes(&self) -> usize {
        RankedSet::bytes(self)
    }
    fn free_step(&mut self, work: usize) -> bool {
        RankedSet::free_step(self, work)
    }
}

/// See the module doc.
pub struct Discarded<T>(Vec<T>);

impl<T> Default for Discarded<T> {
    fn default() -> Self {
        Discarded(Vec::new())
    }
}

impl<T: FreedInSteps> Discarded<T> {
    /// Keeps `freed` to be freed in steps (nothing to keep if it is empty).
    pub fn push(&mut self, freed: T) {
        if !freed.is_empty() {
            self.0.push(freed);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.0.iter().map(T::bytes).sum()
    }

    /// Frees about `work` members' worth.
    pub fn free_step(&mut self, work: usize) {
        if let Some(last) = self.0.last_mut() {
            if last.free_step(work) {
                self.0.pop();
            }
        }
    }
}
