//! Ids: the shape of session, machine, size, owner and runtime ids, and the hand-off id that
//! derives from an owner and a session.

use crate::limits::ID_CHARS_MAX;
use sha2::{Digest, Sha256};

/// Session, machine, size and owner ids: 1..=128 characters of `[A-Za-z0-9._:-]`.
pub fn is_id(s: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
    !s.is_empty() && s.len() <= ID_CHARS_MAX && s.chars().all(allowed)
}

/// A name of `[A-Za-z0-9._:-]` at most `max_bytes` long (a runtime, a permission mode), or
/// 400 `request.invalid` naming `field`.
pub fn check_name(field: &str, value: &str, max_bytes: usize) -> Result<(), crate::error::Refusal> {
    if value.len() > max_bytes || !is_id(value) {
        return Err(crate::error::Refusal::invalid(format!("{field}: 1-{max_bytes} characters of [A-Za-z0-9._:-]")));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_one_to_128_characters_of_the_allowed_set() {
        assert!(is_id("a"));
        assert!(is_id("chat-42.session_1:x"));
        assert!(is_id(&"a".repeat(128)));
        for bad in ["", " ", "a/b", "../x", "a%2Fb", "é", &"a".repeat(129)] {
            assert!(!is_id(bad), "{bad}");
        }
    }

    #[test]
    fn the_handoff_id_derives_from_owner_and_session_only() {
        let a = handoff_id("alice", "s1");
        assert_eq!(a, handoff_id("alice", "s1"));
        assert_ne!(a, handoff_id("bob", "s1"));
        assert_ne!(a, handoff_id("alice", "s2"));
        assert!(is_handoff_id(&a));
        assert!(!is_handoff_id("ho_../../x"));
        assert!(!is_handoff_id(&a.to_uppercase()));
    }
}
