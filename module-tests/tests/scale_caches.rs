//! The read caches at scale: with 100k counters each written four times in a row, the
//! module's memory stays under half the counters' own size, within the byte bound of
//! `tally.cache-max-memory`, and comes back when the keys go; under `maxmemory` the caches
//! of 30k counters shrink before the server evicts a key; a slot field a user expires with `HPEXPIRE`
//! stops counting at the moment it expires, whether or not the server has reclaimed it.

use std::time::Duration;

use module_tests::*;

/// Counters in the memory case (`TALLY_LONG=1`: ten times more). The default cache budget
/// is a fixed 4 MB of the module's memory, so the count must be large enough for the
/// bound "under half the data" to hold with the caches full: 100k.
fn counters() -> usize {
    if long_run() {
        1_000_000
    } else {
        100_000
    }
}

/// Counters in the `maxmemory` case (`TALLY_LONG=1`: a million). 30k suffice: without
/// `maxmemory` their caches alone grow to ~55 MB, four times the limit the case sets.
fn counters_under_pressure() -> usize {
    if long_run() {
        1_000_000
    } else {
        30_000
    }
}

const WRITES_PER_KEY: usize = 4;

/// Writes every counter `c{i}` WRITES_PER_KEY times in a row (default resolutions), in
/// pipelines of a few thousand commands.
fn write_counters(srv: &Server, n: usize) {
    let mut conn = srv.conn();
    let batch = 2_000;
    for start in (0..n).step_by(batch) {
        let mut cmds = Vec::with_capacity(batch * WRITES_PER_KEY);
        for i in start..(start + batch).min(n) {
            let key = format!("c{i}");
            for _ in 0..WRITES_PER_KEY {
                cmds.push(vec!["TSCOUNTER.INCR".to_string(), key.clone()]);
            }
        }
        for reply in pipeline(&mut conn, &cmds) {
            assert!(matches!(reply, Value::Int(n) if n >= 1), "{reply:?}");
        }
    }
}

fn used_memory(srv: &Server) -> i64 {
    info_i64(srv, "memory", "used_memory")
}

fn cache_bytes(srv: &Server) -> i64 {
    info_i64(srv, "tally", "tally_cache_bytes")
}

/// The counters' own size: `used_memory` of a server without the module holding the same
/// keys (loaded from `srv`'s RDB), less that server's when empty.
fn data_size(srv: &Server) -> i64 {
    assert_eq!(srv.cmd_value(&["SAVE"]), v_ok());
    let plain = Server::start_with(srv.kind(), ServerOptions::new().without_module());
    let empty = used_memory(&plain);
    std::fs::copy(srv.dir().join("dump.rdb"), plain.dir().join("dump.rdb")).expect("copy the RDB");
    assert_eq!(plain.cmd_value(&["DEBUG", "RELOAD", "NOSAVE"]), v_ok());
    assert_eq!(
        plain.cmd_value(&["DBSIZE"]),
        srv.cmd_value(&["DBSIZE"]),
        "the plain server holds every key"
    );
    used_memory(&plain) - empty
}

/// With the default settings, module memory after the writes (expiry schedule, read
/// caches, the keys tally tracks) is at most half the counters' own size, the caches stay
/// within their configured bytes, and deleting every key gives the memory back.
fn caches_stay_small_next_to_the_data(kind: &ServerKind) {
    let srv = Server::start(kind);
    let budget = info_i64(&srv, "tally", "tally_cache_max_memory");
    assert_eq!(budget, 4 << 20, "the default budget");
    let n = counters();
    let empty = used_memory(&srv);
    write_counters(&srv, n);
    let written = used_memory(&srv);
    let cached = cache_bytes(&srv);
    assert!(cached > 0, "the hot counters are cached");
    assert!(
        cached <= budget,
        "cache bytes {cached} over the {budget} B bound"
    );
    let data = data_size(&srv);
    let module = written - empty - data;
    println!("{n} counters: data {data} B, module {module} B, cache {cached} B");
    assert!(
        module <= data / 2,
        "module memory {module} B is over half the data ({data} B)"
    );
    // A smaller budget set at run time (units as for any memory config) holds from the
    // caches' next use; 0 turns them off.
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.cache-max-memory", "1mb"]),
        v_ok()
    );
    srv.cmd_value(&["TSCOUNTER.INCR", "fresh"]);
    assert!(cache_bytes(&srv) <= 1 << 20);
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.cache-max-memory", "0"]),
        v_ok()
    );
    srv.cmd_value(&["TSCOUNTER.INCR", "fresh"]);
    assert_eq!(cache_bytes(&srv), 0);
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "tally.cache-max-memory", "4mb"]),
        v_ok()
    );
    srv.cmd_value(&["DEL", "fresh"]);
    // Written again (caches warm), then deleted key by key: memory returns.
    write_counters(&srv, n);
    let mut conn = srv.conn();
    for start in (0..n).step_by(5_000) {
        let cmds: Vec<Vec<String>> = (start..(start + 5_000).min(n))
            .map(|i| vec!["DEL".to_string(), format!("c{i}")])
            .collect();
        pipeline(&mut conn, &cmds);
    }
    assert_eq!(srv.cmd_value(&["DBSIZE"]), v_int(0));
    assert_eq!(cache_bytes(&srv), 0, "no cache entry outlives its key");
    // The schedule's entries go in timer steps (and a server may free a flush's data in
    // the background): memory returns within seconds, not inside one command.
    let returns = |what: &str| {
        let back = wait_until(Duration::from_secs(10), || {
            used_memory(&srv) - empty < 4 << 20
        });
        assert!(back, "{} B stayed after {what}", used_memory(&srv) - empty);
    };
    returns("deleting every key");
    write_counters(&srv, n);
    assert_eq!(srv.cmd_value(&["FLUSHALL"]), v_ok());
    assert_eq!(cache_bytes(&srv), 0);
    returns("FLUSHALL");
}
// Memory, not latency, is measured: the kinds may run side by side.
per_server!(caches_stay_small_next_to_the_data);

/// With `maxmemory` at about 1.6 times the data and `allkeys-lru`, writing every counter
/// four times evicts no key: the caches give way first (here with a cache bound larger
/// than the room left, so the shrinking under pressure is what keeps the keys).
fn caches_shrink_before_the_server_evicts_a_key(kind: &ServerKind) {
    let n = counters_under_pressure();
    // The data's size, measured on a server of its own.
    let data = {
        let srv = Server::start(kind);
        write_counters(&srv, n);
        data_size(&srv)
    };
    let srv = Server::start_with(
        kind,
        ServerOptions::new()
            .config("maxmemory-policy", "allkeys-lru")
            .module_args(&["cache-max-memory", "1073741824"]),
    );
    let limit = used_memory(&srv) + data * 16 / 10;
    assert_eq!(
        srv.cmd_value(&["CONFIG", "SET", "maxmemory", &limit.to_string()]),
        v_ok()
    );
    write_counters(&srv, n);
    assert_eq!(info_i64(&srv, "stats", "evicted_keys"), 0);
    assert_eq!(srv.cmd_value(&["DBSIZE"]), v_int(n as i64));
}
per_server!(caches_shrink_before_the_server_evicts_a_key);

/// True if the server has hash-field TTLs (Redis 7.4+, Valkey 9).
fn has_field_ttls(srv: &Server) -> bool {
    srv.cmd_value(&["HSET", "probe", "f", "1"]);
    let has = !matches!(
        srv.cmd_value(&["HPEXPIRE", "probe", "100000", "FIELDS", "1", "f"]),
        Value::ServerError(_)
    );
    srv.cmd_value(&["DEL", "probe"]);
    has
}

/// A slot field expired by a user stops counting when its time passes, before the
/// server reclaims it (active expiry off), through a counter's read cache (a counter with
/// enough slots to be cached) and a STATS object's.
fn an_expired_slot_field_stops_counting_at_once(kind: &ServerKind) {
    let srv = Server::start(kind);
    if !has_field_ttls(&srv) {
        println!("no hash-field TTLs on this server: nothing to check");
        return;
    }
    assert_eq!(srv.cmd_value(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), v_ok());
    let minute = 60_000;
    let now = server_ms(&srv);
    let first = (now / minute - 19) * minute;
    assert_eq!(
        srv.cmd_value(&["TSCOUNTER.CREATE", "c", "RESOLUTIONS", "1m:1000"]),
        v_ok()
    );
    for i in 0..20 {
        let at = (first + i * minute).to_string();
        assert_eq!(srv.cmd_value(&["TSCOUNTER.INCR", "c", "AT", &at]), v_int(1));
    }
    let sum = |srv: &Server| srv.cmd_value(&["TSCOUNTER.SUM", "c", "1000m"]);
    assert_eq!(sum(&srv), v_int(20));
    let oldest = slot_fields(&srv, "c")
        .into_keys()
        .min_by_key(|f| f.rsplit(':').next().and_then(|i| i.parse::<i64>().ok()))
        .expect("a slot field");
    assert!(matches!(
        srv.cmd_value(&["HPEXPIRE", "c", "100", "FIELDS", "1", &oldest]),
        Value::Array(_)
    ));
    // Read while the field still lives: a read cache may be built now.
    assert_eq!(sum(&srv), v_int(20));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sum(&srv), v_int(19));
    let range = srv.cmd_value(&["TSCOUNTER.RANGE", "c", "1m"]);
    let Value::Array(rows) = range else {
        panic!("RANGE gave {range:?}")
    };
    assert_eq!(rows.len(), 19, "RANGE lists the expired slot");

    // STATS: one period expired by a user stops counting in GET.
    let hour = 3_600_000;
    assert_eq!(
        srv.cmd_value(&["STATS.CREATE", "s", "PERIOD", "1h", "KEEP", "24"]),
        v_ok()
    );
    for h in 0..3 {
        let at = (now - h * hour).to_string();
        assert_eq!(
            srv.cmd_value(&["STATS.ADD", "s", "10", "AT", &at]),
            v_int(1)
        );
    }
    let count = |srv: &Server| {
        let reply = srv.cmd_value(&["STATS.GET", "s", "WINDOW", "24h"]);
        map_pairs(&reply)
            .into_iter()
            .find(|(k, _)| k == "count")
            .map(|(_, v)| v)
    };
    assert_eq!(count(&srv), Some(v_int(3)));
    // Each period is two fields, `<start>:m` (moments) and `<start>:q` (sketch).
    let fields: Vec<String> = hgetall(&srv, "s")
        .into_keys()
        .filter(|f| !f.starts_with('_'))
        .collect();
    assert_eq!(fields.len(), 6, "{fields:?}");
    let oldest = fields
        .iter()
        .filter_map(|f| f.split(':').next()?.parse::<i64>().ok())
        .min()
        .expect("a period");
    let (m, q) = (format!("{oldest}:m"), format!("{oldest}:q"));
    assert!(matches!(
        srv.cmd_value(&["HPEXPIRE", "s", "100", "FIELDS", "2", &m, &q]),
        Value::Array(_)
    ));
    assert_eq!(count(&srv), Some(v_int(3)));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(count(&srv), Some(v_int(2)));
}
per_server!(an_expired_slot_field_stops_counting_at_once);
