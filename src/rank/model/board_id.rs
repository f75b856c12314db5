//! How the family's memory names a board and counts its bytes.
//!
//! Owns: those two. May not touch: Redis (pure).

/// A leaderboard in a database: (db, name its derived keys live under).
pub type BoardId = (std::os::raw::c_int, Vec<u8>);

/// Bookkeeping bytes of a hash-map entry besides its key and value (control byte, the
/// key's vector header, slack of the table): the family's memory estimates count it.
pub(super) const ENTRY_OVERHEAD: usize = 40;
