//! The statistic `STATS.ADD ... REPORT rankkey member [BY stat]` ranks a period by:
//! `mean` (the default), `max`, `count`, `sum`, or a quantile `p50`, `p90`, `p99` from
//! the period's sketch ("slowest pages by p99": a mean hides the tail).
//!
//! Owns: the words of BY and the score each gives. May not touch: Redis (pure).

use super::Record;
use crate::error::{Error, Result};
use crate::moments::Moments;
use crate::sketch::Sketch;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReportStat {
    #[default]
    Mean,
    Max,
    Count,
    Sum,
    P50,
    P90,
    P99,
}

impl ReportStat {
    /// The word after `BY`, ASCII case-insensitive; any other is `ERR syntax error`.
    pub fn parse(word: &[u8]) -> Result<ReportStat> {
        const WORDS: [(&[u8], ReportStat); 7] = [
            (b"mean", ReportStat::Mean),
            (b"max", ReportStat::Max),
            (b"count", ReportStat::Count),
            (b"sum", ReportStat::Sum),
            (b"p50", ReportStat::P50),
            (b"p90", ReportStat::P90),
            (b"p99", ReportStat::P99),
        ];
        WORDS
            .iter()
            .find(|(w, _)| word.eq_ignore_ascii_case(w))
            .map(|&(_, stat)| stat)
            .ok_or(Error::Syntax)
    }

    /// The fraction of a quantile statistic.
    fn fraction(self) -> Option<f64> {
        match self {
            ReportStat::P50 => Some(0.5),
            ReportStat::P90 => Some(0.9),
            ReportStat::P99 => Some(0.99),
            _ => None,
        }
    }

    /// The score of a period from its moments and its encoded sketch (decoded only for a
    /// quantile). A quantile of a sketch that does not decode or disagrees with the
    /// moments (a user's HSET) falls back to the mean, so the ranking still gets a score.
    pub fn score(self, moments: &Moments, sketch: &[u8]) -> f64 {
        match self {
            ReportStat::Mean => moments.mean,
            ReportStat::Max => moments.max,
            ReportStat::Count => moments.count as f64,
            ReportStat::Sum => moments.sum(),
            quantile => {
                let record = Sketch::decode(sketch)
                    .filter(|s| s.count() == moments.count)
                    .map(|sketch| Record {
                        moments: moments.clone(),
                        sketch,
                    });
                quantile
                    .fraction()
                    .zip(record)
                    .and_then(|(q, record)| record.quantile(q))
                    .unwrap_or(moments.mean)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::model::tests::of;

    #[test]
    fn words_parse_in_any_case_and_others_are_refused() {
        assert_eq!(ReportStat::parse(b"mean"), Ok(ReportStat::Mean));
        assert_eq!(ReportStat::parse(b"MAX"), Ok(ReportStat::Max));
        assert_eq!(ReportStat::parse(b"Count"), Ok(ReportStat::Count));
        assert_eq!(ReportStat::parse(b"sum"), Ok(ReportStat::Sum));
        assert_eq!(ReportStat::parse(b"p50"), Ok(ReportStat::P50));
        assert_eq!(ReportStat::parse(b"P90"), Ok(ReportStat::P90));
        assert_eq!(ReportStat::parse(b"p99"), Ok(ReportStat::P99));
        for bad in [&b"p95"[..], b"min", b"", b"meanx", b"KEEP"] {
            assert_eq!(ReportStat::parse(bad), Err(Error::Syntax), "{bad:?}");
        }
        assert_eq!(ReportStat::default(), ReportStat::Mean);
    }

    #[test]
    fn each_stat_scores_the_period() {
        let xs: Vec<f64> = (1..=1000).map(f64::from).collect();
        let r = of(&xs);
        let sketch = r.sketch.encode();
        let m = &r.moments;
        assert_eq!(ReportStat::Mean.score(m, &sketch), 500.5);
        assert_eq!(ReportStat::Max.score(m, &sketch), 1000.0);
        assert_eq!(ReportStat::Count.score(m, &sketch), 1000.0);
        assert_eq!(ReportStat::Sum.score(m, &sketch), 500_500.0);
        for (stat, exact) in [
            (ReportStat::P50, 500.0),
            (ReportStat::P90, 900.0),
            (ReportStat::P99, 990.0),
        ] {
            let got = stat.score(m, &sketch);
            assert!((got - exact).abs() <= 0.01 * exact, "{stat:?} {got}");
            assert_eq!(Some(got), r.quantile(stat.fraction().unwrap()));
        }
    }

    /// A damaged sketch still gives a score: the mean.
    #[test]
    fn a_quantile_of_a_damaged_sketch_falls_back_to_the_mean() {
        let r = of(&[1.0, 2.0, 30.0]);
        assert_eq!(ReportStat::P99.score(&r.moments, b"\xff"), r.moments.mean);
        let other = of(&[1.0]).sketch.encode();
        assert_eq!(ReportStat::P50.score(&r.moments, &other), r.moments.mean);
    }
}
