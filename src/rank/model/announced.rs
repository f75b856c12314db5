//! What a replica's command filter announces of the primary's effects on a board's keys,
//! until the keyspace events of those commands take it (see `rank/commands/replica.rs`):
//! the members that `ZADD`/`ZINCRBY`/`ZREM` on a sorted set and `HSET`/`HMSET`/`HDEL`/
//! `HINCRBY` on a slot hash name, since the events name the key only.
//!
//! A MULTI queues all its commands before the first one runs, so each key's announcements
//! count the commands announced on it: the first event takes every member announced so
//! far, and each later event of an announced command uses up one count. A command that
//! changes nothing fires no event: its count stays until a later event on the key uses
//! it.
//!
//! Owns: the announcements and which arguments of a command are members. May not touch:
//! Redis (pure; the command layer reads the filter's arguments and the events).

use std::collections::HashMap;
use std::os::raw::c_int;

/// Announced members kept at most; beyond (commands queued and never run), the
/// announcements are forgotten and every next totals dropped.
pub const MAX_ANNOUNCED: usize = 1 << 20;

/// Where the members are among the `n` arguments of command `name` (the command name at
/// 0, the key at 1) that changes members of a sorted set or fields of a hash: `(first,
/// step)`, or `None` for any other command. `arg` reads an argument (a `ZADD`'s options).
pub fn member_positions<'a>(
    name: &[u8],
    n: usize,
    arg: impl Fn(usize) -> &'a [u8],
) -> Option<(usize, usize)> {
    if n < 3 {
        return None;
    }
    let is = |word: &str| name.eq_ignore_ascii_case(word.as_bytes());
    match name.len() {
        4 if is("hset") => Some((2, 2)),
        4 if is("hdel") || is("zrem") => Some((2, 1)),
        4 if is("zadd") => Some((zadd_first_score(n, arg).saturating_add(1), 2)),
        5 if is("hmset") => Some((2, 2)),
        7 if is("zincrby") => Some((3, 1)),
        7 if is("hincrby") => Some((2, 2)),
        _ => None,
    }
}

/// The position of a `ZADD`'s first score, after its options.
fn zadd_first_score<'a>(n: usize, arg: impl Fn(usize) -> &'a [u8]) -> usize {
    const OPTIONS: [&str; 6] = ["nx", "xx", "gt", "lt", "ch", "incr"];
    (2..n)
        .find(|&pos| {
            let word = arg(pos);
            !OPTIONS
                .iter()
                .any(|o| word.eq_ignore_ascii_case(o.as_bytes()))
        })
        .unwrap_or(n)
}

/// The commands announced on one key whose event has not come yet, and the members they
/// name that no event has taken yet.
#[derive(Debug, Default)]
struct Entry {
    commands: usize,
    members: Vec<Vec<u8>>,
}

/// What an event on an announced key made of the announcements.
#[derive(Debug, PartialEq)]
pub struct Taken {
    /// The members announced on the key (empty when an earlier event of the same MULTI
    /// took them), or `None` when the event is not one an announced command fires, or
    /// nothing was announced on the key.
    pub members: Option<Vec<Vec<u8>>>,
    /// The event comes right after one that took the key's announcements (a `del` of a
    /// hash its `HDEL` emptied).
    pub follows_taken: bool,
}

/// The announcements by key name, with their count of members.
#[derive(Debug, Default)]
pub struct Announcements {
    by_key: HashMap<Vec<u8>, Entry>,
    members: usize,
    /// The key whose event last took announcements, in its database.
    last_taken: Option<(c_int, Vec<u8>)>,
}

impl Announcements {
    /// Announces one command on `key` naming `members`; false when the announcements
    /// outgrew [`MAX_ANNOUNCED`]: they are forgotten (the caller drops every next totals).
    pub fn announce(&mut self, key: &[u8], members: Vec<Vec<u8>>) -> bool {
        self.members = self.members.saturating_add(members.len());
        let entry = self.by_key.entry(key.to_vec()).or_default();
        entry.commands = entry.commands.saturating_add(1);
        entry.members.extend(members);
        if self.members > MAX_ANNOUNCED {
            self.by_key.clear();
            self.members = 0;
            return false;
        }
        true
    }

    /// Forgets what was announced on `key` (a slot hash no next totals depend on).
    pub fn forget(&mut self, key: &[u8]) {
        if let Some(entry) = self.by_key.remove(key) {
            self.members = self.members.saturating_sub(entry.members.len());
        }
    }

    /// Forgets every announcement (no board has next totals any more).
    pub fn clear(&mut self) {
        *self = Announcements::default();
    }

    /// The event `understood` (one an announced command fires) or not on `key` in `db`:
    /// takes the key's announced members and uses up one announced command.
    pub fn take(&mut self, db: c_int, key: &[u8], understood: bool) -> Taken {
        let follows_taken = self
            .last_taken
            .as_ref()
            .is_some_and(|(d, k)| *d == db && k == key);
        self.last_taken = None;
        let entry = match self.by_key.get_mut(key) {
            Some(entry) if understood => entry,
            _ => {
                return Taken {
                    members: None,
                    follows_taken,
                }
            }
        };
        // One announced command ran: the members of all those announced so far change
        // now or have changed (a MULTI queues them all before the first one runs).
        let members = std::mem::take(&mut entry.members);
        entry.commands = entry.commands.saturating_sub(1);
        if entry.commands == 0 {
            self.by_key.remove(key);
        }
        self.members = self.members.saturating_sub(members.len());
        self.last_taken = Some((db, key.to_vec()));
        Taken {
            members: Some(members),
            follows_taken,
        }
    }

    /// Members announced and not taken yet, all keys together.
    pub fn len(&self) -> usize {
        self.members
    }

    pub fn is_empty(&self) -> bool {
        self.members == 0 && self.by_key.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The members command `args` names, as the filter reads them.
    fn members_of(args: &[&str]) -> Option<Vec<String>> {
        let arg = |pos: usize| args.get(pos).map_or(&b""[..], |a| a.as_bytes());
        let name = args.first()?.as_bytes();
        let (first, step) = member_positions(name, args.len(), arg)?;
        let positions = (first..args.len()).step_by(step);
        Some(
            positions
                .filter_map(|p| args.get(p))
                .map(|m| m.to_string())
                .collect(),
        )
    }

    fn member_list(names: &[&str]) -> Vec<Vec<u8>> {
        names.iter().map(|m| m.as_bytes().to_vec()).collect()
    }

    #[test]
    fn the_members_of_the_commands_the_primary_replicates_are_found() {
        let of = |args: &[&str]| members_of(args);
        assert_eq!(
            of(&["HSET", "b|slot|3", "a", "1", "c", "2"]).unwrap(),
            ["a", "c"]
        );
        assert_eq!(of(&["hmset", "b|slot|3", "a", "1"]).unwrap(), ["a"]);
        assert_eq!(of(&["HDEL", "b|slot|3", "a", "c"]).unwrap(), ["a", "c"]);
        assert_eq!(of(&["ZREM", "b", "a", "c"]).unwrap(), ["a", "c"]);
        assert_eq!(of(&["ZADD", "b", "5", "a", "7", "c"]).unwrap(), ["a", "c"]);
        assert_eq!(of(&["ZINCRBY", "b", "5", "a"]).unwrap(), ["a"]);
        assert_eq!(of(&["HINCRBY", "b|slot|3", "a", "5"]).unwrap(), ["a"]);
    }

    #[test]
    fn a_zadds_options_are_not_members() {
        let of = |args: &[&str]| members_of(args).unwrap_or_default();
        assert_eq!(
            of(&["ZADD", "b", "NX", "CH", "1", "a", "2", "c"]),
            ["a", "c"]
        );
        assert_eq!(of(&["zadd", "b", "xx", "gt", "incr", "1", "a"]), ["a"]);
        assert_eq!(of(&["ZADD", "b", "Lt", "3", "a"]), ["a"]);
        // Options only: no member.
        assert!(of(&["ZADD", "b", "NX", "CH"]).is_empty());
    }

    #[test]
    fn command_names_match_in_any_case_and_other_commands_name_no_member() {
        assert!(members_of(&["hSeT", "k", "f", "v"]).is_some());
        for other in [
            vec!["GET", "k", "x"],
            vec!["HGETALL", "k", "x"],
            vec!["ZADDX", "k", "1", "a"],
            vec!["DEL", "k", "j"],
            vec!["HSET", "k"],
            vec!["ZREM"],
        ] {
            assert_eq!(members_of(&other), None, "{other:?}");
        }
    }

    #[test]
    fn an_event_takes_the_members_its_command_announced() {
        let mut announced = Announcements::default();
        assert!(announced.announce(b"b", member_list(&["a", "c"])));
        assert_eq!(announced.len(), 2);
        let taken = announced.take(0, b"b", true);
        assert_eq!(taken.members, Some(member_list(&["a", "c"])));
        assert!(!taken.follows_taken);
        assert!(announced.is_empty());
        // Nothing is left for a second event.
        assert_eq!(announced.take(0, b"b", true).members, None);
    }

    #[test]
    fn in_a_multi_the_first_event_takes_every_member_and_each_later_one_uses_a_count() {
        let mut announced = Announcements::default();
        announced.announce(b"b", member_list(&["a"]));
        announced.announce(b"b", member_list(&["c"]));
        announced.announce(b"b", member_list(&["d"]));
        let first = announced.take(0, b"b", true);
        assert_eq!(first.members, Some(member_list(&["a", "c", "d"])));
        assert_eq!(announced.len(), 0);
        // The later events of the MULTI find their commands counted, with no member
        // left to take: the next totals keep following.
        assert_eq!(announced.take(0, b"b", true).members, Some(Vec::new()));
        assert_eq!(announced.take(0, b"b", true).members, Some(Vec::new()));
        assert_eq!(announced.take(0, b"b", true).members, None);
        assert!(announced.is_empty());
    }

    #[test]
    fn a_command_that_changed_nothing_leaves_its_count_for_a_later_event() {
        let mut announced = Announcements::default();
        // `HDEL b|slot|3 ghost`: no field, no event.
        announced.announce(b"b|slot|3", member_list(&["ghost"]));
        // A later command on the key, announced and run.
        announced.announce(b"b|slot|3", member_list(&["a"]));
        let taken = announced.take(0, b"b|slot|3", true);
        assert_eq!(taken.members, Some(member_list(&["ghost", "a"])));
        // The first command's count is still there for the next event.
        assert_eq!(
            announced.take(0, b"b|slot|3", true).members,
            Some(Vec::new())
        );
        assert!(announced.is_empty());
    }

    #[test]
    fn an_event_no_announced_command_fires_takes_nothing() {
        let mut announced = Announcements::default();
        announced.announce(b"b", member_list(&["a"]));
        // `rename_from`, `del`, ... on the key: the caller drops the next totals.
        let taken = announced.take(0, b"b", false);
        assert_eq!(taken.members, None);
        assert_eq!(announced.len(), 1);
        // An event on a key nothing was announced on.
        assert_eq!(announced.take(0, b"other", true).members, None);
    }

    #[test]
    fn the_del_of_a_hash_emptied_by_the_hdel_just_taken_follows_it() {
        let mut announced = Announcements::default();
        announced.announce(b"b|slot|3", member_list(&["a"]));
        assert_eq!(
            announced.take(0, b"b|slot|3", true).members,
            Some(member_list(&["a"]))
        );
        let del = announced.take(0, b"b|slot|3", false);
        assert_eq!(del.members, None);
        assert!(del.follows_taken);
        // Only right after: a second event no longer follows it.
        assert!(!announced.take(0, b"b|slot|3", false).follows_taken);
        // Nor does an event on the same name in another database.
        announced.announce(b"k", member_list(&["a"]));
        announced.take(0, b"k", true);
        assert!(!announced.take(1, b"k", false).follows_taken);
    }

    #[test]
    fn forgetting_a_key_drops_its_members_only() {
        let mut announced = Announcements::default();
        announced.announce(b"b|slot|2", member_list(&["a", "c"]));
        announced.announce(b"b", member_list(&["a"]));
        announced.forget(b"b|slot|2");
        assert_eq!(announced.len(), 1);
        assert_eq!(announced.take(0, b"b|slot|2", true).members, None);
        assert_eq!(
            announced.take(0, b"b", true).members,
            Some(member_list(&["a"]))
        );
        announced.forget(b"nothing");
        assert!(announced.is_empty());
    }

    #[test]
    fn announcements_that_outgrow_their_bound_are_forgotten() {
        let mut announced = Announcements::default();
        let half: Vec<Vec<u8>> = (0..MAX_ANNOUNCED / 2)
            .map(|i| i.to_le_bytes().to_vec())
            .collect();
        assert!(announced.announce(b"b", half.clone()));
        assert!(announced.announce(b"c", half));
        assert_eq!(announced.len(), MAX_ANNOUNCED);
        assert!(!announced.announce(b"d", member_list(&["one too many"])));
        assert!(announced.is_empty());
        assert_eq!(announced.take(0, b"b", true).members, None);
        // They start over from nothing.
        assert!(announced.announce(b"b", member_list(&["a"])));
        assert_eq!(announced.len(), 1);
    }

    #[test]
    fn clearing_forgets_every_announcement_and_the_last_event() {
        let mut announced = Announcements::default();
        announced.announce(b"b", member_list(&["a"]));
        announced.announce(b"c", member_list(&["a"]));
        announced.take(0, b"b", true);
        announced.clear();
        assert!(announced.is_empty());
        assert!(!announced.take(0, b"b", false).follows_taken);
        assert_eq!(announced.take(0, b"c", true).members, None);
    }
}
