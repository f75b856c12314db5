//! Reading `INFO`: the text format, single numeric fields, command statistics.

use std::collections::HashMap;

use crate::server::Server;
use crate::values::q;
use crate::values::value_text;

/// Parses `INFO` text (`k:v` lines; `#` headers ignored) into a map.
pub fn parse_info(s: &str) -> HashMap<String, String> {
    s.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.trim_end().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A numeric field of `INFO <section>` read on `conn` (e.g. `tally_tracked_objects`).
pub fn info_field_i64(conn: &mut redis::Connection, section: &str, field: &str) -> Option<i64> {
    let text = value_text(&q(conn, &[b"INFO", section.as_bytes()]))?;
    parse_info(&text).get(field)?.trim().parse().ok()
}

/// A numeric field of `INFO <section>` on `srv`, e.g.
/// `info_i64(&srv, "tally", "tally_slots_expired")` or `info_i64(&srv, "stats", "sync_full")`.
/// Panics if the field is missing or not an integer.
pub fn info_i64(srv: &Server, section: &str, field: &str) -> i64 {
    let info = srv.info(section);
    info.get(field)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "{}: INFO {section} has no integer {field}: {info:?}",
                srv.kind().name
            )
        })
}

/// `usec_per_call` of a command in `INFO commandstats` (0.0 if never called).
pub fn usec_per_call(srv: &Server, command: &str) -> f64 {
    let stats = srv.info("commandstats");
    let Some(line) = stats.get(&format!("cmdstat_{command}")) else {
        return 0.0;
    };
    line.split(',')
        .find_map(|kv| kv.strip_prefix("usec_per_call="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no usec_per_call in {line}"))
}

impl Server {
    /// `INFO <section>` parsed into `field -> value` (lines `k:v`).
    pub fn info(&self, section: &str) -> HashMap<String, String> {
        let mut c = self.conn();
        let s: String = redis::cmd("INFO")
            .arg(section)
            .query(&mut c)
            .unwrap_or_else(|e| panic!("{} INFO {section}: {e}", self.kind().name));
        parse_info(&s)
    }
}
