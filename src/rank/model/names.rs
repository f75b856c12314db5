//! Names of a leaderboard's derived keys (`key|meta`, `key|slot|<n>`), and the board a
//! derived key belongs to. Pure: no Redis imports.

use crate::args::parse_i64;
use smallvec::SmallVec;

/// Suffix of the meta hash name.
pub const META_SUFFIX: &[u8] = b"|meta";
/// Infix of slot hash names: `key|slot|<index>`.
pub const SLOT_INFIX: &[u8] = b"|slot|";

/// A derived key's name, built on the stack when short (every INCRBY builds two).
pub type KeyName = SmallVec<[u8; 64]>;

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
    if !may_be_part(name) {
        return None;
    }
    base_of_meta(name).or_else(|| base_of_slot(name))
}

/// A byte every derived key's name contains (in `|meta` and `|slot|`): the keyspace
/// callback asks [`base_of_part`] only about names that contain it, found while it hashes
/// the name anyway.
pub const PART_BYTE: u8 = b'|';

/// False only for names that are no derived key: a derived name ends in `|meta`, or in
/// `|slot|` and a slot number (digits, perhaps after `-`). Every keyspace event on a key
/// tally does not track whose name contains [`PART_BYTE`] asks, so the name is read from
/// its end: one comparison for a name ending in neither a digit nor `a`, its digits for
/// `user|1234`.
pub fn may_be_part(name: &[u8]) -> bool {
    let digits = trailing_digits(name);
    if digits == 0 {
        return name.ends_with(META_SUFFIX);
    }
    let head = name.get(..name.len() - digits).unwrap_or_default();
    let head = head.strip_suffix(b"-").unwrap_or(head);
    head.ends_with(SLOT_INFIX)
}

/// How many ASCII digits `name` ends with, read 8 bytes at a time (key names often end in
/// a long number, such as a zero-padded id).
fn trailing_digits(name: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let mut digits = 0;
    let mut rest = name;
    while let Some((head, word)) = rest.split_last_chunk::<8>() {
        // Big-endian: the name's last byte is the word's lowest. A byte is a digit when
        // neither `b - '0'` nor `b + (0x80 - 0x3a)` sets its high bit (nor is it set
        // already); a borrow or carry only runs upwards, from the end of the name, so the
        // lowest flagged byte is the last non-digit.
        let w = u64::from_be_bytes(*word);
        let flagged =
            (w.wrapping_sub(ONES * 0x30) | w.wrapping_add(ONES * 0x46) | w) & (ONES * 0x80);
        if flagged != 0 {
            return digits + (flagged.trailing_zeros() / 8) as usize;
        }
        digits += 8;
        rest = head;
    }
    digits + rest.iter().rev().take_while(|b| b.is_ascii_digit()).count()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A name without [`PART_BYTE`] is never asked about: no derived name may lack it.
    #[test]
    fn every_derived_name_contains_the_part_byte() {
        assert!(META_SUFFIX.contains(&PART_BYTE));
        assert!(SLOT_INFIX.contains(&PART_BYTE));
        for name in [meta_key(b"b"), slot_key(b"b", 7), slot_key(b"", -3)] {
            assert!(base_of_part(&name).is_some());
            assert!(name.contains(&PART_BYTE));
        }
    }
}
