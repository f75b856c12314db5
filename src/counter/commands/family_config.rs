//! The counter family's configs: `tally.counter-resolutions`, the resolutions of a counter
//! created by a write to a missing key.
//!
//! Owns: the family's config values and their check. May not touch: keys.

use std::sync::LazyLock;

use crate::counter::model::{format_resolutions, parse_resolution_text, Resolution};
use crate::host::config::TextConfig;

pub const DEFAULT_COUNTER_RESOLUTIONS: &str = "1s:120 5s:120 1m:120 5m:120 1h:120 5h:120 1d:120";

/// `counter-resolutions`: the default resolution list.
pub static COUNTER_RESOLUTIONS: LazyLock<TextConfig<Vec<Resolution>>> = LazyLock::new(|| {
    TextConfig::new(
        parse_resolution_text(DEFAULT_COUNTER_RESOLUTIONS).unwrap_or_default(),
        |text| parse_resolution_text(text).map_err(|e| e.to_string()),
        |list| format_resolutions(list),
    )
});

/// Whether a load argument of this family's configs takes `value` (`None`: not its name).
pub fn accepts(name: &str, value: &[u8]) -> Option<bool> {
    match name {
        "counter-resolutions" => {
            Some(std::str::from_utf8(value).is_ok_and(|text| COUNTER_RESOLUTIONS.accepts(text)))
        }
        _ => None,
    }
}
