//! Carrying out one `Ask`: each operation loads, asks the core, stores, answers and wakes
//! waiters. No rule of its own: what a command does is `handoff_core::handoff::apply`'s.

use super::*;
use crate::http::answer as json_answer;

/// The three reads of a hand-off, each named, so that a new `Op` cannot fall into one.
pub(super) enum Read {
    Record,
    Package { markdown: bool },
    Briefing { budget_bytes: usize, reach_api: bool, base_url: String },
    Work,
}

/// An answer before it becomes a `Response`.
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) body: Value,
}

impl Answer {
    pub(super) fn ok(body: Value) -> Answer {
        Answer { status: 200, body }
    }

    /// A refusal; beside it, when the hand-off is known, its record as `role` is answered it.
    pub(super) fn refused(error: impl Into<ApiError>, handoff: Option<(&Handoff, Role)>) -> Answer {
        let error: ApiError = error.into();
        let mut body = error.body();
        if let Some((h, role)) = handoff {
            body["handoff"] = serde_json::to_value(view::Handoff::of(h, role)).unwrap_or_default();
            // A stale accept carries the hash that is current, so the destination can re-read.
            if let (Code::PackageStale, Some(current)) = (error.code, &h.ledger.current) {
                body["package_hash"] = json!(current.hash);
                body["package_version"] = json!(current.version);
            }
        }
        Answer { status: error.status(), body }
    }

    pub(super) fn into_response(self) -> Answered {
        json_answer(self.status, &self.body)
    }
}

/// What an ask ends in: the runtime's own response, built in one call where it can be
/// (`crate::http`), or an error of the runtime's.
pub(super) type Answered = Result<web_sys::Response>;

/// A whole answer with its content type.
pub(super) fn text(body: impl Into<Vec<u8>>, content_type: &str) -> Answered {
    Ok(crate::http::respond(200, Some(content_type), body.into(), &[])?)
}

/// `{"handoff": record}` as text, as `role` is answered it: what a wait and a watch answer.
pub(super) fn render_record(h: &Handoff, role: Role) -> String {
    view::record_answer(h, role).to_string()
}

impl HandoffObject {
    pub(super) async fn handle(&self, ask: Ask) -> Answered {
        match ask.op {
            Op::Create { id, session, machine, size } => self.create(&ask.caller, id, session, machine, size).await,
            Op::Change { change } => self.change(&ask.caller, &change, ask.idempotency.as_ref()).await,
            Op::Wait { after, timeout_s } => self.wait(&ask.caller, after, timeout_s),
            Op::Watch { after, valid_until_s, subprotocol } => self.watch(&ask.caller, after, valid_until_s, subprotocol),
            Op::Floor => json_answer(200, &json!({"ok": true})),
            Op::Turns { before, limit } => self.turns(&ask.caller, before, limit),
            Op::TestFault { fault } => self.arm(&ask.caller, fault),
            Op::TestStorage => self.storage_report(&ask.caller),
            Op::Get => self.read(&ask.caller, Read::Record),
            Op::Package { markdown } => self.read(&ask.caller, Read::Package { markdown }),
            Op::Briefing { budget_bytes, reach_api, base_url } => {
                self.read(&ask.caller, Read::Briefing { budget_bytes, reach_api, base_url })
            }
            Op::Work => self.read(&ask.caller, Read::Work),
            Op::Preview { change, budget_bytes, reach_api, base_url } => {
                self.preview(&ask.caller, &change, budget_bytes, reach_api.then_some(base_url))
            }
        }
    }

    /// Once the runtime confirms the commit that stored `h`, makes it the version waiters are
    /// told, and wakes those it answers. Waking earlier would hand waiters a body chunk on a
    /// response already under way, which the output gate may not hold back, so a failed commit
    /// could show them a version that never was.
    pub(super) async fn publish(&self, h: Rc<Handoff>) -> Result<()> {
        self.confirm_commit().await?;
        let confirmed = {
            let mut published = self.published.borrow_mut();
            published.confirm(h);
            let confirmed = published.handoff().cloned();
            if !self.waiters.borrow().is_empty() {
                if let Some(h) = confirmed.clone() {
                    self.waiters.borrow_mut().wake(&h, |role| published.answer_of(&h, role, render_record));
                }
            }
            confirmed
        };
        if let Some(h) = confirmed {
            self.fan_out(&h);
        }
        Ok(())
    }

    pub(super) async fn create(&self, caller: &Caller, id: String, session: String, machine: String, size: String) -> Answered {
        if let Some(existing) = self.load()? {
            let answer = match existing.record.check_create_again(&machine, &size) {
                Ok(()) => Answer::ok(view::record_answer(&existing, caller.role)),
                Err(code) => Answer::refused(
                    ApiError::new(code, "this session already has a hand-off with another machine or size"),
                    Some((&existing, caller.role)),
                ),
            };
            return answer.into_response();
        }
        let h = Handoff::create(Record::create(id, caller.owner.clone(), session, machine, size, now_ms()));
        let dirty = Dirty { lineage_from: Some(0), ..Dirty::default() };
        let body = view::record_answer(&h, caller.role);
        let stored = match self.store(Stored { h, dirty, work_json: None, kind: "create", caller, remember: None, create: true })? {
            Ok(stored) => stored,
            Err(refusal) => return Answer::refused(refusal, None).into_response(),
        };
        let version = stored.record.version;
        self.publish(stored).await?;
        self.deliver_through(version).await?;
        Answer { status: 201, body }.into_response()
    }

    pub(super) async fn change(&self, caller: &Caller, change: &Change, idempotency: Option<&Idempotency>) -> Answered {
        let h = match self.owned(caller)? {
            Ok(h) => h,
            Err(e) => return Answer::refused(e, None).into_response(),
        };
        if let Some(idem) = idempotency {
            if let Some(replay) = self.replay(idem, &h)? {
                return Ok(replay);
            }
        }
        let dry_run = matches!(change, Change::Compile { dry_run: true, .. });
        let out = match handoff::apply(&h, change, caller.role, now_ms()) {
            Err(e) => return Answer::refused(e, Some((&h, caller.role))).into_response(),
            Ok(out) => out,
        };
        let answer = Answer::ok(view::answer(&out.next, caller.role, &out.answer));
        let remembered = idempotency.and_then(|idem| api_idempotency::remember(&idem.fingerprint, answer.status, &answer.body, dry_run).map(|r| (idem.key.as_str(), r)));
        let remember = remembered.as_ref().map(|(key, r)| (*key, r));
        if !out.moved {
            if let Some((key, r)) = remember {
                if let Err(refusal) = Self::check_sizes(&[&r.body]) {
                    return Answer::refused(refusal, Some((&h, caller.role))).into_response();
                }
                let mut batch = Batch::default();
                self.remember_into(&mut batch, key, r)?;
                self.commit(batch, self.fault.take())?;
                // The answer goes out once the key's row is durable, as every answer does.
                self.confirm_commit().await?;
            }
            return answer.into_response();
        }
        let work_json = out.dirty.work.then(|| to_json(&out.next.work)).transpose()?;
        if work_json.as_ref().is_some_and(|json| json.len() > WORK_RECORD_BYTES_MAX) {
            let e = ApiError::new(Code::RequestTooLarge, format!("the work record would pass {WORK_RECORD_BYTES_MAX} bytes"));
            return Answer::refused(e, Some((&h, caller.role))).into_response();
        }
        let stored = match self.store(Stored { h: out.next, dirty: out.dirty, work_json, kind: change.kind(), caller, remember, create: false })? {
            Ok(stored) => stored,
            Err(refusal) => return Answer::refused(refusal, Some((&h, caller.role))).into_response(),
        };
        let version = stored.record.version;
        self.publish(stored).await?;
        self.deliver_through(version).await?;
        answer.into_response()
    }

    /// The remembered answer to this key again, or 422 when the key came with another request.
    pub(super) fn replay(&self, idem: &Idempotency, h: &Handoff) -> Result<Option<web_sys::Response>> {
        let sql = self.state.storage().sql();
        let oldest = now_ms() - IDEMPOTENCY_TTL_MS;
        let rows: Vec<IdempotencyRow> = sql
            .exec(
                "SELECT fingerprint, status, body, slim, digest FROM idempotency WHERE key = ? AND at >= ?",
                vec![idem.key.clone().into(), oldest.into()],
            )?
            .to_array()?;
        let remembered = rows.into_iter().next().map(|row| Remembered {
            fingerprint: row.fingerprint,
            status: row.status as u16,
            body: row.body,
            slim: row.slim != 0,
            digest: row.digest,
        });
        match idempotency::decide(remembered.as_ref(), &idem.fingerprint) {
            Decision::Fresh => Ok(None),
            Decision::Mismatch => {
                let e = ApiError::new(Code::IdempotencyMismatch, "this Idempotency-Key was used for another request");
                Answer::refused(e, None).into_response().map(Some)
            }
            Decision::Replay(r) => {
                let current = h.ledger.current.as_ref().and_then(|offer| {
                    let package = serde_json::to_value(&offer.package).ok()?;
                    Some((offer.hash.as_str(), package))
                });
                let body = api_idempotency::replay(r, current);
                let replayed = [("Idempotent-Replayed", "true")];
                Ok(Some(crate::http::respond(r.status, Some("application/json"), body.into_bytes(), &replayed)?))
            }
        }
    }

    /// A dry run of opening the next turn with a hand-off: the same `apply` the open would
    /// make, on a copy, stored nowhere; answers the package it compiles and its briefing.
    pub(super) fn preview(&self, caller: &Caller, change: &Change, budget_bytes: usize, base_url: Option<String>) -> Answered {
        let h = match self.owned(caller)? {
            Ok(h) => h,
            Err(e) => return Answer::refused(e, None).into_response(),
        };
        let opened = handoff::apply(&h, change, caller.role, now_ms()).and_then(|out| Ok((out.next.record.turn, out.next.ledger.latest()?)));
        match opened {
            Err(e) => Answer::refused(e, Some((&h, caller.role))).into_response(),
            Ok((turn, latest)) => {
                let reach = base_url.map_or(Reach::None, Reach::api);
                let text = briefing::render(&latest, budget_bytes, &reach).text;
                Answer::ok(view::preview(&h, caller.role, turn, &latest, &text)).into_response()
            }
        }
    }

    /// Reads: the record, the package, the briefing, the work record.
    pub(super) fn read(&self, caller: &Caller, read: Read) -> Answered {
        let h = match self.owned(caller)? {
            Ok(h) => h,
            Err(e) => return Answer::refused(e, None).into_response(),
        };
        match read {
            Read::Record => Answer::ok(view::record_answer(&h, caller.role)).into_response(),
            Read::Package { markdown } => match h.ledger.latest() {
                Err(e) => Answer::refused(e, Some((&h, caller.role))).into_response(),
                Ok(latest) if markdown => text(handoff_core::package::render_markdown(&latest), "text/markdown; charset=utf-8"),
                Ok(latest) => {
                    Answer::ok(view::answer(&h, caller.role, &Effect::Package(latest))).into_response()
                }
            },
            Read::Work => {
                let work = view::WorkRecord::of(&h.record.id, &h.work);
                Answer::ok(json!({"handoff": view::Handoff::of(&h, caller.role), "work": work})).into_response()
            }
            Read::Briefing { budget_bytes, reach_api, base_url } => match h.ledger.latest() {
                Err(e) => Answer::refused(e, Some((&h, caller.role))).into_response(),
                Ok(latest) => {
                    let reach = if reach_api { Reach::api(base_url) } else { Reach::None };
                    text(briefing::render(&latest, budget_bytes, &reach).text, "text/plain; charset=utf-8")
                }
            },
        }
    }

    /// `GET …/turns`: up to `limit` turns before `before` (the newest when absent), oldest
    /// first, and the cursor of the page before it. Read from storage page by page, never whole.
    pub(super) fn turns(&self, caller: &Caller, before: Option<u64>, limit: usize) -> Answered {
        let h = match self.owned(caller)? {
            Ok(h) => h,
            Err(e) => return Answer::refused(e, None).into_response(),
        };
        // Turn numbers are far below 2^53, past which the runtime's SQL numbers lose precision.
        const TURN_BOUND: u64 = 1 << 53;
        let before = before.unwrap_or(TURN_BOUND).min(TURN_BOUND) as i64;
        let sql = self.state.storage().sql();
        let mut rows: Vec<TurnRow> = sql
            .exec("SELECT entry FROM turns WHERE turn < ? ORDER BY turn DESC LIMIT ?", vec![before.into(), (limit as i64 + 1).into()])?
            .to_array()?;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let entries: Vec<TurnEntry> = rows.iter().rev().map(|t| from_json::<TurnEntry>(&t.entry)).collect::<Result<_>>()?;
        let next_before = if more { entries.first().map(|e| e.turn) } else { None };
        let page = view::Turns { turns: entries.iter().map(view::Turn::from).collect(), next_before, handoff: view::Handoff::of(&h, caller.role) };
        json_answer(200, &page)
    }

    /// Test hook: arms `fault` for this hand-off's next change.
    pub(super) fn arm(&self, caller: &Caller, fault: Fault) -> Answered {
        if let Err(e) = self.owned(caller)? {
            return Answer::refused(e, None).into_response();
        }
        self.fault.set(Some(fault));
        json_answer(200, &json!({"armed": fault}))
    }

    /// Test hook: the bytes of this object's database, the rows of its bounded tables and the
    /// sockets watching it.
    pub(super) fn storage_report(&self, caller: &Caller) -> Answered {
        if let Err(e) = self.owned(caller)? {
            return Answer::refused(e, None).into_response();
        }
        let sql = self.state.storage().sql();
        let body = json!({
            "bytes": sql.database_size(),
            "rows": {
                "turns": sqlite::count(&sql, "SELECT COUNT(*) AS n FROM turns", vec![])?,
                "events": sqlite::count(&sql, "SELECT COUNT(*) AS n FROM events", vec![])?,
                "idempotency": sqlite::count(&sql, "SELECT COUNT(*) AS n FROM idempotency", vec![])?,
            },
            // The sockets watching it, by role (the runtime's list: the object keeps none).
            "watchers": {
                "owner": self.state.get_websockets_with_tag(Role::Owner.as_str()).len(),
                "machine": self.state.get_websockets_with_tag(Role::Machine.as_str()).len(),
            },
        });
        json_answer(200, &body)
    }

    /// Answers at once when the version is above `after` or the hand-off is closed; otherwise
    /// holds a place and answers with a body that arrives at the next version move or at the
    /// timeout. The headers go out at once and the body is a stream, so a client that goes away
    /// cancels that stream, which drops the waiter's [`Place`](handoff_core::waiters::Place) there and
    /// then: the runtime need not fire `request.signal` (local workerd does not).
    pub(super) fn wait(&self, caller: &Caller, after: u64, timeout_s: u64) -> Answered {
        let h = match self.owned(caller)? {
            Ok(h) => h,
            Err(e) => return Answer::refused(e, None).into_response(),
        };
        if turn::wait_answers_now(&h.record, after) || timeout_s == 0 {
            // A whole response, which the output gate holds until the version is durable.
            let body = self.published.borrow_mut().answer_of(&h, caller.role, render_record);
            return text(&*body, "application/json");
        }
        let (cap_name, cap) = self.waiters_max(caller.role);
        let Some((place, woken)) = Waiters::hold(&self.waiters, caller.role, cap, after) else {
            let e = ApiError::new(Code::WaitTooMany, format!("this hand-off holds {cap} waits of this role ({cap_name})"));
            return Answer::refused(e, None).into_response();
        };
        let jitter_ms = (js_sys::Math::random() * WAIT_JITTER_MS_MAX as f64) as u64;
        let timeout = Delay::from(Duration::from_millis(timeout_s * 1000 + jitter_ms));
        let published = self.published.clone();
        let role = caller.role;
        let body = async move {
            let _place = place;
            let body = match select(woken, timeout).await {
                Either::Left((Ok(body), _)) => body,
                // The timeout: the newest version whose commit is confirmed (the object loaded
                // or published one before any waiter could be held).
                _ => published.borrow_mut().answer(role, render_record).unwrap_or_else(|| "{}".into()),
            };
            Ok::<Vec<u8>, Error>(body.as_bytes().to_vec())
        };
        let mut response = Response::from_stream(futures::stream::once(body))?;
        response.headers_mut().set("Content-Type", "application/json")?;
        Ok(response.into())
    }

    /// The cap on `role`'s waits and its name, or the lower cap a test asks for where test
    /// hooks are on (so that the cap can be shown without holding ten thousand connections).
    pub(super) fn waiters_max(&self, role: Role) -> (&'static str, usize) {
        let (name, cap) = match role {
            Role::Owner => ("OWNER_WAITERS_PER_HANDOFF_MAX", OWNER_WAITERS_PER_HANDOFF_MAX),
            Role::Machine => ("MACHINE_WAITERS_PER_HANDOFF_MAX", MACHINE_WAITERS_PER_HANDOFF_MAX),
        };
        match bindings::test_waiters_max(&self.env) {
            Some(test_cap) => (name, test_cap),
            None => (name, cap),
        }
    }
}
