//! Carrying out the core's outbox (`handoff_core::outbox`): sending the owed row to the owner's
//! index, and setting the alarm the outbox asks for. No decision is made here.

use super::*;

#[derive(serde::Deserialize)]
pub(super) struct OutboxRow {
    pub(super) owner: String,
    pub(super) version: i64,
    pub(super) row: String,
    pub(super) attempts: i64,
}

/// What one delivery carries: the owner whose index it goes to, and the row's JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Delivery {
    pub(super) owner: String,
    pub(super) row: String,
}

impl HandoffObject {
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
        let attempts = self.outbox.borrow().owed().map_or(1, |o| o.attempts);
        let sql = self.state.storage().sql();
        sql.exec("UPDATE outbox SET attempts = ? WHERE k = 0 AND version = ?", vec![(attempts as i64).into(), (send.version as i64).into()])?;
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
