//! The text forms of a counter's settings and slot field names: `res:samples` lists and
//! `<res>:<slot index>` fields, parsed and written without `core::fmt`.
//!
//! Owns: those text forms. May not touch: Redis (pure).

use super::{Resolution, MAX_RESOLUTIONS, MAX_SAMPLES};
use crate::args::{parse_duration, parse_i64, push_duration_bytes, push_i64, MAX_DURATION_MS};
use crate::error::{Error, Result};

/// Parses `res:samples` tokens (`1s:120`); sorts them finest first. A resolution's span
/// (`res * samples`) is a duration too: at most [`MAX_DURATION_MS`]; the samples of all
/// resolutions add up to at most [`MAX_SAMPLES`].
pub fn parse_resolutions<T: AsRef<[u8]>>(tokens: &[T]) -> Result<Vec<Resolution>> {
    if tokens.is_empty() || tokens.len() > MAX_RESOLUTIONS {
        return Err(Error::Invalid(format!(
            "a counter has 1 to {MAX_RESOLUTIONS} resolutions"
        )));
    }
    let mut out: Vec<Resolution> = Vec::with_capacity(tokens.len());
    for token in tokens {
        let token = token.as_ref();
        // Any bad token (duration, samples, duplicate) is a bad resolution, reported with
        // the contract's text for bad durations and resolutions and what is wrong in it.
        let invalid = |hint| Error::DurationHint(String::from_utf8_lossy(token).into_owned(), hint);
        let colon = token
            .iter()
            .position(|&b| b == b':')
            .ok_or_else(|| invalid(RESOLUTION_FORM))?;
        let (res, samples) = (&token[..colon], &token[colon + 1..]);
        let ms = parse_duration(res)?;
        let samples = parse_i64(samples)
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| invalid(RESOLUTION_FORM))?;
        let span_fits = ms
            .checked_mul(samples)
            .is_some_and(|s| s <= MAX_DURATION_MS);
        if out.iter().any(|r| r.ms == ms) {
            return Err(invalid(
                "duplicate resolution: each resolution is given once",
            ));
        }
        // Too many samples, in one resolution or in several, is the counter's size, not
        // a typo in the duration: it gets its own error.
        if samples > MAX_SAMPLES {
            return Err(too_many_samples());
        }
        if !span_fits {
            return Err(invalid(
                "a resolution's span (res x samples) is at most 10000 years",
            ));
        }
        out.push(Resolution { ms, samples });
    }
    let total = out
        .iter()
        .fold(0i64, |sum, r| sum.saturating_add(r.samples));
    if total > MAX_SAMPLES {
        return Err(too_many_samples());
    }
    out.sort_by_key(|r| r.ms);
    Ok(out)
}

/// What a resolution is, said when one is malformed.
const RESOLUTION_FORM: &str =
    "a resolution is res:samples, a duration and how many slots of it to keep (1m:60, 1h:24)";

#[cold]
fn too_many_samples() -> Error {
    Error::Invalid(format!(
        "a counter keeps at most {MAX_SAMPLES} samples over all its resolutions"
    ))
}

/// Parses a whitespace-separated resolution list (config value, stored settings).
pub fn parse_resolution_text(text: &str) -> Result<Vec<Resolution>> {
    let tokens: Vec<&str> = text.split_ascii_whitespace().collect();
    parse_resolutions(&tokens)
}

pub fn format_resolutions(resolutions: &[Resolution]) -> String {
    let mut out = Vec::with_capacity(12 * resolutions.len());
    for (i, r) in resolutions.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        push_duration_bytes(&mut out, r.ms);
        out.push(b':');
        push_i64(&mut out, r.samples);
    }
    String::from_utf8(out).unwrap_or_default()
}

/// Name of the hash field holding slot `index` of the resolution `res_ms`.
pub fn slot_field(res_ms: i64, index: i64) -> String {
    let mut field = Vec::with_capacity(24);
    push_slot_field(&mut field, res_ms, index);
    String::from_utf8(field).unwrap_or_default()
}

/// Appends the name of slot `index` of resolution `res_ms` (see [`slot_field`]).
pub fn push_slot_field(out: &mut Vec<u8>, res_ms: i64, index: i64) {
    push_duration_bytes(out, res_ms);
    out.push(b':');
    push_i64(out, index);
}

/// Inverse of [`slot_field`]: `(res_ms, slot index)`, or `None` for any other field.
pub fn parse_slot_field(field: &[u8]) -> Option<(i64, i64)> {
    let colon = field.iter().position(|&b| b == b':')?;
    let res_ms = parse_duration(&field[..colon]).ok()?;
    let index = parse_i64(&field[colon + 1..]).ok()?;
    Some((res_ms, index))
}
