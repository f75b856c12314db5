//! Keyspace notifications as a test sees them: every `(channel, message)` published on
//! the channels matching a pattern while some work runs.

use std::time::Duration;

use crate::Server;

/// The `(channel, payload)` pairs published on channels matching `pattern` while `work`
/// runs (the subscription is made first, and stragglers are waited for 300 ms).
pub fn events_during(srv: &Server, pattern: &str, work: impl FnOnce()) -> Vec<(String, String)> {
    let client = redis::Client::open(srv.url_resp2()).expect("client");
    let mut conn = client.get_connection().expect("connection");
    let mut pubsub = conn.as_pubsub();
    pubsub.psubscribe(pattern).expect("psubscribe");
    pubsub
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    work();
    let mut events = Vec::new();
    while let Ok(message) = pubsub.get_message() {
        let payload: String = message.get_payload().expect("payload");
        events.push((message.get_channel_name().to_string(), payload));
    }
    events
}
