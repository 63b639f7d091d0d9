//! Conditional reads (RFC 9110 §13): a page that has not moved is answered 304 with no body,
//! so a client that polls a list costs one small exchange per poll while nothing changes.

use sha2::{Digest, Sha256};

/// The entity tag of a body: a strong tag, the first 128 bits of its SHA-256 in hex.
pub fn etag(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    format!("\"{}\"", hex::encode(&digest[..16]))
}

/// Whether an `If-None-Match` header names `etag` (or is `*`): the client holds this body
/// already. Weak tags compare by their opaque part, as the weak comparison that
/// `If-None-Match` uses says.
pub fn not_modified(if_none_match: Option<&str>, etag: &str) -> bool {
    let Some(header) = if_none_match else {
        return false;
    };
    header.split(',').map(str::trim).any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_has_one_strong_tag_and_another_body_another() {
        let tag = etag(b"{\"handoffs\":[]}");
        assert_eq!(tag, etag(b"{\"handoffs\":[]}"));
        assert_ne!(tag, etag(b"{\"handoffs\":[1]}"));
        assert!(tag.starts_with('"') && tag.ends_with('"') && tag.len() == 34, "{tag}");
    }

    #[test]
    fn if_none_match_matches_its_tag_in_a_list_weakly_or_as_a_star_and_nothing_else() {
        let tag = etag(b"page");
        assert!(not_modified(Some(&tag), &tag));
        assert!(not_modified(Some(&format!("\"other\", W/{tag}")), &tag));
        assert!(not_modified(Some("*"), &tag));
        assert!(!not_modified(Some("\"other\""), &tag));
        assert!(!not_modified(Some(""), &tag));
        assert!(!not_modified(None, &tag));
    }
}
