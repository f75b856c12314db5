//! The statistics family's configs: `tally.stats-period` and `tally.stats-keep`, the
//! settings of an object created by a write to a missing key.
//!
//! Owns: the family's config values and their check. May not touch: keys.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::args::{parse_i64, MAX_DURATION_MS};
use crate::host::config::DurationConfig;
use crate::stats::model::{MAX_KEEP, MAX_STORED_KEEP};

/// At most 365.25 days (10,000 years / `MAX_STORED_KEEP`): the period of an auto-created
/// object times any `stats-keep` (up to `MAX_KEEP`) is then a valid kept span, whichever
/// config is set first, as it was when `KEEP` went up to 10000.
pub static STATS_PERIOD: DurationConfig =
    DurationConfig::at_most(3_600_000, "1h", MAX_DURATION_MS / MAX_STORED_KEEP);
pub static STATS_KEEP: AtomicI64 = AtomicI64::new(24);

pub fn stats_keep() -> i64 {
    STATS_KEEP.load(Ordering::Relaxed)
}

/// Whether a load argument of this family's configs takes `value` (`None`: not its name).
pub fn accepts(name: &str, value: &[u8]) -> Option<bool> {
    match name {
        "stats-period" => Some(STATS_PERIOD.parse(value).is_ok()),
        "stats-keep" => Some(parse_i64(value).is_ok_and(|v| (1..=MAX_KEEP).contains(&v))),
        _ => None,
    }
}
