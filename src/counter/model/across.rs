//! Sums over several counters (TSCOUNTER.MSUM): each window's total is the sum of what
//! every key's own SUM answers for it, a key named `n` times counted `n` times.
//!
//! Owns: the keys' multiplicity and adding one key's window sums to the totals. May not
//! touch: Redis (pure).

use std::collections::HashMap;

use crate::error::{Error, Result};

/// Up to this many names, repeats are found by comparing each with those before it: no
/// hash map to build (`MSUM` of 10 keys took 0.3 us more of server time with one).
const FEW_NAMES: usize = 32;

/// The distinct names of `names`, in the order each first appears, with how many times
/// each is named: a key named twice is read once and counted twice.
pub fn distinct_names<'a>(names: &[&'a [u8]]) -> Vec<(&'a [u8], i64)> {
    let mut out: Vec<(&[u8], i64)> = Vec::with_capacity(names.len());
    if names.len() <= FEW_NAMES {
        for &name in names {
            match out.iter_mut().find(|(seen, _)| *seen == name) {
                Some((_, times)) => *times += 1,
                None => out.push((name, 1)),
            }
        }
        return out;
    }
    let mut at: HashMap<&[u8], usize> = HashMap::with_capacity(names.len());
    for &name in names {
        match at.get(name).and_then(|&i| out.get_mut(i)) {
            Some((_, times)) => *times += 1,
            None => {
                at.insert(name, out.len());
                out.push((name, 1));
            }
        }
    }
    out
}

/// Adds one key's `sums` (one per window), `times` over, to `totals`, window by window.
/// Totals are 128-bit: a thousand keys of 64-bit sums cannot overflow them, so whether the
/// answer fits is decided once, at the end ([`finish_sums`]), whatever the keys' order.
pub fn add_sums(totals: &mut [i128], sums: &[i64], times: i64) -> Result<()> {
    if totals.len() != sums.len() {
        return Err(Error::Internal("one sum per window"));
    }
    for (total, &sum) in totals.iter_mut().zip(sums) {
        *total = total
            .checked_add(i128::from(sum) * i128::from(times))
            .ok_or(Error::Overflow)?;
    }
    Ok(())
}

/// The totals as the reply's 64-bit integers: a total beyond a signed 64-bit integer is
/// `ERR increment or decrement would overflow`, as a single counter's sum is.
pub fn finish_sums(totals: &[i128]) -> Result<Vec<i64>> {
    totals
        .iter()
        .map(|&total| i64::try_from(total).map_err(|_| Error::Overflow))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_add_window_by_window() {
        let mut totals = [0, 0, 0];
        add_sums(&mut totals, &[1, 2, 3], 1).unwrap();
        add_sums(&mut totals, &[10, -20, 0], 2).unwrap();
        assert_eq!(finish_sums(&totals).unwrap(), [21, -38, 3]);
    }

    #[test]
    fn only_a_final_total_beyond_i64_is_an_overflow() {
        let big = 1i64 << 62;
        // ob1 + ob2 + on1 fits in any order, though ob1 + ob2 alone does not.
        for order in [[big, big, -big], [big, -big, big], [-big, big, big]] {
            let mut totals = [0];
            for sum in order {
                add_sums(&mut totals, &[sum], 1).unwrap();
            }
            assert_eq!(finish_sums(&totals).unwrap(), [big]);
        }
        let mut totals = [0];
        add_sums(&mut totals, &[i64::MAX], 1).unwrap();
        add_sums(&mut totals, &[1], 1).unwrap();
        assert_eq!(finish_sums(&totals), Err(Error::Overflow));
        let mut totals = [0];
        add_sums(&mut totals, &[i64::MIN], 2).unwrap();
        assert_eq!(finish_sums(&totals), Err(Error::Overflow));
        let mut totals = [0];
        add_sums(&mut totals, &[i64::MIN], 1).unwrap();
        assert_eq!(finish_sums(&totals).unwrap(), [i64::MIN]);
    }

    #[test]
    fn a_thousand_extreme_sums_stay_exact() {
        let mut totals = [0];
        for _ in 0..1000 {
            add_sums(&mut totals, &[i64::MAX], 1000).unwrap();
        }
        assert_eq!(totals[0], i128::from(i64::MAX) * 1_000_000);
    }

    #[test]
    fn sums_and_totals_agree_in_length() {
        assert!(add_sums(&mut [0, 0], &[1], 1).is_err());
    }

    #[test]
    fn names_are_read_once_in_first_order() {
        let names: [&[u8]; 5] = [b"b", b"a", b"b", b"c", b"b"];
        assert_eq!(
            distinct_names(&names),
            vec![(&b"b"[..], 3), (&b"a"[..], 1), (&b"c"[..], 1)]
        );
    }

    #[test]
    fn many_names_count_as_few_do() {
        let owned: Vec<Vec<u8>> = (0..1000)
            .map(|i| format!("k{}", i % 37).into_bytes())
            .collect();
        let names: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        let many = distinct_names(&names);
        assert_eq!(many.len(), 37);
        assert_eq!(many.iter().map(|(_, n)| n).sum::<i64>(), 1000);
        for (i, (name, times)) in many.iter().enumerate() {
            assert_eq!(*name, format!("k{i}").as_bytes());
            let few = distinct_names(&names[..FEW_NAMES]);
            let in_few = few.iter().find(|(n, _)| n == name).map_or(0, |(_, t)| *t);
            assert_eq!(*times, names.iter().filter(|n| *n == name).count() as i64);
            assert_eq!(
                in_few,
                names[..FEW_NAMES].iter().filter(|n| *n == name).count() as i64
            );
        }
    }
}
