//! The API's error codes as an enum. The service crate names every code it knows
//! ([`handoff_api::error::Code`]); a code this build does not know yet is kept as it was sent, so
//! a newer server never turns into a client error.

use handoff_api::error::Code;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    Known(Code),
    /// A code this client does not know, preserved verbatim.
    Unknown(String),
}

impl ErrorCode {
    pub fn parse(s: &str) -> ErrorCode {
        Code::parse(s).map_or_else(|| ErrorCode::Unknown(s.to_string()), ErrorCode::Known)
    }

    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::Known(code) => code.as_str(),
            ErrorCode::Unknown(s) => s,
        }
    }

    /// `auth.required`, `auth.invalid`, `auth.forbidden` and any future `auth.*` code.
    pub fn is_auth(&self) -> bool {
        match self {
            ErrorCode::Known(c) => {
                matches!(c, Code::AuthRequired | Code::AuthInvalid | Code::AuthForbidden | Code::AuthMisconfigured)
            }
            ErrorCode::Unknown(s) => s.starts_with("auth."),
        }
    }

    pub fn is(&self, code: Code) -> bool {
        *self == ErrorCode::Known(code)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_code_round_trips_and_an_unknown_one_is_preserved() {
        for code in Code::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), ErrorCode::Known(code));
            assert_eq!(ErrorCode::parse(code.as_str()).as_str(), code.as_str());
        }
        let future = ErrorCode::parse("policy.too_generous");
        assert_eq!(future, ErrorCode::Unknown("policy.too_generous".into()));
        assert_eq!(future.to_string(), "policy.too_generous");
    }

    #[test]
    fn auth_codes_are_told_apart_from_refusals() {
        assert!(ErrorCode::parse("auth.required").is_auth());
        assert!(ErrorCode::parse("auth.forbidden").is_auth());
        assert!(ErrorCode::parse("auth.someday").is_auth());
        assert!(!ErrorCode::parse("handoff.stale").is_auth());
    }
}
