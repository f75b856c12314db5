//! The names of a period's two fields in a statistics object's hash: `<period start
//! ms>:m` (moments) and `<period start ms>:q` (sketch).
//!
//! Owns: those names. May not touch: Redis (pure).

use crate::args::parse_i64;

/// Field suffix of a period's moments.
pub const MOMENTS_SUFFIX: &str = ":m";
/// Field suffix of a period's sketch.
pub const SKETCH_SUFFIX: &str = ":q";

/// Which of a period's two fields a field name designates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Moments,
    Sketch,
}

/// Name of the field holding `part` of the period starting at `start` (ms).
pub fn field(start: i64, part: Part) -> FieldName {
    let suffix = match part {
        Part::Moments => MOMENTS_SUFFIX,
        Part::Sketch => SKETCH_SUFFIX,
    };
    let mut name = FieldName {
        bytes: [0; 22],
        len: 0,
    };
    let mut n = start.unsigned_abs();
    let mut reversed = [0u8; 20];
    let mut count = 0;
    loop {
        if let Some(d) = reversed.get_mut(count) {
            *d = b'0' + (n % 10) as u8;
        }
        count += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if start < 0 {
        name.push(b'-');
    }
    for &d in reversed.iter().take(count).rev() {
        name.push(d);
    }
    for &b in suffix.as_bytes() {
        name.push(b);
    }
    name
}

/// A period's field name, built on the stack (a write names two per call).
#[derive(Clone, Copy)]
pub struct FieldName {
    /// Sign, up to 19 digits and the 2-byte suffix.
    bytes: [u8; 22],
    len: usize,
}

impl FieldName {
    fn push(&mut self, b: u8) {
        if let Some(slot) = self.bytes.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}

impl AsRef<[u8]> for FieldName {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// Inverse of [`field`]: the period start and the part, or `None` for any other field.
pub fn parse_field(name: &[u8]) -> Option<(i64, Part)> {
    let (start, part) = if let Some(s) = name.strip_suffix(MOMENTS_SUFFIX.as_bytes()) {
        (s, Part::Moments)
    } else {
        (name.strip_suffix(SKETCH_SUFFIX.as_bytes())?, Part::Sketch)
    };
    Some((parse_i64(start).ok()?, part))
}
