//! The contract's error vocabulary: every refusal the service can give has one [`Code`],
//! named as the API writes it (`handoff.turn_conflict`), and a message for a person. The
//! core refuses with a [`Refusal`]; which HTTP status each code answers is the API's to
//! decide (`handoff_api::error`), not the core's.

use serde::Serialize;

crate::listed_enum! {
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
        /// A hand-off to a runtime the session's machine reported absent or signed out.
        RuntimeUnavailable,
        /// A watch past its role's cap of sockets on one hand-off.
        WatchTooMany,
        /// A watch asked for without `Upgrade: websocket`.
        UpgradeRequired,
        /// An answer when no question is open.
        QuestionNone,
        /// An answer naming another question than the open one.
        QuestionStale,
        /// An answer to a question already answered with another option.
        QuestionAnswered,
        /// No webhook of this owner has that id.
        WebhookNotFound,
        /// A webhook past `WEBHOOKS_PER_OWNER_MAX`.
        WebhookTooMany,
        /// No push subscription of this owner has that id.
        SubscriptionNotFound,
        /// A push subscription past `PUSH_SUBSCRIPTIONS_PER_OWNER_MAX`.
        SubscriptionTooMany,
        /// This environment's VAPID key is missing, unreadable, or (outside `local`) the
        /// public development pair.
        PushMisconfigured,
        /// A create past the owner's cap of open hand-offs.
        OwnerTooManyOpen,
        /// A create past the owner's creations per minute.
        OwnerRateLimited,
        /// A machine token that a newer one, minted for the same hand-off, has ended; or a
        /// device's credential that was revoked, signed out, or ended by its idle time or life.
        AuthRevoked,
        /// No device of this owner has that id.
        DeviceNotFound,
        /// A sign-in past `DEVICES_PER_OWNER_MAX`.
        DeviceTooMany,
        /// A sign-in past `DEVICE_SIGN_INS_PER_PERIOD_MAX` in its period.
        DeviceRateLimited,
        /// A timeline event's `seq` taken already with other content.
        TimelineConflict,
        /// A batch of events that starts past the turn's next `seq`.
        TimelineGap,
        /// A batch past the turn's cap of events or bytes.
        TimelineFull,
        /// A batch for a turn whose events were dropped (older than the newest kept).
        TimelineDropped,
        /// A steer past `STEERS_PER_TURN_MAX` for the current turn.
        SteerTooMany,
        /// No enrolment waits under this code: wrong, expired, or decided.
        EnrolmentNotFound,
        /// An enrolment past `PENDING_CODES_MAX`, or past its address's codes or starts per minute.
        EnrolmentTooMany,
        /// A code tried past `ENROLMENT_CODE_TRIES_PER_MINUTE_MAX`.
        EnrolmentRateLimited,
        /// The owner refused the enrolment, or the machine expected another owner.
        EnrolmentRefused,
        /// No machine of this owner has that name.
        MachineNotFound,
        /// An enrolment past `MACHINES_PER_OWNER_MAX`.
        MachineTooMany,
        /// A create naming a workspace its enrolled machine did not report.
        WorkspaceUnavailable,
        /// A create naming a model its runtime does not reach on its enrolled machine.
        ModelUnavailable,
    }
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::AuthRequired => "auth.required",
            Code::AuthInvalid => "auth.invalid",
            Code::AuthForbidden => "auth.forbidden",
            Code::AuthRevoked => "auth.revoked",
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
            Code::RuntimeUnavailable => "runtime.unavailable",
            Code::WatchTooMany => "watch.too_many",
            Code::UpgradeRequired => "request.upgrade_required",
            Code::QuestionNone => "question.none",
            Code::QuestionStale => "question.stale",
            Code::QuestionAnswered => "question.answered",
            Code::WebhookNotFound => "webhook.not_found",
            Code::WebhookTooMany => "webhook.too_many",
            Code::SubscriptionNotFound => "subscription.not_found",
            Code::SubscriptionTooMany => "subscription.too_many",
            Code::PushMisconfigured => "push.misconfigured",
            Code::OwnerTooManyOpen => "owner.too_many_open",
            Code::OwnerRateLimited => "owner.rate_limited",
            Code::DeviceNotFound => "device.not_found",
            Code::DeviceTooMany => "device.too_many",
            Code::DeviceRateLimited => "device.rate_limited",
            Code::TimelineConflict => "timeline.conflict",
            Code::TimelineGap => "timeline.gap",
            Code::TimelineFull => "timeline.full",
            Code::TimelineDropped => "timeline.dropped",
            Code::SteerTooMany => "steer.too_many",
            Code::EnrolmentNotFound => "enrolment.not_found",
            Code::EnrolmentTooMany => "enrolment.too_many",
            Code::EnrolmentRateLimited => "enrolment.rate_limited",
            Code::EnrolmentRefused => "enrolment.refused",
            Code::MachineNotFound => "machine.not_found",
            Code::MachineTooMany => "machine.too_many",
            Code::WorkspaceUnavailable => "workspace.unavailable",
            Code::ModelUnavailable => "model.unavailable",
        }
    }

    pub fn parse(s: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A command or a value the rules refuse: nothing changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: Code,
    pub message: String,
}

impl Refusal {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Refusal { code, message: message.into() }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Refusal::new(Code::RequestInvalid, message)
    }

    /// The one 503: storage, an object or the runtime failed, and a retry may succeed. What
    /// failed goes to the log only (it can carry SQL and internal names), never to the client.
    pub fn unavailable() -> Self {
        Refusal::new(Code::StoreUnavailable, "the hand-off store is unavailable; try again")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_name() {
        for code in Code::ALL {
            assert_eq!(Code::parse(code.as_str()), Some(code));
        }
        assert_eq!(Code::parse("handoff.nope"), None);
    }
}
