//! The one HTTP status of each error code, decided here; no other module chooses a status for
//! an error.

pub use handoff_core::error::{Code, Refusal};

/// A refusal, as the contract answers it: its code's one status ([`status`]) and
/// `{"error": {"code", "message"}}` (`crate::wire`).
pub type ApiError = Refusal;

/// The one HTTP status of a code.
pub fn status(code: Code) -> u16 {
    match code {
        Code::AuthRequired | Code::AuthInvalid | Code::AuthRevoked => 401,
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
        | Code::PackageAccepted
        | Code::RuntimeUnavailable
        | Code::QuestionNone
        | Code::QuestionStale
        | Code::QuestionAnswered => 409,
        Code::RequestTooLarge => 413,
        Code::IdempotencyMismatch => 422,
        Code::RequestInvalid => 400,
        Code::WaitTooMany | Code::WatchTooMany | Code::OwnerTooManyOpen | Code::OwnerRateLimited => 429,
        Code::UpgradeRequired => 426,
        // A storage failure the runtime reported: retryable, and never a 500.
        Code::StoreUnavailable => 503,
        // The operator's mistake, not the client's: no token can succeed until it is fixed.
        Code::AuthMisconfigured => 503,
        Code::WebhookNotFound => 404,
        Code::WebhookTooMany => 409,
        Code::SubscriptionNotFound => 404,
        Code::SubscriptionTooMany => 409,
        Code::SteerTooMany => 409,
        // The operator's mistake: no push route can succeed until the key is fixed.
        Code::PushMisconfigured => 503,
        Code::DeviceNotFound => 404,
        Code::DeviceTooMany => 409,
        Code::DeviceRateLimited => 429,
        Code::TimelineConflict | Code::TimelineGap | Code::TimelineFull | Code::TimelineDropped => 409,
        Code::EnrolmentNotFound | Code::MachineNotFound => 404,
        Code::EnrolmentTooMany | Code::EnrolmentRateLimited => 429,
        Code::EnrolmentRefused => 403,
        Code::MachineTooMany | Code::WorkspaceUnavailable | Code::ModelUnavailable => 409,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The contract's table (docs/openapi.yaml, `ErrorCode`): each code and its one status.
    #[test]
    fn each_code_answers_the_status_the_contract_gives_it() {
        let contract: [(&str, u16); 55] = [
            ("auth.required", 401),
            ("auth.invalid", 401),
            ("auth.forbidden", 403),
            ("handoff.not_found", 404),
            ("route.not_found", 404),
            ("store.unbound", 404),
            ("package.not_found", 404),
            ("decision.not_found", 404),
            ("blocker.not_found", 404),
            ("request.method_not_allowed", 405),
            ("handoff.conflict", 409),
            ("handoff.closed", 409),
            ("handoff.stale", 409),
            ("handoff.turn_conflict", 409),
            ("handoff.turn_running", 409),
            ("handoff.turn_out_of_order", 409),
            ("handoff.turn_finished", 409),
            ("package.stale", 409),
            ("package.accepted", 409),
            ("runtime.unavailable", 409),
            ("request.invalid", 400),
            ("request.too_large", 413),
            ("idempotency.mismatch", 422),
            ("wait.too_many", 429),
            ("watch.too_many", 429),
            ("request.upgrade_required", 426),
            ("store.unavailable", 503),
            ("auth.misconfigured", 503),
            ("question.none", 409),
            ("question.stale", 409),
            ("question.answered", 409),
            ("webhook.not_found", 404),
            ("webhook.too_many", 409),
            ("subscription.not_found", 404),
            ("subscription.too_many", 409),
            ("push.misconfigured", 503),
            ("owner.too_many_open", 429),
            ("owner.rate_limited", 429),
            ("auth.revoked", 401),
            ("device.not_found", 404),
            ("device.too_many", 409),
            ("device.rate_limited", 429),
            ("timeline.conflict", 409),
            ("timeline.gap", 409),
            ("timeline.full", 409),
            ("timeline.dropped", 409),
            ("steer.too_many", 409),
            ("enrolment.not_found", 404),
            ("enrolment.too_many", 429),
            ("enrolment.rate_limited", 429),
            ("enrolment.refused", 403),
            ("machine.not_found", 404),
            ("machine.too_many", 409),
            ("workspace.unavailable", 409),
            ("model.unavailable", 409),
        ];
        assert_eq!(contract.len(), Code::ALL.len(), "every code is in the contract's table");
        for (name, expected) in contract {
            let code = Code::parse(name).unwrap_or_else(|| panic!("{name} is not a code"));
            assert_eq!(status(code), expected, "{name}");
        }
    }

    #[test]
    fn no_code_is_a_server_error_but_the_operators_two() {
        for code in Code::ALL {
            assert!(
                status(code) < 500
                    || matches!(code, Code::StoreUnavailable | Code::AuthMisconfigured | Code::PushMisconfigured),
                "{code:?}"
            );
        }
    }
}
