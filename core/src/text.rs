//! The rules for text: what one line and several lines may hold, and text cut to a byte limit
//! without splitting a character (the briefing's sections, and the summaries and versions a
//! machine's reporters send within the service's limits).

use crate::error::Refusal;

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

/// A required one-line text: not blank, no control characters, at most `max_bytes`.
pub(crate) fn single_line(field: &str, value: &str, max_bytes: usize) -> Result<(), Refusal> {
    required(field, value, max_bytes)?;
    if value.chars().any(char::is_control) {
        return Err(Refusal::invalid(format!("{field}: must be one line without control characters")));
    }
    Ok(())
}

/// A required text that may span lines: not blank, [`lines_only`], at most `max_bytes`.
pub(crate) fn multi_line(field: &str, value: &str, max_bytes: usize) -> Result<(), Refusal> {
    required(field, value, max_bytes)?;
    lines_only(field, value)
}

/// The one rule for text that may span lines: `\n` and `\t` are its only control characters.
/// Every other C0 or C1 control (`\r`, ESC, DEL, CSI…) is refused, so that no text the service
/// hands on can move a terminal's cursor, rewrite a line, or set its title or clipboard.
pub fn lines_only(field: &str, value: &str) -> Result<(), Refusal> {
    let allowed = |c: char| matches!(c, '\n' | '\t');
    if value.chars().any(|c| c.is_control() && !allowed(c)) {
        return Err(Refusal::invalid(format!("{field}: control characters other than newlines (\\n) and tabs")));
    }
    Ok(())
}

fn required(field: &str, value: &str, max_bytes: usize) -> Result<(), Refusal> {
    if value.trim().is_empty() {
        return Err(Refusal::invalid(format!("{field}: must not be empty")));
    }
    if value.len() > max_bytes {
        return Err(Refusal::invalid(format!("{field}: longer than {max_bytes} bytes")));
    }
    Ok(())
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
