//! The data structures tally writes itself, each where a std or well-kept crate type
//! costs a bound the module keeps (its file says which, measured by `measured.rs`): a hash
//! map that grows one shard at a time (`sharded_map`), a map that remembers the entry it
//! found last (`memo_map`), the expiry schedule's queue by due time (`due_queue`) and the
//! names tally holds state for (`name_set`). Short lists on the stack are `smallvec`'s.
//!
//! Owns: these structures. May not touch: Redis (pure).

pub mod due_queue;
#[cfg(test)]
mod measured;
pub mod memo_map;
pub mod name_set;
pub mod sharded_map;

/// Where database `d` is after SWAPDB `a` `b` (for the models of the tests).
#[cfg(test)]
fn swapped(d: i32, a: i32, b: i32) -> i32 {
    match d {
        d if d == a => b,
        d if d == b => a,
        d => d,
    }
}
