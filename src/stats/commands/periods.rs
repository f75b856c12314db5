//! A statistics object's hash as the commands see it: its settings (marker), its periods
//! read one by one, as a window, or raw for a merge, and an inventory of what it stores.
//!
//! Owns: reading the stats fields of a hash. May not touch: raw module calls, command
//! parsing, writes.

use std::collections::BTreeMap;
use std::rc::Rc;

use super::stats_memory::memory;
use crate::error::{Error, Result};
use crate::host::store::{Key, KeyKind, RStr};
use crate::stats::model::window_cache::{PackedRecord, Span};
use crate::stats::model::{
    field, parse_field, Part, PeriodMerge, Record, ScannedPeriods, Settings,
};

/// Default `KEEP` of `REPORT rankkey member [KEEP n]`.
pub(super) const DEFAULT_REPORT_KEEP: i64 = 100;

/// Settings of an object auto-created by a write (configs `tally.stats-period/keep`).
pub(super) fn default_settings() -> Settings {
    // The configs are validated on CONFIG SET, so this only falls back on a bug.
    Settings::new(
        super::family_config::STATS_PERIOD.ms(),
        super::family_config::stats_keep(),
    )
    .unwrap_or(Settings {
        period: 3_600_000,
        keep: 24,
    })
}

/// The settings of the object at `key`: `None` for a missing key, WRONGTYPE for anything
/// that is not a statistics object.
pub(super) fn load(key: &Key) -> Result<Option<Settings>> {
    match key.kind() {
        KeyKind::Empty => Ok(None),
        KeyKind::Hash => {
            let c = memory();
            c.marker_name()
                .and_then(|name| key.hget_with(name, |m| c.settings_of_marker(m)).flatten())
        }
        .map(Some)
        .ok_or(Error::WrongType),
        _ => Err(Error::WrongType),
    }
}

/// The settings of the last object whose marker was parsed, if any.
pub(super) fn last_settings() -> Option<Settings> {
    memory().last_settings()
}

/// The two field names of one period as module strings. A write makes them once: its
/// read, its `HashSet` and its replicated `HSET` share the same strings (each string made
/// costs a server allocation, a copy and a free).
pub(super) struct PeriodFields {
    /// Start (ms) of the period the names are of.
    pub start: i64,
    pub moments_name: RStr,
    pub sketch_name: RStr,
}

impl PeriodFields {
    /// The fields of the period starting at `start`; `None` if the server could not make
    /// a string.
    pub(super) fn new(start: i64) -> Option<PeriodFields> {
        Some(PeriodFields {
            start,
            moments_name: RStr::new(field(start, Part::Moments).as_bytes())?,
            sketch_name: RStr::new(field(start, Part::Sketch).as_bytes())?,
        })
    }
}

/// One read of the marker and of the fields of the period containing `ts` under
/// `assumed` settings. Returns the object's settings (WRONGTYPE without a valid marker)
/// and, when they equal `assumed`, the period's moments with `values` added (the new
/// sketch encoding in `sketch_out`), or `None` for a missing or damaged period; and the
/// period's field names under `assumed`, for the write that follows.
pub(super) fn read_period(
    key: &Key,
    assumed: &Settings,
    ts: i64,
    values: &[f64],
    sketch_out: &mut Vec<u8>,
) -> Result<(Settings, Option<crate::moments::Moments>, PeriodFields)> {
    let fields = PeriodFields::new(assumed.start(assumed.index(ts))).ok_or(Error::WrongType)?;
    let c = memory();
    let (settings, previous) = {
        let marker_name = c.marker_name().ok_or(Error::WrongType)?;
        let names = [marker_name, &fields.moments_name, &fields.sketch_name];
        key.hget3_with(names, |[marker, m, q]| {
            let settings = marker
                .and_then(|m| c.settings_of_marker(m))
                .ok_or(Error::WrongType)?;
            if settings != *assumed {
                return Ok((settings, None));
            }
            let previous = match (m, q) {
                (Some(m), Some(q)) => Record::add_encoded(m, q, values, sketch_out),
                _ => None,
            };
            Ok((settings, previous))
        })
    }?;
    Ok((settings, previous, fields))
}

/// The stored record of period `index`, if it is stored and valid.
/// Both fields are read with one `HashGet` (the third field asked is the marker,
/// whose value is not needed here) and decoded without a copy.
pub(super) fn get_record(key: &Key, settings: &Settings, index: i64) -> Option<Record> {
    with_period_fields(key, settings, index, |m, q| Record::decode(m?, q?)).flatten()
}

/// Calls `f` with the stored `:m` and `:q` values of period `index` (one `HashGet`).
pub(super) fn with_period_fields<T>(
    key: &Key,
    settings: &Settings,
    index: i64,
    f: impl FnOnce(Option<&[u8]>, Option<&[u8]>) -> T,
) -> Option<T> {
    let start = settings.start(index);
    let m_name = RStr::new(field(start, Part::Moments).as_bytes())?;
    let q_name = RStr::new(field(start, Part::Sketch).as_bytes())?;
    let marker_name = memory().marker_name()?;
    Some(key.hget3_with([marker_name, &m_name, &q_name], |[_, m, q]| f(m, q)))
}

/// The stored records of periods `lo..=hi`, oldest first (see [`load_raw_periods`]).
pub(super) fn load_periods(key: &Key, settings: &Settings, lo: i64, hi: i64) -> Vec<(i64, Record)> {
    load_raw_periods(key, settings, lo, hi)
        .into_iter()
        .filter_map(|(index, m, q)| Record::decode(&m, &q).map(|r| (index, r)))
        .collect()
}

/// The stored `:m` and `:q` values of periods `lo..=hi` that have both, oldest first.
/// Probes the fields period by period when the range is shorter than the hash, else
/// reads the hash in one scan.
pub(super) fn load_raw_periods(
    key: &Key,
    settings: &Settings,
    lo: i64,
    hi: i64,
) -> Vec<(i64, Vec<u8>, Vec<u8>)> {
    let span = hi.saturating_sub(lo).saturating_add(1);
    if span.saturating_mul(2) < key.len() as i64 {
        return (lo..=hi)
            .filter_map(|index| {
                with_period_fields(key, settings, index, |m, q| {
                    Some((index, m?.to_vec(), q?.to_vec()))
                })
                .flatten()
            })
            .collect();
    }
    type Fields = (Option<Vec<u8>>, Option<Vec<u8>>);
    let mut found: BTreeMap<i64, Fields> = BTreeMap::new();
    key.hscan(|name, value| {
        let Some((start, part)) = parse_field(name) else {
            return;
        };
        let Some(index) = settings
            .index_of_start(start)
            .filter(|i| (lo..=hi).contains(i))
        else {
            return;
        };
        let entry = found.entry(index).or_default();
        match part {
            Part::Moments => entry.0 = Some(value.to_vec()),
            Part::Sketch => entry.1 = Some(value.to_vec()),
        }
    });
    found
        .into_iter()
        .filter_map(|(index, fields)| match fields {
            (Some(m), Some(q)) => Some((index, m, q)),
            _ => None,
        })
        .collect()
}

/// Largest hash the server keeps as a listpack by default (`hash-max-listpack-entries`):
/// there each field read searches the fields one after another.
const LISTPACK_FIELDS: usize = 128;

/// Whether reading every field of a hash of `len` fields in one scan costs less than
/// probing `span` periods field by field. Measured on a 49-field object (24 hourly
/// periods): a scanned field costs about 0.12 us (the server makes and frees a string for
/// its name and its value); a probed period about 0.3 us plus, in a listpack, a
/// comparison with every field for each of its three names.
fn scan_is_cheaper(span: i64, len: usize) -> bool {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    if len > LISTPACK_FIELDS as i64 {
        return span.saturating_mul(2) >= len;
    }
    let probe_ns = 300 + 3 * len * 2;
    len.saturating_mul(120) < span.saturating_mul(probe_ns)
}

/// The merge of the stored periods `lo..=hi`, oldest first: probed period by period and
/// merged as read when that costs less than reading the whole hash, else read in one
/// scan (see [`scan_is_cheaper`]).
fn merge_stored(key: &Key, settings: &Settings, lo: i64, hi: i64) -> Record {
    let span = hi.saturating_sub(lo).saturating_add(1);
    if !scan_is_cheaper(span, key.len()) {
        let mut merge = PeriodMerge::default();
        for index in lo..=hi {
            with_period_fields(key, settings, index, |m, q| {
                if let (Some(m), Some(q)) = (m, q) {
                    merge.add(m, q);
                }
            });
        }
        return merge.finish();
    }
    let mut scanned = ScannedPeriods::default();
    key.hscan(|name, value| {
        let Some((start, part)) = parse_field(name) else {
            return;
        };
        if let Some(index) = settings
            .index_of_start(start)
            .filter(|i| (lo..=hi).contains(i))
        {
            scanned.push(index, part, value);
        }
    });
    scanned.merge()
}

/// The merged record of periods `lo..=hi` of the key `admission` is about (`key`, open),
/// and whether the cache held its closed periods' merge (a window of one period has
/// none: it is decoded as is). A window is the merge of its closed periods `lo..hi`
/// (from the read cache, else merged straight from their encodings and offered to the
/// cache under `admission`) plus its current period `hi`.
pub(super) fn window_record(
    key: &Key,
    settings: &Settings,
    (lo, hi): (i64, i64),
    admission: &mut super::Admission,
) -> (Record, bool) {
    let (db, name) = (admission.db, admission.name);
    if lo >= hi {
        return (get_record(key, settings, hi).unwrap_or_default(), false);
    }
    let cached = memory()
        .windows(|w| w.merge(db, name, settings, (lo, hi), Span::Closed))
        .flatten();
    let hit = cached.is_some();
    let mut record = match cached {
        Some(closed) => closed.unpack(),
        None => {
            let closed = merge_stored(key, settings, lo, hi - 1);
            let admit = admission.admit(key);
            let stored = Rc::new(PackedRecord::pack(&closed));
            memory().windows(|w| {
                w.store_merge(db, name, *settings, (lo, hi), Span::Closed, stored, admit)
            });
            closed
        }
    };
    with_period_fields(key, settings, hi, |m, q| {
        if let (Some(m), Some(q)) = (m, q) {
            record.merge_encoded_period(m, q);
        }
    });
    (record, hit)
}

/// What one scan of the hash found about its periods at `now`.
pub(super) struct Inventory {
    /// Fields of periods no longer kept.
    pub(super) stale: Vec<Vec<u8>>,
    /// Number of distinct stale periods.
    pub(super) stale_periods: usize,
    /// Oldest kept period index.
    pub(super) oldest_kept: Option<i64>,
    /// Number of periods stored (kept or not).
    pub(super) stored: usize,
}

/// Largest hash a visit or INFO scans whole: every kept period (2 fields each), as many
/// periods that left and await the timer, and the marker. A bigger hash holds fields
/// tally never wrote (a user's HSET); walking them all at each visit would let them
/// stall the timer, so such a hash is probed period by period instead (bounded by KEEP).
pub(super) fn scan_limit(settings: &Settings) -> usize {
    usize::try_from(settings.keep.saturating_mul(4).saturating_add(1)).unwrap_or(usize::MAX)
}

pub(super) fn inventory(key: &Key, settings: &Settings, now: i64) -> Inventory {
    let mut inv = Inventory {
        stale: Vec::new(),
        stale_periods: 0,
        oldest_kept: None,
        stored: 0,
    };
    let first_kept = settings.first_kept(now);
    if key.len() > scan_limit(settings) {
        // Periods that left within the last KEEP periods (older ones were dropped by
        // earlier visits), then the kept ones.
        for index in first_kept.saturating_sub(settings.keep)..first_kept {
            let start = settings.start(index);
            let mut any = false;
            for part in [Part::Moments, Part::Sketch] {
                let name = field(start, part);
                if key.hget(name.as_bytes()).is_some() {
                    inv.stale.push(name.into_bytes());
                    any = true;
                }
            }
            if any {
                inv.stale_periods += 1;
                inv.stored += 1;
            }
        }
        for index in first_kept..=settings.index(now) {
            if key
                .hget(field(settings.start(index), Part::Moments).as_bytes())
                .is_some()
            {
                inv.stored += 1;
                inv.oldest_kept.get_or_insert(index);
            }
        }
        return inv;
    }
    key.hscan(|name, _| {
        let Some((start, part)) = parse_field(name) else {
            return;
        };
        let Some(index) = settings.index_of_start(start) else {
            return;
        };
        if part == Part::Moments {
            inv.stored += 1;
        }
        if index < first_kept {
            inv.stale.push(name.to_vec());
            if part == Part::Moments {
                inv.stale_periods += 1;
            }
        } else {
            inv.oldest_kept = Some(inv.oldest_kept.map_or(index, |o| o.min(index)));
        }
    });
    inv
}
