//! The three families' workloads for the fault scenarios: setup of the tiny objects, one
//! round of writes, which dumped keys are tiny, every write command and every read.

use super::*;

pub(super) const COUNTER: Family = Family {
    name: "counter",
    setup: |p| {
        (0..4)
            .map(|i| {
                strings(&[
                    "TSCOUNTER.CREATE",
                    &format!("{p}tc:{i}"),
                    "RESOLUTIONS",
                    "100ms:5",
                    "200ms:4",
                ])
            })
            .collect()
    },
    write: |p, r| {
        let mut out = Vec::new();
        for i in 0..10 {
            out.push(strings(&[
                "TSCOUNTER.INCRBY",
                &format!("{p}c:{i}"),
                &(r + i).to_string(),
            ]));
        }
        out.push(strings(&["TSCOUNTER.INCR", &format!("{p}tc:{}", r % 4)]));
        out
    },
    tiny_key: |k| k.contains("tc:"),
    writes: |k| {
        vec![
            strings(&["TSCOUNTER.CREATE", &format!("{k}new")]),
            strings(&["TSCOUNTER.INCRBY", k, "5"]),
            strings(&["TSCOUNTER.INCR", k]),
            strings(&["TSCOUNTER.INCR", &format!("{k}new")]),
        ]
    },
    reads: |k| {
        vec![
            strings(&["TSCOUNTER.SUM", k, "1m"]),
            strings(&["TSCOUNTER.RANGE", k, "1s"]),
            strings(&["TSCOUNTER.INFO", k]),
            strings(&["TSCOUNTER.MSUM", "2", k, k, "1m"]),
        ]
    },
};

pub(super) const RANK: Family = Family {
    name: "rank",
    setup: |p| {
        (0..4)
            .map(|i| {
                strings(&[
                    "TSRANK.CREATE",
                    &format!("{p}tlb{{{i}}}"),
                    "WINDOW",
                    "500ms",
                    "SLOT",
                    "100ms",
                ])
            })
            .collect()
    },
    write: |p, r| {
        let mut out = Vec::new();
        for i in 0..10 {
            out.push(strings(&[
                "TSRANK.INCRBY",
                &format!("{p}lb{{{i}}}"),
                &(r + 1).to_string(),
                &format!("m{}", r % 7),
                "1",
                "z",
            ]));
        }
        out.push(strings(&[
            "TSRANK.INCRBY",
            &format!("{p}tlb{{{}}}", r % 4),
            "2",
            &format!("t{r}"),
        ]));
        out
    },
    tiny_key: |k| k.contains("tlb{"),
    writes: |k| {
        vec![
            strings(&[
                "TSRANK.CREATE",
                &format!("{k}new"),
                "WINDOW",
                "1h",
                "SLOT",
                "1m",
            ]),
            strings(&["TSRANK.INCRBY", k, "1", "a"]),
            strings(&["TSRANK.INCRBY", &format!("{k}new2"), "1", "a", "2", "b"]),
        ]
    },
    reads: |k| {
        vec![
            strings(&["TSRANK.TOP", k, "10", "WITHSCORES"]),
            strings(&["TSRANK.SCORE", k, "a"]),
            strings(&["TSRANK.RANK", k, "a"]),
            strings(&["TSRANK.RANK", k, "a", "TIES"]),
            strings(&["TSRANK.MSCORE", k, "a", "b"]),
            strings(&["TSRANK.AROUND", k, "a", "2", "WITHSCORES"]),
            strings(&["TSRANK.INFO", k]),
        ]
    },
};

pub(super) const STATS: Family = Family {
    name: "stats",
    setup: |p| {
        (0..4)
            .map(|i| {
                strings(&[
                    "STATS.CREATE",
                    &format!("{p}ts:{i}"),
                    "PERIOD",
                    "100ms",
                    "KEEP",
                    "3",
                ])
            })
            .collect()
    },
    write: |p, r| {
        let mut out = Vec::new();
        for i in 0..10 {
            out.push(strings(&[
                "STATS.ADD",
                &format!("{p}s:{i}"),
                &format!("{}.5", r * 3 + i),
                &format!("-{}", r + 1),
                "REPORT",
                &format!("{p}slow"),
                &format!("s:{i}"),
                "KEEP",
                "5",
            ]));
        }
        out.push(strings(&[
            "STATS.ADD",
            &format!("{p}ts:{}", r % 4),
            &r.to_string(),
        ]));
        out
    },
    tiny_key: |k| k.contains("ts:"),
    writes: |k| {
        vec![
            strings(&["STATS.CREATE", &format!("{k}new")]),
            strings(&["STATS.ADD", k, "1.5"]),
            strings(&["STATS.ADD", k, "1", "REPORT", &format!("{k}rank"), "m"]),
            strings(&["STATS.ADD", &format!("{k}new2"), "1"]),
        ]
    },
    reads: |k| {
        vec![
            strings(&["STATS.GET", k]),
            strings(&["STATS.QUANTILE", k, "0.5", "0.99"]),
            strings(&["STATS.RANGE", k]),
            strings(&["STATS.INFO", k]),
            strings(&["STATS.MGET", "2", k, k]),
            strings(&["STATS.MQUANTILE", "1", k, "0.5", "0.99"]),
        ]
    },
};
