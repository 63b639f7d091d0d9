//! Carrying out the core's outbox (`handoff_core::outbox`): sending the owed row to the owner's
//! index, and setting the alarm the outbox asks for. No decision is made here.

use super::*;

/// The failed attempts stored for a version (the `outbox` table holds only that now).
#[derive(serde::Deserialize)]
pub(super) struct AttemptsRow {
    pub(super) version: i64,
    pub(super) attempts: i64,
}

/// What one delivery carries: the owner whose index it goes to, and the row's JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Delivery {
    pub(super) owner: String,
    pub(super) row: String,
}

impl Delivery {
    /// The row the owner's index is owed for `record`: the change that stores the record owes it.
    pub(super) fn of(record: &Record) -> Result<Delivery> {
        Ok(Delivery { owner: record.owner.clone(), row: to_json(&IndexRow::of(record))? })
    }
}

impl HandoffObject {
    /// What the owner's index is owed by the stored hand-off `h`: its row, derived from the
    /// record, which every change commits in its own transaction, so a change writes no outbox
    /// row of its own (it did, one statement of each change's four, issue 12). Only failed
    /// attempts are stored, by [`HandoffObject::send`].
    pub(super) fn owed(&self, h: &Handoff) -> Result<Owed<Delivery>> {
        let sql = self.state.storage().sql();
        let stored: Vec<AttemptsRow> = sql.exec("SELECT version, attempts FROM outbox WHERE k = 0", None)?.to_array()?;
        let attempts = stored.first().filter(|a| a.version as u64 == h.record.version).map_or(0, |a| a.attempts as u32);
        Ok(Owed { version: h.record.version, row: Delivery::of(&h.record)?, attempts })
    }

    /// Returns once the owner's index has `version` (or a later one), so that a list started
    /// after the answer shows the change. Changes that arrive while a delivery is on its way
    /// wait for it, then the outbox sends only the newest row: under concurrent changes, one
    /// index write carries many of them. After a failure the alarm retries and the change is
    /// answered.
    pub(super) async fn deliver_through(&self, version: u64) -> Result<()> {
        loop {
            if self.outbox.borrow().is_delivered(version) {
                return Ok(());
            }
            let send = self.outbox.borrow_mut().poll_send();
            match send {
                Some(send) => self.send(send).await?,
                None if self.outbox.borrow().is_sending() => {
                    let (done, wait) = futures::channel::oneshot::channel();
                    self.delivery_waiters.borrow_mut().push(done);
                    let _ = wait.await;
                }
                None => return Ok(()),
            }
        }
    }

    /// Carries out one send the outbox asked for, tells it how it went, wakes the changes that
    /// waited for it, and after a failure stores the attempt count and sets the retry alarm.
    pub(super) async fn send(&self, send: outbox::Send<Delivery>) -> Result<()> {
        let ok = self.send_row(&send.row).await;
        let retry = self.outbox.borrow_mut().on_sent(ok, now_ms());
        for done in self.delivery_waiters.borrow_mut().drain(..) {
            let _ = done.send(());
        }
        let Some(at) = retry else {
            return Ok(());
        };
        // The failed attempts at this version outlive an eviction, so the backoff goes on growing.
        let owed = self.outbox.borrow().owed().filter(|o| o.version == send.version).cloned();
        if let Some(owed) = owed {
            let sql = self.state.storage().sql();
            sql.exec(
                "INSERT OR REPLACE INTO outbox (k, owner, version, row, attempts) VALUES (0, ?, ?, ?, ?)",
                vec![owed.row.owner.into(), (owed.version as i64).into(), owed.row.row.into(), (owed.attempts as i64).into()],
            )?;
        }
        let wait_ms = (at - now_ms()).max(0) as u64;
        self.state.storage().set_alarm(Duration::from_millis(wait_ms)).await
    }

    pub(super) async fn send_row(&self, owed: &Delivery) -> bool {
        let Ok(row) = serde_json::from_str::<IndexRow>(&owed.row) else {
            return false;
        };
        let Ok(payload) = protocol::encode(&IndexAsk::Put { row }) else {
            return false;
        };
        let Ok(stub) = self.env.durable_object(OWNER_INDEX).and_then(|ns| ns.get_by_name(&owner_index_name(&owed.owner))) else {
            return false;
        };
        let answer = crate::http::ask(&crate::http::raw_stub(stub), "https://owner-index/put", &payload).await;
        matches!(answer, Ok(r) if r.status() == 200)
    }
}
