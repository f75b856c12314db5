//! Names of a leaderboard's derived keys (`key|meta`, `key|slot|<n>`), and the board a
//! derived key belongs to. Pure: no Redis imports.

use crate::args::parse_i64;
use crate::inline_vec::InlineVec;

use super::*;

/// A derived key's name, built on the stack when short (every INCRBY builds two).
pub type KeyName = InlineVec<u8, 64>;

/// Name of the meta hash of leaderboard `base`.
pub fn meta_key(base: &[u8]) -> KeyName {
    let mut name = KeyName::new();
    name.extend_from_slice(base);
    name.extend_from_slice(META_SUFFIX);
    name
}

/// Name of the hash of slot `index` of leaderboard `base`.
pub fn slot_key(base: &[u8], index: i64) -> KeyName {
    let mut name = KeyName::new();
    name.extend_from_slice(base);
    name.extend_from_slice(SLOT_INFIX);
    push_decimal(&mut name, index);
    name
}

/// Appends `n` in decimal (what `to_string` writes) without a temporary string: slot
/// names are built on every INCRBY and by every read of the slots.
fn push_decimal(out: &mut KeyName, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    let mut digits = [0u8; 20];
    let mut rest = n.unsigned_abs();
    let mut start = digits.len();
    loop {
        start -= 1;
        if let Some(d) = digits.get_mut(start) {
            *d = b'0' + (rest % 10) as u8;
        }
        rest /= 10;
        if rest == 0 || start == 0 {
            break;
        }
    }
    out.extend_from_slice(digits.get(start..).unwrap_or_default());
}

/// The leaderboard whose meta hash is `meta`.
pub fn base_of_meta(meta: &[u8]) -> Option<&[u8]> {
    meta.strip_suffix(META_SUFFIX)
}

/// The leaderboard whose slot hash is `name` (`<base>|slot|<index>`).
pub fn base_of_slot(name: &[u8]) -> Option<&[u8]> {
    let at = name
        .windows(SLOT_INFIX.len())
        .rposition(|w| w == SLOT_INFIX)?;
    let index = name.get(at + SLOT_INFIX.len()..)?;
    parse_i64(index).ok()?;
    name.get(..at)
}

/// The leaderboard a derived key (meta or slot hash) belongs to.
pub fn base_of_part(name: &[u8]) -> Option<&[u8]> {
    base_of_meta(name).or_else(|| base_of_slot(name))
}

/// True if `key` has a hash tag as Redis Cluster reads it (the first `{` followed later by
/// a `}` with at least one byte between), so `key` + any suffix hashes to the same slot.
pub fn has_hash_tag(key: &[u8]) -> bool {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return false;
    };
    let after = key.get(open + 1..).unwrap_or_default();
    matches!(after.iter().position(|&b| b == b'}'), Some(close) if close > 0)
}
