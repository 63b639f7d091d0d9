//! Text cut to a byte limit without splitting a character: the briefing's sections, and the
//! summaries and versions a machine's reporters send within the service's limits.

/// The longest prefix of `s` of at most `max_bytes` that ends on a character boundary.
pub fn clip(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut end = max_bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clip_keeps_what_fits_and_never_splits_a_character() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "abc");
        assert_eq!(clip("aé", 2), "a", "é is two bytes: cut before it, not inside");
        assert_eq!(clip("aé", 3), "aé");
        assert_eq!(clip("é", 0), "");
    }
}
