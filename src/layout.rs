//! Where tally keeps things on native hashes: the field names every family shares or
//! reserves, and the one parser of the `_tally` marker. Pure: no Redis imports.
//!
//! Every tally hash has a `_tally` field: `<family word> <settings>`, written when the
//! object is created and never changed afterwards. Bookkeeping that changes with writes
//! lives in fields of its own (`_state` of a counter, `_slots` and `_edited` of a
//! leaderboard's meta hash), so reading the settings never depends on it.

/// The marker field: family word and settings.
pub const MARKER_FIELD: &str = "_tally";
/// A counter's per-resolution bookkeeping (see `crate::counter`).
pub const COUNTER_STATE_FIELD: &str = "_state";
/// A leaderboard meta's live slot range `first last` (see `crate::rank::model`).
pub const RANK_SLOTS_FIELD: &str = "_slots";
/// Present on a leaderboard meta whose parts a user edited natively (quarantine).
pub const RANK_EDITED_FIELD: &str = "_edited";

/// Family words.
pub const COUNTER: &str = "counter";
pub const STATS: &str = "stats";
pub const RANK: &str = "rank";

/// The settings text of a marker of family `word` (`counter 1s:120` → `1s:120`), or
/// `None` if the marker belongs to another family or is not text. A marker that is the
/// bare word has empty settings.
pub fn settings_of<'a>(marker: &'a [u8], word: &str) -> Option<&'a str> {
    let rest = marker.strip_prefix(word.as_bytes())?;
    let settings = match rest {
        [] => &[][..],
        [b' ', settings @ ..] => settings,
        _ => return None,
    };
    std::str::from_utf8(settings).ok()
}

/// True if `marker` belongs to family `word`, whatever its settings.
pub fn is_family(marker: &[u8], word: &str) -> bool {
    marker.starts_with(word.as_bytes()) && marker.get(word.len()).is_none_or(|&b| b == b' ')
}

/// A marker value: the family word, a space, the settings.
pub fn marker(word: &str, settings: &str) -> String {
    let mut out = String::with_capacity(word.len() + 1 + settings.len());
    out.push_str(word);
    out.push(' ');
    out.push_str(settings);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_split_into_family_and_settings() {
        assert_eq!(
            settings_of(b"counter 1s:120 1m:60", COUNTER),
            Some("1s:120 1m:60")
        );
        assert_eq!(settings_of(b"counter", COUNTER), Some(""));
        assert_eq!(settings_of(b"counterx 1s:1", COUNTER), None);
        assert_eq!(settings_of(b"stats 1h 24", COUNTER), None);
        assert_eq!(settings_of(b"stats \xff", STATS), None);
        assert!(is_family(b"rank 1 2", RANK));
        assert!(!is_family(b"ranked", RANK));
        assert_eq!(marker(STATS, "1h 24"), "stats 1h 24");
        assert_eq!(
            settings_of(marker(RANK, "5 6").as_bytes(), RANK),
            Some("5 6")
        );
    }
}
