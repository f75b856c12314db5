//! STATS.ADD ... REPORT ... BY.
