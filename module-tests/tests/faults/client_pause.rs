//! `CLIENT PAUSE WRITE` defers the timer's expiry instead of replicating during a pause.

use super::*;

per_server!(client_pause_defers_expiry);
/// `CLIENT PAUSE WRITE` on a primary with a replica while objects have slots to expire:
/// the timer must wait (Redis 7.0 aborted on an assertion when a timer replicated during
/// a pause; a cluster manual failover pauses the same way), then resume.
fn client_pause_defers_expiry(kind: &ServerKind) {
    let k = &kind.name;
    let (primary, replica) = start_pair(kind, ServerOptions::new());
    for fam in [COUNTER, RANK, STATS] {
        setup_and_write(&primary, fam, "", 0..4);
    }
    assert_eq!(
        primary.cmd_value(&["CLIENT", "PAUSE", "1500", "WRITE"]),
        v_ok()
    );
    let during = primary.dump_keyspace();
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        primary.dump_keyspace(),
        during,
        "{k}: the timer wrote during a pause"
    );
    primary.assert_alive();
    std::thread::sleep(Duration::from_millis(600));
    // After the pause, expiry resumes and reaches the replica.
    let resumed = wait_until(Duration::from_secs(10), || {
        primary.dump_keyspace() != during
    });
    assert!(resumed, "{k}: expiry did not resume after the pause");
    let compared = assert_replica_equal(&primary, &replica, "after CLIENT PAUSE");
    assert!(!compared.is_empty(), "{k}: nothing to compare");
    primary.assert_alive();
    replica.assert_alive();
}
