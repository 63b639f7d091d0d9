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

/// A page as it is answered: 200 with its body, or 304 with none when the client holds it;
/// either way with its `ETag`, and `Cache-Control` saying a cache may keep it but must ask
/// each time whether it moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conditional {
    pub status: u16,
    pub body: Vec<u8>,
    pub headers: [(&'static str, String); 2],
}

pub fn answer(body: Vec<u8>, if_none_match: Option<&str>) -> Conditional {
    let tag = etag(&body);
    let (status, body) = if not_modified(if_none_match, &tag) { (304, Vec::new()) } else { (200, body) };
    Conditional { status, body, headers: [("ETag", tag), ("Cache-Control", "private, no-cache".to_string())] }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_the_client_holds_is_304_with_no_body_and_either_answer_names_its_tag_and_asks_caches_to_check() {
        let page = b"{\"handoffs\":[]}".to_vec();
        let fresh = answer(page.clone(), None);
        assert_eq!((fresh.status, fresh.body.as_slice()), (200, page.as_slice()));
        let held = answer(page.clone(), Some(&fresh.headers[0].1));
        assert_eq!((held.status, held.body.len()), (304, 0));
        for a in [&fresh, &held] {
            assert_eq!(a.headers[0], ("ETag", etag(&page)));
            assert_eq!(a.headers[1], ("Cache-Control", "private, no-cache".to_string()));
        }
        assert_eq!(answer(page, Some("\"other\"")).status, 200);
    }

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
