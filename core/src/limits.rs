//! Every limit of the service, named once. Units are last in the names.

/// Largest request body accepted; past it the answer is 413 `request.too_large`, given as soon
/// as the limit is passed: the body is read as a stream and never held beyond this.
pub const BODY_BYTES_MAX: usize = 16 * 1024;
/// Largest body of the three routes that carry a person's words or a tool's whole input: a
/// create and an open turn (a `prompt`), and a report (a question's `input`). Every other
/// route keeps [`BODY_BYTES_MAX`]; the route table (`api/src/routes.rs`) says which cap each
/// route has. 64 KiB holds the largest of those bodies with every byte escaped (asserted below).
pub const WORDS_BODY_BYTES_MAX: usize = 64 * 1024;
/// The shortest signing key a deployed environment (any `HANDOFF_ENV` but `local`) accepts;
/// under it, or with the public development key, every authenticated route answers 503
/// `auth.misconfigured`.
pub const SIGNING_KEY_BYTES_MIN: usize = 32;
/// Longest prompt a turn may carry: the owner's words that open it (UTF-8 bytes; `\n` and
/// `\t` allowed, no other control character).
pub const PROMPT_BYTES_MAX: usize = 16 * 1024;
/// Turns whose prompts a hand-off keeps: the newest ones. An older lineage entry keeps its
/// place with `"prompt": null` and `"prompt_dropped": true`. Within the lineage tail the object
/// holds in memory, so that the entry whose prompt goes is at hand to be written again.
pub const PROMPT_TURNS_KEPT_MAX: u64 = 32;
/// Steers one turn takes (`POST …/steer`); past it, 409 `steer.too_many`. Each is a prompt's
/// length at most, and is kept, and dropped, with its turn's prompt.
pub const STEERS_PER_TURN_MAX: usize = 8;
/// The owner's words one hand-off keeps, whatever its turns: the newest
/// [`PROMPT_TURNS_KEPT_MAX`] turns' prompts and steers in the lineage, and the current one's
/// copy on the record (33 × 9 × 16 KiB, 4.6 MiB).
pub const PROMPT_BYTES_KEPT_PER_HANDOFF_MAX: usize =
    (PROMPT_TURNS_KEPT_MAX as usize + 1) * (1 + STEERS_PER_TURN_MAX) * PROMPT_BYTES_MAX;
/// Longest turn summary a report may carry (UTF-8 bytes).
pub const SUMMARY_BYTES_MAX: usize = 4 * 1024;
/// Rows an owner's list page holds when `limit` is not given.
pub const LIST_LIMIT_DEFAULT: u32 = 50;
/// The most rows one list page may hold.
pub const LIST_LIMIT_MAX: u32 = 200;
/// Runtimes one suggestion policy may name.
pub const POLICY_RUNTIMES_MAX: usize = 16;
/// Runtimes one machine report (`PUT …/runtimes`) may list.
pub const MACHINE_RUNTIMES_MAX: usize = 16;
/// A reported runtime's version text (UTF-8 bytes).
pub const RUNTIME_VERSION_BYTES_MAX: usize = 64;
/// How long a machine's runtimes report counts: past it, nothing is suggested from it and it
/// refuses no hand-off. A day, like a machine token: a machine reports when a session starts
/// (`handoff hook claude-code` on `SessionStart`) and again when its report is half this old.
pub const RUNTIMES_FRESH_MS: i64 = 24 * 60 * 60 * 1000;
/// Session, machine, size and owner ids: 1..=ID_CHARS_MAX characters of `[A-Za-z0-9._:-]`.
pub const ID_CHARS_MAX: usize = 128;
/// A bearer token longer than this is refused unread (`auth.invalid`).
pub const TOKEN_BYTES_MAX: usize = 4 * 1024;
/// Clock skew tolerated on a token's `exp` (and `nbf`).
pub const TOKEN_CLOCK_SKEW_S: i64 = 60;
/// Lifetime of the machine token minted by every create answer.
pub const MACHINE_TOKEN_TTL_S: i64 = 24 * 60 * 60;
/// A wait without `timeout` holds this long.
pub const WAIT_TIMEOUT_S_DEFAULT: u64 = 30;
/// The longest a wait may be held.
pub const WAIT_TIMEOUT_S_MAX: u64 = 300;
/// Random extra hold added to each wait so that many waiters do not wake in step.
pub const WAIT_JITTER_MS_MAX: u64 = 1_000;
/// Owner waits one hand-off holds at once; past it, 429 `wait.too_many` naming this cap.
/// Sized for a few thousand devices watching one session (the benchmark holds 5,000).
pub const OWNER_WAITERS_PER_HANDOFF_MAX: usize = 10_000;
/// Machine waits one hand-off holds at once, counted apart from the owner's so that a machine
/// token cannot starve the owner of waits; past it, 429 `wait.too_many` naming this cap.
/// A session has one machine: a few waits cover its reporters and their retries.
pub const MACHINE_WAITERS_PER_HANDOFF_MAX: usize = 100;
/// Owner sockets one hand-off's watch holds at once; past it, 429 `watch.too_many` naming this
/// cap. As many as its owner waits: a few thousand devices following one session (the
/// benchmark holds 10,000). An idle socket costs the object nothing while it hibernates.
pub const OWNER_WATCHERS_PER_HANDOFF_MAX: usize = 10_000;
/// Machine sockets one hand-off's watch holds at once, counted apart from the owner's so that
/// a machine token cannot take the owner's places; past it, 429 `watch.too_many`.
pub const MACHINE_WATCHERS_PER_HANDOFF_MAX: usize = 100;
/// Bytes one watching socket may have been sent and not acknowledged (`{"after": V}`). The
/// runtime shows no count of a socket's unsent bytes, so this bounds them from above: a send
/// that would pass it closes the socket with 1013 instead of buffering without bound.
pub const WATCH_UNACKED_BYTES_MAX: usize = 512 * 1024;
/// Frames one watching socket may have been sent and not acknowledged; past it, 1013 as for
/// the bytes. Keeps the socket's attachment (which lists them) small.
pub const WATCH_UNACKED_FRAMES_MAX: usize = 64;
/// A `handoff.v2` watch's timeline frame holds events up to this many bytes (an event alone
/// always fits, asserted below).
pub const WATCH_EVENTS_FRAME_BYTES_MAX: usize = 64 * 1024;

// ---- The work record (src/work.rs). Text limits are UTF-8 bytes. ----

/// A work title, an artifact title, a blocker title.
pub const TITLE_BYTES_MAX: usize = 200;
/// The work's goal.
pub const GOAL_BYTES_MAX: usize = 4 * 1024;
/// `task_type`, `priority`, an artifact's `type`: short labels.
pub const LABEL_BYTES_MAX: usize = 64;
/// One constraint or one acceptance criterion.
pub const CRITERION_BYTES_MAX: usize = 1024;
/// Constraints on one work record.
pub const CONSTRAINTS_MAX: usize = 50;
/// Acceptance criteria on one work record (and so the most `unmet` indices a report names).
pub const ACCEPTANCE_CRITERIA_MAX: usize = 50;
/// A decision's statement.
pub const STATEMENT_BYTES_MAX: usize = 1024;
/// A decision's rationale.
pub const RATIONALE_BYTES_MAX: usize = 2 * 1024;
/// Evidence URIs on one decision.
pub const EVIDENCE_PER_DECISION_MAX: usize = 10;
/// An evidence URI or an artifact URI.
pub const URI_BYTES_MAX: usize = 2 * 1024;
/// A workspace file path.
pub const PATH_BYTES_MAX: usize = 1024;
/// Files in one workspace report.
pub const FILES_PER_REPORT_MAX: usize = 500;
/// Decisions one hand-off keeps (superseded ones included); past it, 413 `request.too_large`.
pub const DECISIONS_PER_HANDOFF_MAX: usize = 500;
/// Artifact versions one hand-off keeps, every title's versions together.
pub const ARTIFACT_VERSIONS_PER_HANDOFF_MAX: usize = 500;
/// Blockers one hand-off keeps, resolved ones included.
pub const BLOCKERS_PER_HANDOFF_MAX: usize = 200;
/// Distinct workspace paths one hand-off keeps.
pub const FILES_PER_HANDOFF_MAX: usize = 5_000;
/// The schemes an artifact or evidence URI may have (compared in any case, and followed by
/// `//host`); a relative reference has none. Any other scheme is 400 `request.invalid`.
pub const URI_SCHEMES_ACCEPTED: [&str; 2] = ["http", "https"];

// ---- Packages (src/package.rs). ----

/// The package format this service compiles.
pub const PACKAGE_FORMAT: u32 = 1;
/// Standing decisions in one package (the newest); the rest are counted in `truncation`.
pub const PACKAGE_DECISIONS_MAX: usize = 20;
/// Artifact titles in one package (the newest), each at its latest version.
pub const PACKAGE_ARTIFACTS_MAX: usize = 20;
/// Relevant file paths in one package.
pub const PACKAGE_FILES_MAX: usize = 100;
/// The next turn's objective.
pub const OBJECTIVE_BYTES_MAX: usize = 2 * 1024;
/// The next turn's purpose.
pub const PURPOSE_BYTES_MAX: usize = 1024;
/// The next turn's runtime name (e.g. `claude-code`).
pub const RUNTIME_BYTES_MAX: usize = 64;
/// A running report's permission mode (Claude Code's `--permission-mode`, Codex's approval
/// policy, e.g. `acceptEdits`, `untrusted`): a short token.
pub const PERMISSION_MODE_BYTES_MAX: usize = 32;
/// A create's workspace name (one the machine's daemon names, e.g. `api`).
pub const WORKSPACE_BYTES_MAX: usize = 64;
/// A create's model name (e.g. `opus`, `gpt-5-codex`).
pub const MODEL_BYTES_MAX: usize = 128;
/// How long a machine's enrolment code waits for its owner's approval (`handoff machine enrol`
/// waits as long): 10 minutes, then it expires.
pub const ENROLMENT_CODE_TTL_MS: i64 = 10 * 60 * 1000;
/// Enrolment codes live at once, across every owner: with 40 bits a code, the odds of one try
/// guessing a live one stay under 1e-9 (`enrolment::guess_odds_per_try`).
pub const PENDING_CODES_MAX: usize = 1_000;
/// Live enrolment codes one client address may hold.
pub const PENDING_CODES_PER_ADDRESS_MAX: usize = 5;
/// Enrolments one client address may start per minute.
pub const ENROLMENTS_PER_ADDRESS_PER_MINUTE_MAX: u32 = 10;
/// Codes one owner may try (look up or approve) per minute.
pub const ENROLMENT_CODE_TRIES_PER_MINUTE_MAX: u32 = 10;
/// Machines one owner may have enrolled at once.
pub const MACHINES_PER_OWNER_MAX: usize = 32;
/// An enrolling machine's host name, as the owner sees it before Approve (an id's length).
pub const HOST_NAME_BYTES_MAX: usize = 128;
/// Workspaces one machine's presence may name.
pub const MACHINE_WORKSPACES_MAX: usize = 32;
/// Models one runtime of a machine's presence may name.
pub const MACHINE_MODELS_PER_RUNTIME_MAX: usize = 64;
/// Running sessions one machine's presence may name.
pub const MACHINE_SESSIONS_MAX: usize = 64;
/// Hand-offs created for one machine that it lists, the newest kept (the open cap's size).
pub const MACHINE_HANDOFFS_KEPT: usize = 1_000;
/// The longest a machine's follow of its list (`GET /v1/machine/handoffs?after=V`) is held
/// before it answers the unchanged list: under the 60 s many proxies allow an idle request.
pub const MACHINE_FOLLOW_TIMEOUT_S_MAX: u64 = 30;
/// Follows one machine may have held at once (its daemon holds one; a restart's drop gives its
/// place back, and a few more cover an old and a new daemon overlapping); past it, 429
/// `wait.too_many` naming this cap, as a hand-off's waits.
pub const MACHINE_FOLLOWS_PER_MACHINE_MAX: usize = 8;
/// How often an enrolled machine reports its presence: well under [`MACHINE_ONLINE_WITHIN_MS`].
pub const MACHINE_HEARTBEAT_S: i64 = 10;
/// The `online` rule: a machine is online when its last presence is at most this old (three
/// heartbeats, so one lost report does not flip it).
pub const MACHINE_ONLINE_WITHIN_MS: i64 = 30_000;
/// Lifetime of a machine credential (`handoff machine enrol`): a year; a revoke ends it sooner.
pub const MACHINE_CREDENTIAL_TTL_S: i64 = 365 * 24 * 60 * 60;
/// Bytes of the secret key a machine enrols with; it sends the SHA-256 of it, and proves it
/// holds the key by sending the key itself when it collects its credential.
pub const ENROLMENT_KEY_BYTES: usize = 32;
/// An operator's note on a package, or a destination's note on a rejection.
pub const NOTE_BYTES_MAX: usize = 4 * 1024;
/// Turns whose milestones a package's `state.completed` lists: the newest ones (two lines each,
/// about 1 KiB in all). Older turns are counted in `truncation.completed_turns_omitted` and stay
/// listed whole by `GET …/turns`. 20, like the newest 20 decisions and artifact titles: enough
/// for the next turn to see how the work went lately, and the package no longer grows with
/// every turn (the ledger value it lives in is capped by the runtime at 2 MB).
pub const PACKAGE_COMPLETED_TURNS_MAX: u64 = 20;

// ---- The turn's timeline (src/timeline.rs) and every outcome a turn keeps. ----

/// Events one `POST …/events` carries at most.
pub const TIMELINE_EVENTS_PER_REQUEST_MAX: usize = 64;
/// Largest body of `POST …/events`: room for the largest single event with every byte
/// escaped and for many small ones; a machine splits a larger batch (asserted below).
pub const TIMELINE_BODY_BYTES_MAX: usize = 256 * 1024;
/// A message's or a note's text (UTF-8 bytes).
pub const TIMELINE_MESSAGE_BYTES_MAX: usize = 16 * 1024;
/// A tool call's id and a tool's name.
pub const TIMELINE_NAME_BYTES_MAX: usize = 128;
/// A tool's output, clipped by the machine, which sends the whole size beside it.
pub const TIMELINE_OUTPUT_BYTES_MAX: usize = 4 * 1024;
/// Events one turn's timeline holds; past it a batch is 409 `timeline.full`.
pub const TIMELINE_EVENTS_PER_TURN_MAX: u64 = 2_000;
/// Stored bytes of one turn's events; past it a batch is 409 `timeline.full`.
pub const TIMELINE_BYTES_PER_TURN_MAX: usize = 1024 * 1024;
/// Turns whose events a hand-off keeps: the newest ones. An older turn keeps its count and
/// says its steps were dropped.
pub const TIMELINE_TURNS_KEPT_MAX: u64 = 4;
/// Why an undelivered steer never reached the harness (a `steer` event's `why`).
pub const TIMELINE_WHY_BYTES_MAX: usize = 1024;
/// Events one `GET …/events` page holds when no `limit` is given, and the most it may ask for.
pub const TIMELINE_PAGE_DEFAULT: usize = 200;
pub const TIMELINE_PAGE_MAX: usize = 2_000;
/// A done report's `reply`: the model's final answer, whole (UTF-8 bytes).
pub const REPLY_BYTES_MAX: usize = 64 * 1024;
/// Largest body of `POST …/report`: a report with the longest reply and question, every byte
/// escaped (asserted below).
pub const REPORT_BODY_BYTES_MAX: usize = 192 * 1024;
/// Questions a turn's lineage entry keeps with their answers: the newest; older ones are
/// counted in `questions_dropped`. Kept, like replies, for the newest `PROMPT_TURNS_KEPT_MAX`
/// turns.
pub const QUESTIONS_PER_TURN_KEPT_MAX: usize = 8;
/// The most one hand-off keeps of its turns' steps and outcomes, whatever a client repeats:
/// the newest kept turns' events, the replies of the newest `PROMPT_TURNS_KEPT_MAX` turns and
/// the record's copy, and their questions whole (about 10.9 MiB). `docs/guarantees.md` states
/// the storage a hand-off is promised with it.
pub const OUTCOME_BYTES_KEPT_PER_HANDOFF_MAX: usize = TIMELINE_TURNS_KEPT_MAX as usize * TIMELINE_BYTES_PER_TURN_MAX
    + (PROMPT_TURNS_KEPT_MAX as usize + 1) * REPLY_BYTES_MAX
    + PROMPT_TURNS_KEPT_MAX as usize
        * QUESTIONS_PER_TURN_KEPT_MAX
        * (QUESTION_TEXT_BYTES_MAX
            + QUESTION_INPUT_BYTES_MAX
            + ANSWER_NOTE_BYTES_MAX
            + QUESTION_OPTIONS_MAX * (QUESTION_OPTION_ID_CHARS_MAX + QUESTION_LABEL_BYTES_MAX));

// ---- Briefings (src/briefing.rs). ----

/// A briefing without `budget` fits this many bytes.
pub const BRIEFING_BUDGET_BYTES_DEFAULT: usize = 8 * 1024;
/// The smallest budget a briefing can be asked to fit.
pub const BRIEFING_BUDGET_BYTES_MIN: usize = 256;
/// The largest budget a briefing can be asked to fit.
pub const BRIEFING_BUDGET_BYTES_MAX: usize = 64 * 1024;

/// First retry delay of an undelivered index row; it doubles on each failure.
pub const OUTBOX_RETRY_MS_MIN: i64 = 250;
/// The longest wait between two deliveries of an undelivered index row.
pub const OUTBOX_RETRY_MS_MAX: i64 = 60_000;
/// Rows a hand-off's outbox keeps beside the newest while the owner's index has not taken
/// them, each one that entered a turn, a status or a close (so a notice may be owed for it):
/// a send carries them all. Past it the oldest is dropped first, and a notice it was owed is
/// lost (counted by the outbox, not told). 32 is 16 turns of running and then needs-you or
/// done while the index is unreachable; a send then carries at most 33 rows.
pub const OUTBOX_PASSED_MAX: usize = 32;

/// How long an `Idempotency-Key` answers its first answer again (the contract: at least 24 h).
pub const IDEMPOTENCY_TTL_MS: i64 = 25 * 60 * 60 * 1000;
/// Remembered `Idempotency-Key` answers one hand-off keeps; past it the oldest is forgotten.
pub const IDEMPOTENCY_KEYS_PER_HANDOFF_MAX: usize = 1_000;
/// Bytes of remembered answers one hand-off keeps, all keys together; past it the oldest are
/// forgotten first.
pub const IDEMPOTENCY_BYTES_PER_HANDOFF_MAX: usize = 2 * 1024 * 1024;
/// A remembered answer larger than this is kept without its `package` (the bulk of a compile
/// answer), with the digest of the whole answer; a replay puts the package back from the
/// ledger while that package is still the current one.
pub const IDEMPOTENCY_ANSWER_BYTES_MAX: usize = 16 * 1024;
/// History events one hand-off keeps (the newest); older ones are deleted as new ones come,
/// in steps of [`EVENTS_TRIM_STEP`] (see [`events_trimmed_through`]).
pub const EVENTS_PER_HANDOFF_MAX: usize = 1_000;
/// The history is trimmed once every this many versions, not on every change: a delete on
/// every change was one SQL statement in five of each report (issue 12).
pub const EVENTS_TRIM_STEP: u64 = 64;

/// The change that writes the event of `version` also deletes every event up to the version
/// answered, if any: on every [`EVENTS_TRIM_STEP`]-th version, down to the newest
/// `EVENTS_PER_HANDOFF_MAX - EVENTS_TRIM_STEP`, so that the history never holds more than
/// [`EVENTS_PER_HANDOFF_MAX`] events (one per version) between two trims.
pub fn events_trimmed_through(version: u64) -> Option<u64> {
    let kept_after_trim = EVENTS_PER_HANDOFF_MAX as u64 - EVENTS_TRIM_STEP;
    (version.is_multiple_of(EVENTS_TRIM_STEP) && version > kept_after_trim).then(|| version - kept_after_trim)
}
/// Lineage entries one hand-off keeps in storage (the newest turns); older entries are deleted
/// and `GET …/turns` says how many turns came before the oldest kept.
pub const TURNS_KEPT_PER_HANDOFF_MAX: usize = 1_000;
/// Lineage entries the Durable Object holds in memory (the newest): enough for the package
/// compiler, which reads only the newest turns (see `package::Sources::lineage`).
pub const LINEAGE_TAIL_MAX: usize = 64;
/// Turns one `GET …/turns` page holds when no `limit` is given, and the most it may ask for.
pub const TURNS_PAGE_DEFAULT: usize = 100;
pub const TURNS_PAGE_MAX: usize = 1_000;
/// The largest single value the hand-off object writes (a record, a part, a lineage entry, a
/// remembered answer); a change that would write a larger one is refused with 413
/// `request.too_large` before anything is written. The runtime refuses values over 2 MB.
pub const STORED_VALUE_BYTES_MAX: usize = 1024 * 1024;
/// An `Idempotency-Key` is 1..=IDEMPOTENCY_KEY_CHARS_MAX printable ASCII characters.
pub const IDEMPOTENCY_KEY_CHARS_MAX: usize = 128;
/// The largest work record one hand-off keeps, serialised; a change past it is refused with
/// 413 `request.too_large` (Durable Object SQLite values are capped at 2 MB).
pub const WORK_RECORD_BYTES_MAX: usize = 1024 * 1024;
/// A change whose hand-off has no alarm pending schedules one this far ahead, in the same
/// transaction, so that a row whose delivery never ran (the Worker died first) still reaches the
/// owner's index. A pending alarm already covers later changes: it delivers the newest row.
pub const OUTBOX_SAFETY_ALARM_MS: i64 = 10_000;

// ---- Questions (src/question.rs). Text limits are UTF-8 bytes. ----

/// A question's text (a needs-you report's `question.text`).
pub const QUESTION_TEXT_BYTES_MAX: usize = 1024;
/// A question's `input`: the whole of what an Allow approves, as a person reads it (a command,
/// a file's path and content, an edit's diff). 16 KiB holds real commands and most single-file
/// edits; an asker whose input is larger says so in `text` and offers no Allow.
pub const QUESTION_INPUT_BYTES_MAX: usize = 16 * 1024;
/// Options one question offers (at least one).
pub const QUESTION_OPTIONS_MAX: usize = 6;
/// An option's id: 1..=this many characters of `[a-z0-9_-]`.
pub const QUESTION_OPTION_ID_CHARS_MAX: usize = 32;
/// An option's label.
pub const QUESTION_LABEL_BYTES_MAX: usize = 200;
/// The owner's note beside an answer (a deny's reason, read by the agent).
pub const ANSWER_NOTE_BYTES_MAX: usize = 1024;
/// Webhooks one owner may register (`POST /v1/webhooks` past it: 409 `webhook.too_many`).
pub const WEBHOOKS_PER_OWNER_MAX: usize = 10;
/// Deliveries one owner's index holds waiting to be sent, over all its webhooks and push
/// subscriptions together; past it the oldest pending one is dropped, and counted on its
/// receiver.
pub const WEBHOOK_PENDING_PER_OWNER_MAX: usize = 1_000;
/// Finished deliveries (delivered or failed) kept per webhook for its deliveries list; older
/// ones are forgotten.
pub const WEBHOOK_DELIVERIES_KEPT: usize = 50;
/// How long one delivery attempt may take before it counts as failed and is retried.
pub const WEBHOOK_TIMEOUT_MS: i64 = 10_000;
/// The wait before the first retry; each later one waits twice the one before.
pub const WEBHOOK_BACKOFF_FIRST_MS: i64 = 2_000;
/// The longest wait between two attempts, so that a receiver back after a long outage hears
/// within the hour.
pub const WEBHOOK_BACKOFF_MAX_MS: i64 = 60 * 60 * 1000;
/// A delivery is retried at least this long after its event, then marked `failed`.
pub const WEBHOOK_RETRY_WINDOW_MS: i64 = 24 * 60 * 60 * 1000;
/// Deliveries one alarm of an owner's index starts at once; the rest wait for the next alarm,
/// which follows at once.
pub const WEBHOOK_SENDS_PER_ALARM_MAX: usize = 32;

/// How long after its event a push message may still be attempted: the TTL its push service is
/// given (`handoff_notify::limits::PUSH_TTL_S`, held equal by the Worker at compile time).
pub const PUSH_RETRY_WINDOW_MS: i64 = 24 * 60 * 60 * 1000;
/// Push subscriptions (browsers, phones) one owner may register (past it: 409
/// `subscription.too_many`).
pub const PUSH_SUBSCRIPTIONS_PER_OWNER_MAX: usize = 20;

// ---- Devices: a console's sign-in that lasts (core/src/owner/devices.rs) ----

/// Devices one owner may have signed in at once (`POST /v1/devices` past it: 409
/// `device.too_many`); each holds a row in the owner's index until it is revoked or ends.
pub const DEVICES_PER_OWNER_MAX: usize = 20;
/// Sign-ins (`POST /v1/devices`) one owner may make in [`DEVICE_SIGN_INS_PERIOD_MS`]; past
/// them, 429 `device.rate_limited`.
pub const DEVICE_SIGN_INS_PER_PERIOD_MAX: usize = 10;
/// The period over which sign-ins are counted: a minute.
pub const DEVICE_SIGN_INS_PERIOD_MS: i64 = 60 * 1000;
/// A device's sign-in ends once it has gone this long without a refresh: 30 days.
pub const DEVICE_IDLE_MS_MAX: i64 = 30 * 24 * 60 * 60 * 1000;
/// A device's sign-in ends this long after it was made, however much it is used: 90 days.
pub const DEVICE_LIFE_MS_MAX: i64 = 90 * 24 * 60 * 60 * 1000;
/// Life of an owner access token minted from a device (`POST /v1/devices` and its refresh):
/// a revoke takes effect within it, so it stays short (at most 10 minutes, asserted below).
pub const ACCESS_TOKEN_TTL_S: i64 = 5 * 60;
/// A device's name, from the browser and platform or a rename (UTF-8 bytes, one line).
pub const DEVICE_NAME_BYTES_MAX: usize = 64;
/// The longest summary a push notification carries (bytes, cut at a character): the whole
/// message must fit the 4 KiB a push service accepts, beside an input of
/// [`PUSH_INPUT_BYTES_MAX`].
pub const PUSH_SUMMARY_BYTES_MAX: usize = 768;
/// The longest question input a push notification shows (bytes). A longer input travels as its
/// head cut at a character, with its size, and the notification offers no option to pick: an
/// Allow is given only where the whole of what it approves was shown (the console shows it).
pub const PUSH_INPUT_BYTES_MAX: usize = 256;
/// The longest option label a push notification carries as an action's title (bytes, cut at a
/// character): with six options and the longest summary the message still fits its 4 KiB.
pub const PUSH_OPTION_LABEL_BYTES_MAX: usize = 64;

// ---- What one owner can make the service hold (src/index.rs, src/retention.rs). ----

/// How long an owner's index remembers an erased life of a hand-off, so that a row send of
/// that life arriving after the erase cannot bring its row back: far past the last send its
/// object could still have on its way (an erase's failed step is tried again within
/// [`OUTBOX_RETRY_MS_MAX`]).
pub const ERASED_KEPT_MS: i64 = 24 * 60 * 60 * 1000;
/// Erased lives one owner's index remembers at most; the oldest are forgotten first.
pub const ERASED_KEPT_PER_OWNER_MAX: usize = 1_000;
/// Open hand-offs one owner may hold at once; a create past it is 429 `owner.too_many_open`,
/// decided by the owner's index as it adds the row, before the hand-off stores anything.
pub const OPEN_HANDOFFS_PER_OWNER_MAX: usize = 100;
/// Hand-offs one owner may create per [`CREATES_PER_OWNER_PERIOD_S`], counted by the runtime's
/// rate-limiting binding (`CREATE_LIMITER` in wrangler.toml, whose `simple.limit` is this
/// number); past it, 429 `owner.rate_limited` with `Retry-After`.
pub const CREATES_PER_OWNER_PER_MINUTE_MAX: u32 = 60;
/// The rate limit's window (the binding allows 10 or 60 seconds), and the `Retry-After` of
/// `owner.rate_limited`.
pub const CREATES_PER_OWNER_PERIOD_S: u32 = 60;
/// Days a closed hand-off is kept after its close before its object erases it and the owner's
/// index drops its row, where `HANDOFF_RETENTION_DAYS` does not say otherwise.
pub const HANDOFF_RETENTION_DAYS_DEFAULT: u32 = 30;
/// The longest retention an environment may set (`HANDOFF_RETENTION_DAYS`), and the shortest.
pub const HANDOFF_RETENTION_DAYS_MAX: u32 = 3_650;
pub const HANDOFF_RETENTION_DAYS_MIN: u32 = 1;

// The object holds enough of the lineage for the compiler, which reads the newest
// PACKAGE_COMPLETED_TURNS_MAX turns (and the current one).
const _: () = assert!(LINEAGE_TAIL_MAX as u64 > PACKAGE_COMPLETED_TURNS_MAX);
// A prompt holds at least 8 KiB of the owner's words, the contract's floor.
const _: () = assert!(PROMPT_BYTES_MAX >= 8 * 1024);
// The entry whose prompt is dropped is one the object holds in memory.
const _: () = assert!(LINEAGE_TAIL_MAX as u64 > PROMPT_TURNS_KEPT_MAX);
// A turn whose timeline is kept still keeps its steers, so a steer event's id is checked.
const _: () = assert!(TIMELINE_TURNS_KEPT_MAX <= PROMPT_TURNS_KEPT_MAX);
// Room for what escaping adds to a JSON body beside its text: keys, numbers, punctuation.
const BODY_FRAME_BYTES: usize = 1024;
// The largest open turn fits its route's cap with every byte of its texts escaped as two: the
// prompt, and the hand-off's objective, purpose, note and runtime.
const _: () = assert!(
    2 * (PROMPT_BYTES_MAX + OBJECTIVE_BYTES_MAX + PURPOSE_BYTES_MAX + NOTE_BYTES_MAX + RUNTIME_BYTES_MAX)
        + BODY_FRAME_BYTES
        <= WORDS_BODY_BYTES_MAX
);
// The largest report fits too: its summary, and its question's text, input, six options of
// the longest id and label.
const _: () = assert!(
    2 * (SUMMARY_BYTES_MAX
        + QUESTION_TEXT_BYTES_MAX
        + QUESTION_INPUT_BYTES_MAX
        + QUESTION_OPTIONS_MAX * (QUESTION_OPTION_ID_CHARS_MAX + QUESTION_LABEL_BYTES_MAX))
        + BODY_FRAME_BYTES
        <= WORDS_BODY_BYTES_MAX
);
// A create with the longest prompt and the longest ids fits too.
const _: () = assert!(
    2 * (PROMPT_BYTES_MAX
        + 3 * ID_CHARS_MAX
        + WORKSPACE_BYTES_MAX
        + RUNTIME_BYTES_MAX
        + MODEL_BYTES_MAX
        + PERMISSION_MODE_BYTES_MAX)
        + BODY_FRAME_BYTES
        <= WORDS_BODY_BYTES_MAX
);
// The largest done report fits its route's cap: the reply beside the largest report above.
const _: () = assert!(
    2 * (REPLY_BYTES_MAX
        + SUMMARY_BYTES_MAX
        + QUESTION_TEXT_BYTES_MAX
        + QUESTION_INPUT_BYTES_MAX
        + QUESTION_OPTIONS_MAX * (QUESTION_OPTION_ID_CHARS_MAX + QUESTION_LABEL_BYTES_MAX))
        + BODY_FRAME_BYTES
        <= REPORT_BODY_BYTES_MAX
);
// The largest single event fits the events route's cap, escaped: its input, output and names.
const _: () = assert!(
    2 * (QUESTION_INPUT_BYTES_MAX + TIMELINE_OUTPUT_BYTES_MAX + 2 * TIMELINE_NAME_BYTES_MAX) + BODY_FRAME_BYTES
        <= TIMELINE_BODY_BYTES_MAX
);
// A turn's lineage entry with its longest reply, prompt and kept questions, every byte escaped,
// is a value the object may store.
const _: () = assert!(
    2 * (REPLY_BYTES_MAX
        + PROMPT_BYTES_MAX
        + SUMMARY_BYTES_MAX
        + QUESTIONS_PER_TURN_KEPT_MAX
            * (QUESTION_TEXT_BYTES_MAX
                + QUESTION_INPUT_BYTES_MAX
                + ANSWER_NOTE_BYTES_MAX
                + QUESTION_OPTIONS_MAX * (QUESTION_OPTION_ID_CHARS_MAX + QUESTION_LABEL_BYTES_MAX)))
        + 4 * BODY_FRAME_BYTES
        <= STORED_VALUE_BYTES_MAX
);
// What the timeline and the outcomes add stays within the 11 MiB the storage promise counts.
const _: () = assert!(OUTCOME_BYTES_KEPT_PER_HANDOFF_MAX <= 11 * 1024 * 1024);
// docs/guarantees.md counts the owner's words kept, steers with them, at 4,752 KiB (4.6 MiB).
const _: () = assert!(PROMPT_BYTES_KEPT_PER_HANDOFF_MAX <= 4_752 * 1024);
// One record frame with every field at its longest, and beside it one timeline frame, fit what
// a watching socket may leave unacknowledged: the prompt, summary, reply, question (its text,
// input, options, the answer's note) and the machine's runtimes, every byte escaped, and room
// for the record's other fields. And one event, escaped, fits a timeline frame.
const RECORD_FRAME_BYTES_MAX: usize = 2
    * (PROMPT_BYTES_MAX
        + SUMMARY_BYTES_MAX
        + REPLY_BYTES_MAX
        + QUESTION_TEXT_BYTES_MAX
        + QUESTION_INPUT_BYTES_MAX
        + ANSWER_NOTE_BYTES_MAX
        + QUESTION_OPTIONS_MAX * (QUESTION_OPTION_ID_CHARS_MAX + QUESTION_LABEL_BYTES_MAX)
        + MACHINE_RUNTIMES_MAX * (RUNTIME_BYTES_MAX + RUNTIME_VERSION_BYTES_MAX))
    + 8 * BODY_FRAME_BYTES;
const _: () = assert!(RECORD_FRAME_BYTES_MAX + WATCH_EVENTS_FRAME_BYTES_MAX <= WATCH_UNACKED_BYTES_MAX);
const _: () = assert!(
    2 * (QUESTION_INPUT_BYTES_MAX + TIMELINE_OUTPUT_BYTES_MAX + 2 * TIMELINE_NAME_BYTES_MAX) + BODY_FRAME_BYTES
        <= WATCH_EVENTS_FRAME_BYTES_MAX
);
const _: () = assert!(2 * TIMELINE_MESSAGE_BYTES_MAX + BODY_FRAME_BYTES <= WATCH_EVENTS_FRAME_BYTES_MAX);
// The report's cap is above the words' routes'.
const _: () = assert!(REPORT_BODY_BYTES_MAX > WORDS_BODY_BYTES_MAX);
// The words' routes take more than the others, never less.
const _: () = assert!(WORDS_BODY_BYTES_MAX > BODY_BYTES_MAX);
// An access token lives at most 10 minutes, and a device's idle time within its whole life.
const _: () = assert!(ACCESS_TOKEN_TTL_S > 0 && ACCESS_TOKEN_TTL_S <= 10 * 60);
const _: () = assert!(DEVICE_IDLE_MS_MAX <= DEVICE_LIFE_MS_MAX);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// One event per version (a stored change moves the version by exactly one), trimmed as
    /// the store trims it.
    #[test]
    fn the_history_never_holds_more_than_its_cap_and_is_trimmed_once_per_step() {
        let mut events = BTreeSet::new();
        let mut trims = 0;
        for version in 1..=20 * EVENTS_PER_HANDOFF_MAX as u64 {
            events.insert(version);
            if let Some(through) = events_trimmed_through(version) {
                events.retain(|v| *v > through);
                trims += 1;
            }
            assert!(events.len() <= EVENTS_PER_HANDOFF_MAX, "{} events at version {version}", events.len());
            // What is kept is always the newest: no gap, ending at this version.
            assert_eq!(events.iter().next_back(), Some(&version));
            assert_eq!(events.len() as u64, version - events.iter().next().copied().unwrap_or(version) + 1);
            // The newest EVENTS_PER_HANDOFF_MAX - EVENTS_TRIM_STEP are never trimmed.
            let kept = (EVENTS_PER_HANDOFF_MAX as u64 - EVENTS_TRIM_STEP).min(version);
            assert!(events.len() as u64 >= kept, "only {} events at version {version}", events.len());
        }
        // The cap is reached, and not one delete per change: one per step.
        let (last, kept) = (20 * EVENTS_PER_HANDOFF_MAX as u64, EVENTS_PER_HANDOFF_MAX as u64 - EVENTS_TRIM_STEP);
        assert_eq!(trims, last / EVENTS_TRIM_STEP - kept / EVENTS_TRIM_STEP);
        assert_eq!(events_trimmed_through(EVENTS_TRIM_STEP), None, "nothing to trim while the history is short");
    }
}
