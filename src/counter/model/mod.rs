//! Pure multi-resolution counter logic (TSCOUNTER). No Redis imports: the algorithm works
//! against the small [`SlotStore`] trait, implemented over a native hash by the command
//! layer and over a `BTreeMap` in the unit tests.
//!
//! Layout of one counter in its hash:
//! * `_tally`: `counter <res>:<samples> ...`, the settings (finest resolution first);
//! * `_state`: `<ref> <d>:<n> ...`, per resolution the count `n` of stored slots and a
//!   lower bound `lo` of their slot indexes, written as `d = slot_index(ref) - lo` from a
//!   reference time `ref` (ms) so the field stays short: a hash keeps the compact listpack
//!   encoding only while every value is at most 64 bytes. Invariant: every stored slot of
//!   a resolution lies in `lo .. lo + samples`. It lets trimming find old slots without
//!   scanning the hash: at most `samples` probes, and usually one;
//!   A resolution that has packed runs adds `:<s>`, `s` the runs from the one holding
//!   `lo` to the first whose slots may still be fields of their own (`d:n:s`); without it
//!   that is the run holding `lo` (what a counter of 0.1.0 stores);
//! * `<res>:p<first index>`: a packed run of old slots (see `packed.rs`, `packed_slots.rs`);
//! * `<res>:<slot index>`: the count of one slot, e.g. `1m:29396160` for the minute that
//!   starts at 29396160 × 60000 ms. Only non-zero counts are stored. The index, not the
//!   start in ms, keeps fields short: a sparse ring counter fits in under 400 bytes.
//!
//! The parts, by idea: `slot_store` (where the counts live), `state` (the stored text of
//! the settings and bookkeeping), `fields` (resolution lists and slot field names),
//! `increment`, `trim` and `reads` (what the commands compute), `ordered` (the in-memory
//! ordered copy the read mirrors keep).
//!
//! Owns: counter arithmetic and its stored text. May not touch: Redis (pure; the command
//! layer provides the hash through [`SlotStore`]).

use crate::error::{Error, Result};

pub use crate::layout::COUNTER_STATE_FIELD as STATE_FIELD;

pub const MAX_RESOLUTIONS: usize = 16;

/// Most slots a counter keeps: the samples of its resolutions added up (2^20: a day of
/// seconds, a year of minutes and ten years of hours fit together). Old slots are packed
/// 240 to a field (`packed`), so a full counter is a few thousand fields, and a window's
/// whole runs are summed from their headers.
pub const MAX_SAMPLES: i64 = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolution {
    pub ms: i64,
    pub samples: i64,
}

impl Resolution {
    /// Time span kept by this resolution.
    pub fn span(&self) -> i64 {
        self.ms.saturating_mul(self.samples)
    }
}

/// Per-resolution bookkeeping, see the module comment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Track {
    pub lo: i64,
    pub n: i64,
    /// The first slot index whose run may still hold slots in fields of their own: every
    /// run before `max(sealed, run_first(lo))` that may be packed has been packed (see
    /// `seal.rs`).
    pub sealed: i64,
}

#[derive(Debug, PartialEq, Eq)]
pub struct Counter {
    pub resolutions: Vec<Resolution>,
    pub tracks: Vec<Track>,
    /// Reference time of the stored state (see the module comment).
    pub reference: i64,
}

impl Counter {
    /// The heap bytes this counter holds (its two vectors), each allocation counted with
    /// `per_allocation` bytes of the allocator's own.
    pub fn heap_bytes(&self, per_allocation: usize) -> usize {
        let used = |bytes| allocated(bytes, per_allocation);
        used(self.resolutions.capacity() * std::mem::size_of::<Resolution>())
            + used(self.tracks.capacity() * std::mem::size_of::<Track>())
    }
}

/// The bytes of an allocation of `bytes` with the allocator's own `per_allocation` (none
/// for an empty one: nothing is allocated).
fn allocated(bytes: usize, per_allocation: usize) -> usize {
    if bytes == 0 {
        0
    } else {
        bytes + per_allocation
    }
}

impl Clone for Counter {
    fn clone(&self) -> Counter {
        Counter {
            resolutions: self.resolutions.clone(),
            tracks: self.tracks.clone(),
            reference: self.reference,
        }
    }

    /// Reuses the vectors (a mirrored counter is copied back after every write).
    fn clone_from(&mut self, source: &Counter) {
        self.resolutions.clone_from(&source.resolutions);
        self.tracks.clone_from(&source.tracks);
        self.reference = source.reference;
    }
}

/// The finest of `resolutions` whose kept span covers `window`.
pub fn finest_covering(resolutions: &[Resolution], window: i64) -> Result<Resolution> {
    for &resolution in resolutions {
        if resolution.span() >= window {
            return Ok(resolution);
        }
    }
    let longest = resolutions.iter().map(|r| r.span()).max().unwrap_or(0);
    Err(window_too_long(window, longest))
}

/// The error of a window no resolution spans; says how long a window may be.
#[cold]
fn window_too_long(window: i64, longest: i64) -> Error {
    Error::Invalid(format!(
        "window '{}' is longer than any resolution keeps (at most {})",
        crate::args::format_duration(window),
        crate::args::format_duration(longest)
    ))
}

impl Counter {
    pub fn new(resolutions: Vec<Resolution>) -> Self {
        let tracks = vec![Track::default(); resolutions.len()];
        Counter {
            resolutions,
            tracks,
            reference: 0,
        }
    }

    pub fn stored_slots(&self) -> i64 {
        self.tracks
            .iter()
            .fold(0i64, |sum, t| sum.saturating_add(t.n))
    }

    /// The finest resolution whose kept span covers `window`.
    pub fn resolution_for(&self, window: i64) -> Result<Resolution> {
        finest_covering(&self.resolutions, window)
    }
}

mod across;
mod fields;
mod increment;
pub mod limit;
pub mod mirrors;
mod ordered;
pub mod packed;
pub mod packed_slots;
mod reads;
mod recent_writes;
mod seal;
mod slot_store;
mod state;
mod trim;
pub use across::{add_sums, distinct_names, finish_sums};
pub use fields::{
    format_resolutions, parse_resolution_text, parse_resolutions, parse_slot_field,
    push_slot_field, slot_field,
};
pub use ordered::OrderedSlots;
pub use reads::Extent;
pub use recent_writes::{HotWrites, RecentWrites, HOT_WRITES_PER_SECOND};
pub use slot_store::{collect_ordered, collect_ordered_sealed, SlotStore};
pub use trim::Trimmed;

#[cfg(test)]
mod tests;
