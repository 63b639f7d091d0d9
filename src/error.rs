//! The API's typed error codes. Each code has exactly one HTTP status, decided here;
//! no other module chooses a status for an error.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    AuthRequired,
    AuthInvalid,
    AuthForbidden,
    HandoffNotFound,
    HandoffConflict,
    HandoffClosed,
    HandoffStale,
    TurnConflict,
    TurnRunning,
    TurnOutOfOrder,
    TurnFinished,
    RequestInvalid,
    RequestTooLarge,
    RouteNotFound,
    MethodNotAllowed,
    WaitTooMany,
    StoreUnbound,
    StoreUnavailable,
    IdempotencyMismatch,
    PackageNotFound,
    PackageStale,
    PackageAccepted,
    DecisionNotFound,
    BlockerNotFound,
    /// A deployed environment whose signing key is the public development key or too short.
    AuthMisconfigured,
}

impl Code {
    pub const ALL: [Code; 25] = [
        Code::AuthRequired,
        Code::AuthInvalid,
        Code::AuthForbidden,
        Code::HandoffNotFound,
        Code::HandoffConflict,
        Code::HandoffClosed,
        Code::HandoffStale,
        Code::TurnConflict,
        Code::TurnRunning,
        Code::TurnOutOfOrder,
        Code::TurnFinished,
        Code::RequestInvalid,
        Code::RequestTooLarge,
        Code::RouteNotFound,
        Code::MethodNotAllowed,
        Code::WaitTooMany,
        Code::StoreUnbound,
        Code::StoreUnavailable,
        Code::IdempotencyMismatch,
        Code::PackageNotFound,
        Code::PackageStale,
        Code::PackageAccepted,
        Code::DecisionNotFound,
        Code::BlockerNotFound,
        Code::AuthMisconfigured,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Code::AuthRequired => "auth.required",
            Code::AuthInvalid => "auth.invalid",
            Code::AuthForbidden => "auth.forbidden",
            Code::HandoffNotFound => "handoff.not_found",
            Code::HandoffConflict => "handoff.conflict",
            Code::HandoffClosed => "handoff.closed",
            Code::HandoffStale => "handoff.stale",
            Code::TurnConflict => "handoff.turn_conflict",
            Code::TurnRunning => "handoff.turn_running",
            Code::TurnOutOfOrder => "handoff.turn_out_of_order",
            Code::TurnFinished => "handoff.turn_finished",
            Code::RequestInvalid => "request.invalid",
            Code::RequestTooLarge => "request.too_large",
            Code::RouteNotFound => "route.not_found",
            Code::MethodNotAllowed => "request.method_not_allowed",
            Code::WaitTooMany => "wait.too_many",
            Code::StoreUnbound => "store.unbound",
            Code::StoreUnavailable => "store.unavailable",
            Code::IdempotencyMismatch => "idempotency.mismatch",
            Code::PackageNotFound => "package.not_found",
            Code::PackageStale => "package.stale",
            Code::PackageAccepted => "package.accepted",
            Code::DecisionNotFound => "decision.not_found",
            Code::BlockerNotFound => "blocker.not_found",
            Code::AuthMisconfigured => "auth.misconfigured",
        }
    }

    pub fn parse(s: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The one HTTP status of this code.
    pub fn status(self) -> u16 {
        match self {
            Code::AuthRequired | Code::AuthInvalid => 401,
            Code::AuthForbidden => 403,
            Code::HandoffNotFound
            | Code::RouteNotFound
            | Code::StoreUnbound
            | Code::PackageNotFound
            | Code::DecisionNotFound
            | Code::BlockerNotFound => 404,
            Code::MethodNotAllowed => 405,
            Code::HandoffConflict
            | Code::HandoffClosed
            | Code::HandoffStale
            | Code::TurnConflict
            | Code::TurnRunning
            | Code::TurnOutOfOrder
            | Code::TurnFinished
            | Code::PackageStale
            | Code::PackageAccepted => 409,
            Code::RequestTooLarge => 413,
            Code::IdempotencyMismatch => 422,
            Code::RequestInvalid => 400,
            Code::WaitTooMany => 429,
            // A storage failure the runtime reported: retryable, and never a 500.
            Code::StoreUnavailable => 503,
            // The operator's mistake, not the client's: no token can succeed until it is fixed.
            Code::AuthMisconfigured => 503,
        }
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// An error answer before it is rendered: `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: Code,
    pub message: String,
}

impl ApiError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ApiError { code, message: message.into() }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError::new(Code::RequestInvalid, message)
    }

    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"error": {"code": self.code, "message": self.message}})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_and_none_is_a_server_error() {
        for code in Code::ALL {
            assert_eq!(Code::parse(code.as_str()), Some(code));
            assert!(code.status() < 500 || matches!(code, Code::StoreUnavailable | Code::AuthMisconfigured), "{code:?}");
        }
    }
}
