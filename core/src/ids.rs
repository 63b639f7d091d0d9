//! Ids: the shape of session, machine, size, owner and runtime ids, and the hand-off id that
//! derives from an owner and a session.

use crate::limits::ID_CHARS_MAX;
use sha2::{Digest, Sha256};

/// Session, machine, size and owner ids: 1..=128 characters of `[A-Za-z0-9._:-]`.
pub fn is_id(s: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
    !s.is_empty() && s.len() <= ID_CHARS_MAX && s.chars().all(allowed)
}

/// Hex digits of a hand-off id after its `ho_` prefix (128 bits of SHA-256).
const HANDOFF_ID_HEX_CHARS: usize = 32;

/// One hand-off per session: the id derives from the owner and the session, so a second
/// create for the same session finds the same Durable Object.
pub fn handoff_id(owner: &str, session: &str) -> String {
    let digest = Sha256::new().chain_update(owner).chain_update("\n").chain_update(session).finalize();
    format!("ho_{}", &hex::encode(digest)[..HANDOFF_ID_HEX_CHARS])
}

pub fn is_handoff_id(s: &str) -> bool {
    s.strip_prefix("ho_").is_some_and(|hex| {
        hex.len() == HANDOFF_ID_HEX_CHARS && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}
