//! Sums over several counters (TSCOUNTER.MSUM): each window's total is the sum of what
//! every key's own SUM answers for it.
//!
//! Owns: adding one key's window sums to the totals. May not touch: Redis (pure).

use crate::error::{Error, Result};

/// Adds one key's `sums` (one per window) to `totals`, window by window. A total beyond
/// a signed 64-bit integer is `ERR increment or decrement would overflow`, as a single
/// counter's sum is; `totals` is then left partly added (the caller replies the error).
pub fn add_sums(totals: &mut [i64], sums: &[i64]) -> Result<()> {
    if totals.len() != sums.len() {
        return Err(Error::Invalid("one sum per window".into()));
    }
    for (total, &sum) in totals.iter_mut().zip(sums) {
        *total = total.checked_add(sum).ok_or(Error::Overflow)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_add_window_by_window() {
        let mut totals = [0, 0, 0];
        add_sums(&mut totals, &[1, 2, 3]).unwrap();
        add_sums(&mut totals, &[10, -20, 0]).unwrap();
        assert_eq!(totals, [11, -18, 3]);
    }

    #[test]
    fn a_total_beyond_i64_is_an_overflow() {
        let mut totals = [i64::MAX - 1];
        assert_eq!(add_sums(&mut totals, &[2]), Err(Error::Overflow));
        let mut totals = [i64::MIN + 1];
        assert_eq!(add_sums(&mut totals, &[-2]), Err(Error::Overflow));
        let mut totals = [i64::MAX];
        add_sums(&mut totals, &[-1]).unwrap();
        assert_eq!(totals, [i64::MAX - 1]);
    }

    #[test]
    fn sums_and_totals_agree_in_length() {
        assert!(add_sums(&mut [0, 0], &[1]).is_err());
    }
}
