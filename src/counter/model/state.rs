//! The stored text of a counter: its `_tally` marker (the settings) and its `_state`
//! (the bookkeeping, written relative to a reference time so it stays short).
//!
//! Owns: those two texts. May not touch: Redis (pure).

use super::{
    format_resolutions, parse_resolution_text, Counter, Resolution, Track, MAX_RESOLUTIONS,
};
use crate::args::{parse_i64, push_i64};
use crate::layout;
use crate::window::slot_index;

/// Largest `|slot_index(ref) - lo|` written before the reference is moved to a newer time.
const MAX_STATE_OFFSET: i64 = 999;

impl Counter {
    /// The marker field's value.
    pub fn marker(&self) -> String {
        layout::marker(layout::COUNTER, &format_resolutions(&self.resolutions))
    }

    /// The state field's value at time `now`. The reference time moves to `now` only when
    /// an offset would grow long, so an unchanged state keeps the same text.
    pub fn state(&mut self, now: i64) -> String {
        let mut text = Vec::with_capacity(16 + 8 * self.tracks.len());
        self.write_state(now, &mut text);
        String::from_utf8(text).unwrap_or_default()
    }

    /// [`Counter::state`], written into `text` (cleared first).
    pub fn write_state(&mut self, now: i64, text: &mut Vec<u8>) {
        // The slot index of the reference time per resolution, computed once (a division
        // each; this runs on most writes of counters not cached in memory).
        let mut base = [0i64; MAX_RESOLUTIONS];
        let fill = |base: &mut [i64; MAX_RESOLUTIONS], reference: i64| {
            for (b, r) in base.iter_mut().zip(&self.resolutions) {
                *b = slot_index(reference, r.ms);
            }
        };
        fill(&mut base, self.reference);
        let offsets_fit = |base: &[i64; MAX_RESOLUTIONS]| {
            self.tracks
                .iter()
                .zip(base)
                .all(|(t, b)| t.n == 0 || (b - t.lo).abs() <= MAX_STATE_OFFSET)
        };
        // (More resolutions than a counter may have never reach here: parsing refuses them.)
        if !offsets_fit(&base) || self.resolutions.len() > MAX_RESOLUTIONS {
            self.reference = now;
            fill(&mut base, now);
        }
        text.clear();
        push_i64(text, self.reference);
        for (i, (r, t)) in self.resolutions.iter().zip(&self.tracks).enumerate() {
            let offset = if t.n == 0 {
                0
            } else {
                let b = base
                    .get(i)
                    .copied()
                    .unwrap_or_else(|| slot_index(self.reference, r.ms));
                b - t.lo
            };
            text.push(b' ');
            push_i64(text, offset);
            text.push(b':');
            push_i64(text, t.n);
            let runs = t.sealed_runs();
            if t.n > 0 && runs > 0 {
                text.push(b':');
                push_i64(text, runs);
            }
        }
    }

    /// Rebuilds a counter from its stored fields; `None` if they are not a valid counter.
    pub fn from_stored(marker: &[u8], state: Option<&[u8]>) -> Option<Counter> {
        Counter::with_state(Counter::parse_marker(marker)?, state)
    }

    /// The resolutions named by a marker value (`counter 1s:120 ...`).
    pub fn parse_marker(marker: &[u8]) -> Option<Vec<Resolution>> {
        parse_resolution_text(layout::settings_of(marker, layout::COUNTER)?).ok()
    }

    /// A counter with these resolutions and the stored state field (if any).
    pub fn with_state(resolutions: Vec<Resolution>, state: Option<&[u8]>) -> Option<Counter> {
        let Some(state) = state else {
            return Some(Counter::new(resolutions));
        };
        let (reference, tracks) = Counter::parse_state(&resolutions, state)?;
        Some(Counter {
            resolutions,
            tracks,
            reference,
        })
    }

    /// The slots a state field counts, all resolutions together, read without the
    /// resolutions (to decide whether a counter is worth mirroring before walking its
    /// hash); `None` when the text is not a state.
    pub fn state_slots(state: &[u8]) -> Option<i64> {
        let mut items = state.split(|&b| b == b' ').filter(|item| !item.is_empty());
        parse_i64(items.next()?).ok()?;
        items.try_fold(0i64, |total, item| {
            let n = item.split(|&b| b == b':').nth(1)?;
            Some(total.saturating_add(parse_i64(n).ok()?))
        })
    }

    /// The reference time and tracks of a state field for these resolutions.
    pub fn parse_state(resolutions: &[Resolution], state: &[u8]) -> Option<(i64, Vec<Track>)> {
        // `reference offset:n offset:n ...`, one item per resolution, separated by spaces
        // (parsed in place: this runs on every write of a counter not cached in memory).
        let mut items = state.split(|&b| b == b' ').filter(|item| !item.is_empty());
        let reference = parse_i64(items.next()?).ok()?;
        let mut tracks = Vec::with_capacity(resolutions.len());
        for r in resolutions {
            let item = items.next()?;
            let colon = item.iter().position(|&b| b == b':')?;
            let (offset, rest) = (item.get(..colon)?, item.get(colon + 1..)?);
            // `n`, or `n:s` once runs are packed.
            let (n, runs) = match rest.iter().position(|&b| b == b':') {
                Some(at) => (rest.get(..at)?, Some(parse_i64(rest.get(at + 1..)?).ok()?)),
                None => (rest, None),
            };
            let mut track = Track {
                lo: slot_index(reference, r.ms).checked_sub(parse_i64(offset).ok()?)?,
                n: parse_i64(n).ok()?,
                sealed: 0,
            };
            if let Some(runs) = runs {
                if !(1..=r.samples).contains(&runs) {
                    return None;
                }
                track.set_sealed_runs(runs);
            }
            // More stored slots than a resolution keeps is not a counter's state.
            if !(0..=r.samples).contains(&track.n) {
                return None;
            }
            tracks.push(track);
        }
        if items.next().is_some() {
            return None;
        }
        Some((reference, tracks))
    }
}
