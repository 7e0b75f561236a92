//! A run's id: the one rule for what may name a run folder, whoever supplies the id (the clock, a
//! request to `serve`, a queue message's key, an event-mode request's context).

use crate::error::{Error, Result};

/// An id that can name a run folder: 1 to [`RunId::MAX_LEN`] ASCII letters, digits, `-` or `_`,
/// so nothing in it can climb out of `runs/` or hide as a dot-file.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(String);

impl RunId {
    /// Longest id (a ULID is 26; a queue key's readable part and hash stay under it).
    pub const MAX_LEN: usize = 64;

    /// Whether `id` follows the rule.
    pub fn is_valid(id: &str) -> bool {
        !id.is_empty() && id.len() <= Self::MAX_LEN && id.chars().all(plain)
    }

    /// `id` as a run id, or a usage error naming it.
    pub fn parse(id: &str) -> Result<RunId> {
        if Self::is_valid(id) {
            return Ok(RunId(id.to_string()));
        }
        Err(Error::usage(format!("`{id}` is not a valid run id"))
            .with_hint(format!("a run id is 1 to {} ASCII letters, digits, `-` or `_`", Self::MAX_LEN)))
    }

    /// A new ULID id; deterministic under a fixed clock.
    pub fn generate() -> RunId {
        RunId(crate::clock::new_run_id())
    }

    /// The id for an idempotency key (a queue message's `key`, a daily slot): the key itself when
    /// it follows the rule, else its readable part and a hash of the whole (stable across
    /// versions: FNV-1a, not std's hasher), so every delivery of one key maps to one run.
    pub fn for_key(key: &str) -> RunId {
        if Self::is_valid(key) {
            return RunId(key.to_string());
        }
        let readable: String = key.chars().map(|c| if plain(c) { c } else { '_' }).take(40).collect();
        RunId(format!("{readable}-{:016x}", fnv1a(key.as_bytes())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for RunId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

fn plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// A hash stable across versions and platforms (FNV-1a 64), for ids made from keys.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_ids_name_a_run_and_every_key_maps_to_one() {
        assert!(RunId::is_valid("01KABCDEF0123456789ABCDEFG"));
        for bad in ["", ".", "..", "../x", "a/b", "a b", ".hidden", "é", &"x".repeat(65)] {
            assert!(!RunId::is_valid(bad), "{bad}");
            assert!(RunId::parse(bad).is_err(), "{bad}");
        }
        for key in ["ticket 42/a", "../../etc", &"k".repeat(300), "ok-key_1"] {
            let id = RunId::for_key(key);
            assert!(RunId::is_valid(id.as_str()), "{id}");
            assert_eq!(id, RunId::for_key(key));
        }
        assert_ne!(RunId::for_key("a/b"), RunId::for_key("a_b"));
    }
}
