//! A leaderboard's settings and slot range as its meta hash stores them, and the
//! arithmetic of its window over them. Pure: no Redis imports.

use crate::args::{format_duration, parse_i64, MAX_DURATION_MS};
use crate::error::{Error, Result};
use crate::layout;
use crate::window::{first_kept, leaves_at, slot_index};

/// At most this many slots in a window.
pub const MAX_SLOTS: i64 = 10_000;
/// The largest `CAPACITY` of a board: members kept per slot. A write that finds the
/// order of a full slot missing from memory (after a restart or a failover) reads the
/// slot once, so the limit bounds that read.
pub const MAX_CAPACITY: i64 = 100_000;
/// A meta's `hi - lo` stays below this many windows. Every slot index in between may be
/// probed by a read, so a span that does not fit its window is not a leaderboard (a forged
/// `rank 10000 1 0 1000000` would make every TOP walk a million names). Tally never writes
/// one: a write that would stretch the span this far waits for expiry (TRYAGAIN).
pub const SPAN_WINDOWS: i64 = 2;

/// How a meta hash stored its settings and slot range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaLayout {
    /// `_tally` = `rank <window> <slot>`, `_slots` = `<lo> <hi>`.
    Current,
    /// `_tally` = `rank <window> <slot> <lo> <hi>` and no `_slots` (the first layout):
    /// still read; the next write of the range migrates it to [`MetaLayout::Current`].
    FourNumberMarker,
}

/// Settings and slot bookkeeping of one leaderboard, stored in its meta hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub window: i64,
    pub slot: i64,
    /// Every existing slot hash has an index in `lo ..= hi` (none when `hi < lo`).
    pub lo: i64,
    pub hi: i64,
    /// Members kept per slot (`CAPACITY`), 0 for an exact board (see `crate::rank::model::capacity`).
    pub capacity: i64,
}

/// Checks `WINDOW`/`SLOT` settings. Both are durations (at most [`MAX_DURATION_MS`]);
/// parsed arguments always are, a stored meta is checked again here.
pub fn validate_settings(window: i64, slot: i64) -> Result<()> {
    if let Some(too_long) = [window, slot].into_iter().find(|&d| d > MAX_DURATION_MS) {
        return Err(Error::InvalidDuration(format_duration(too_long)));
    }
    if window <= 0 || slot <= 0 || window % slot != 0 {
        return Err(Error::Invalid(format!(
            "WINDOW ({}) must be a whole multiple of SLOT ({})",
            format_duration(window),
            format_duration(slot)
        )));
    }
    if window / slot > MAX_SLOTS {
        return Err(Error::Invalid(format!(
            "WINDOW can hold at most {MAX_SLOTS} slots"
        )));
    }
    Ok(())
}

impl Meta {
    /// A new, empty leaderboard (settings must have been validated).
    pub fn new(window: i64, slot: i64) -> Meta {
        Meta {
            window,
            slot,
            lo: 0,
            hi: -1,
            capacity: 0,
        }
    }

    /// A new, empty board that keeps at most `capacity` members per slot (0: exact).
    pub fn with_capacity(window: i64, slot: i64, capacity: i64) -> Meta {
        Meta {
            capacity,
            ..Meta::new(window, slot)
        }
    }

    /// True for a board created with `CAPACITY` (approximate once a slot overflows).
    pub fn is_bounded(&self) -> bool {
        self.capacity > 0
    }

    /// Number of slots in the window.
    pub fn slots(&self) -> i64 {
        (self.window / self.slot.max(1)).max(1)
    }

    pub fn is_empty(&self) -> bool {
        self.hi < self.lo
    }

    /// Oldest slot index in the window at `now`.
    pub fn first_kept(&self, now: i64) -> i64 {
        first_kept(now, self.slot, self.slots())
    }

    /// Slot indexes that have left the window at `now` but may still have a slot hash
    /// (their counts are not fully subtracted yet): `lo ..= end`, if any.
    pub fn pending_range(&self, now: i64) -> Option<(i64, i64)> {
        let end = self.hi.min(self.first_kept(now).saturating_sub(1));
        (self.lo <= end).then_some((self.lo, end))
    }

    /// Slot indexes in the window at `now` that may have a slot hash.
    pub fn live_range(&self, now: i64) -> Option<(i64, i64)> {
        let start = self.lo.max(self.first_kept(now));
        let end = self.hi.min(slot_index(now, self.slot));
        (start <= end).then_some((start, end))
    }

    /// Records a write to slot `index`; true if the bookkeeping changed.
    pub fn note_write(&mut self, index: i64) -> bool {
        if self.is_empty() {
            self.lo = index;
            self.hi = index;
            return true;
        }
        let before = (self.lo, self.hi);
        self.lo = self.lo.min(index);
        self.hi = self.hi.max(index);
        before != (self.lo, self.hi)
    }

    /// True if the slot indexes `lo ..= hi` span less than [`SPAN_WINDOWS`] windows.
    pub fn span_fits(&self) -> bool {
        self.is_empty()
            || self.hi.saturating_sub(self.lo) < self.slots().saturating_mul(SPAN_WINDOWS)
    }

    /// When the oldest possibly existing slot leaves the window (`None`: no slot).
    pub fn next_due(&self) -> Option<i64> {
        (!self.is_empty()).then(|| leaves_at(self.lo, self.slot, self.slots()))
    }

    /// The `_tally` field's value: family and settings (never changes after CREATE):
    /// `rank <window> <slot>`, and ` <capacity>` for a board created with `CAPACITY`
    /// (an exact board's text stays what earlier releases wrote and read).
    pub fn marker(&self) -> String {
        let settings = match self.capacity {
            0 => format!("{} {}", self.window, self.slot),
            capacity => format!("{} {} {capacity}", self.window, self.slot),
        };
        layout::marker(layout::RANK, &settings)
    }

    /// The `_slots` field's value: the range of slot indexes that may have a slot hash.
    pub fn slots_value(&self) -> String {
        format!("{} {}", self.lo, self.hi)
    }

    /// A meta from the `_tally` value and the `_slots` value (if the field exists), and
    /// the layout they were stored in; `None` if they do not make a valid leaderboard
    /// meta (see the module comment: forged or garbage fields, a span that does not fit).
    pub fn from_fields(marker: &[u8], slots: Option<&[u8]>) -> Option<(Meta, MetaLayout)> {
        let settings = layout::settings_of(marker, layout::RANK)?.as_bytes();
        let (meta, layout) = match slots {
            Some(slots) => {
                let (window, slot, capacity) = match numbers(settings) {
                    Some([window, slot]) => (window, slot, 0),
                    None => {
                        let [window, slot, capacity] = numbers(settings)?;
                        if !(1..=MAX_CAPACITY).contains(&capacity) {
                            return None;
                        }
                        (window, slot, capacity)
                    }
                };
                let [lo, hi] = numbers(slots)?;
                (
                    Meta {
                        window,
                        slot,
                        lo,
                        hi,
                        capacity,
                    },
                    MetaLayout::Current,
                )
            }
            None => {
                let [window, slot, lo, hi] = numbers(settings)?;
                let meta = Meta {
                    window,
                    slot,
                    lo,
                    hi,
                    capacity: 0,
                };
                (meta, MetaLayout::FourNumberMarker)
            }
        };
        if validate_settings(meta.window, meta.slot).is_err() || !meta.span_fits() {
            return None;
        }
        Some((meta, layout))
    }

    /// Slot indexes among the latest `slots` slots of the window at `now` that may have a
    /// slot hash (`lo ..= hi`, never a slot that has left the window), if any.
    pub fn recent_range(&self, now: i64, slots: i64) -> Option<(i64, i64)> {
        let current = slot_index(now, self.slot);
        let start = current
            .saturating_sub(slots.saturating_sub(1))
            .max(self.lo)
            .max(self.first_kept(now));
        let end = current.min(self.hi);
        (slots > 0 && start <= end).then_some((start, end))
    }

    /// Number of slots in `TOP ... WINDOW dur`: a multiple of SLOT, at most WINDOW.
    pub fn sub_window_slots(&self, dur: i64) -> Result<i64> {
        if dur % self.slot != 0 || dur > self.window {
            return Err(Error::Invalid(format!(
                "WINDOW must be a multiple of the slot ({}) of at most {} slots ({})",
                format_duration(self.slot),
                self.slots(),
                format_duration(self.window)
            )));
        }
        Ok(dur / self.slot)
    }
}

/// Prefix of the meta hash's field that holds a slot's error on a board with `CAPACITY`:
/// `_error <slot index>` -> the largest count evicted from the slot (absent: 0).
pub const ERROR_FIELD_PREFIX: &[u8] = b"_error ";

/// The meta hash's field holding the error of slot `index` (see [`ERROR_FIELD_PREFIX`]).
pub fn error_field(index: i64) -> Vec<u8> {
    let mut name = ERROR_FIELD_PREFIX.to_vec();
    name.extend_from_slice(index.to_string().as_bytes());
    name
}

/// A slot's error as its meta field holds it: a value that is not a non-negative integer
/// (a user's edit) counts as 0.
pub fn parse_error(value: &[u8]) -> i64 {
    parse_i64(value).unwrap_or(0).max(0)
}

/// Checks a `CAPACITY` argument: members kept per slot, 1 to [`MAX_CAPACITY`].
pub fn validate_capacity(capacity: i64) -> Result<()> {
    if !(1..=MAX_CAPACITY).contains(&capacity) {
        return Err(Error::Invalid(format!(
            "CAPACITY must be an integer from 1 to {MAX_CAPACITY}"
        )));
    }
    Ok(())
}

/// Exactly `N` integers separated by single spaces.
fn numbers<const N: usize>(text: &[u8]) -> Option<[i64; N]> {
    let mut out = [0i64; N];
    let mut fields = text.split(|&b| b == b' ');
    for number in &mut out {
        *number = parse_i64(fields.next()?).ok()?;
    }
    fields.next().is_none().then_some(out)
}
