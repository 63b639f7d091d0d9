//! The watch, carried out: accepting a hibernatable WebSocket, and sending each socket what
//! `handoff_core::watch` says it is owed. The runtime's list of sockets and each socket's
//! attachment (its [`Watcher`]) are the whole state: no list in memory, no timer, nothing
//! pending once a handler returns, so the object can be evicted while every socket stays open.

use super::*;
use crate::clock::now_s;
use handoff_core::watch::{self, SocketStep, Watcher};
use worker::worker_sys::WebSocketRequestResponsePair;

/// `ping` is answered `pong` by the runtime itself, without waking the object.
pub(super) fn answer_pings(state: &State) {
    match WebSocketRequestResponsePair::new(watch::PING, watch::PONG) {
        Ok(pair) => state.set_websocket_auto_response(&pair),
        Err(e) => console_error!("the watch's ping auto-response: {e:?}"),
    }
}

/// The client closed: this side closes with its code, or 1000 for one a close frame may not
/// carry (1005: none given, 1006: dropped).
pub(super) fn close_as_asked(ws: &WebSocket, code: usize) {
    let code =
        u16::try_from(code).ok().filter(|c| (1000..5000).contains(c) && !matches!(c, 1005 | 1006)).unwrap_or(1000);
    if let Err(e) = ws.close(Some(code), Some("closed by the client")) {
        console_log!("a watch's close: {e}");
    }
}

impl Object {
    /// Accepts a socket the decider admitted for `role`, owed at once what [`Watcher::open`] says.
    pub(super) fn accept_watch(
        &self,
        role: Role,
        after: u64,
        valid_until_s: i64,
        subprotocol: bool,
    ) -> Result<web_sys::Response> {
        let h = self.inner.decider.borrow().handoff().cloned();
        let Some(h) = h else {
            return Err(Error::RustError("a watch admitted without a hand-off".into()));
        };
        let pair = WebSocketPair::new()?;
        self.state.accept_websocket_with_tags(&pair.server, &[role.as_str()]);
        let frame = self.inner.frame(&h, role);
        let (w, step) = Watcher::open(role, valid_until_s, after, h.record.version, h.record.is_closed(), frame.len());
        // The socket's state is its attachment from the start, whatever it is sent.
        carry_out(&pair.server, None, &w, step, &frame);
        let mut response = Response::from_websocket(pair.client)?;
        if subprotocol {
            response.headers_mut().set("Sec-WebSocket-Protocol", watch::SUBPROTOCOL)?;
        }
        Ok(response.into())
    }

    /// Sends every socket what it is owed of `h`: after each published version, and once by a
    /// started object, which compares each socket's last version sent with the record.
    pub(super) fn fan_out(&self, h: &Handoff) {
        let sockets = self.state.get_websockets();
        if sockets.is_empty() {
            return;
        }
        let (version, closed, now) = (h.record.version, h.record.is_closed(), now_s());
        for ws in sockets {
            if let Some(before) = attachment(&ws) {
                let frame = self.inner.frame(h, before.role);
                let mut w = before.clone();
                let step = w.on_version(version, closed, frame.len(), now);
                carry_out(&ws, Some(&before), &w, step, &frame);
            }
        }
    }

    /// A message from a watching client: an acknowledgement or a resynchronisation
    /// (`{"after": V}`); anything else closes it.
    pub(super) fn on_watch_message(&self, ws: &WebSocket, text: Option<&str>) -> Result<()> {
        self.ensure_restored()?;
        let Some(before) = attachment(ws) else {
            return Ok(());
        };
        let h = self.inner.decider.borrow().handoff().cloned();
        let Some(h) = h else {
            return Ok(());
        };
        let frame = self.inner.frame(&h, before.role);
        let mut w = before.clone();
        let step = w.on_message(text, h.record.version, h.record.is_closed(), frame.len(), now_s());
        carry_out(ws, Some(&before), &w, step, &frame);
        Ok(())
    }
}

/// The socket's watcher, from its attachment; `None`, logged, for a socket whose attachment
/// this build cannot read (one it did not accept: it is left alone).
fn attachment(ws: &WebSocket) -> Option<Watcher> {
    let unreadable = match ws.deserialize_attachment::<String>() {
        Ok(Some(text)) => match Watcher::decode(&text) {
            Some(w) => return Some(w),
            None => format!("not a watcher: {text:.64}"),
        },
        Ok(None) => "none".to_string(),
        Err(e) => e.to_string(),
    };
    console_log!("a watching socket's attachment is unreadable ({unreadable}); it is left alone");
    None
}

/// Keeps `w` as the socket's attachment when it differs from `before` (what the attachment
/// held; `None` for a new socket), then does what `step` says. A socket the client has already
/// left refuses the send; that is its close on the way, not a failure of the object.
fn carry_out(ws: &WebSocket, before: Option<&Watcher>, w: &Watcher, step: SocketStep, frame: &str) {
    if before != Some(w) {
        if let Err(e) = ws.serialize_attachment(w.encode()) {
            console_error!("a watch's attachment: {e}");
        }
    }
    let (send, close) = match step {
        SocketStep::Nothing => return,
        SocketStep::Send => (true, None),
        SocketStep::SendThenClose(c) => (true, Some(c)),
        SocketStep::Close(c) => (false, Some(c)),
    };
    if send {
        if let Err(e) = ws.send_with_str(frame) {
            console_log!("a watch's send: {e}");
        }
    }
    if let Some(c) = close {
        if let Err(e) = ws.close(Some(c.code), Some(c.reason)) {
            console_log!("a watch's close: {e}");
        }
    }
}
