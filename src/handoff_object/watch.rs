//! The watch, carried out: accepting a hibernatable WebSocket, and sending each socket what
//! `handoff_core::watch` says it is owed. The runtime's list of sockets and each socket's
//! attachment (its [`Watcher`]) are the whole state: no list in memory, no timer, nothing
//! pending once a handler returns, so the object can be evicted while every socket stays open.

use super::*;
use super::driver::{render_record, Answer, Answered};
use handoff_core::watch::{self, Step, Watcher};
use worker::worker_sys::WebSocketRequestResponsePair;

impl HandoffObject {
    /// `ping` is answered `pong` by the runtime itself, without waking the object.
    pub(super) fn answer_pings(state: &State) {
        match WebSocketRequestResponsePair::new(watch::PING, watch::PONG) {
            Ok(pair) => state.set_websocket_auto_response(&pair),
            Err(e) => console_error!("the watch's ping auto-response: {e:?}"),
        }
    }

    /// Accepts a watching socket for `caller`, within its role's cap, owed at once what
    /// [`Watcher::open`] says.
    pub(super) fn watch(&self, caller: &Caller, after: u64, valid_until_s: i64, subprotocol: bool) -> Answered {
        let h = match self.owned(caller)? {
            Ok(h) => h,
            Err(e) => return Answer::refused(e, None).into_response(),
        };
        let (cap_name, cap) = watch::cap(caller.role);
        let cap = bindings::test_watchers_max(&self.env).unwrap_or(cap);
        let held = self.state.get_websockets_with_tag(caller.role.as_str()).len();
        if let Err(refusal) = watch::admit(held, cap, cap_name) {
            return Answer::refused(refusal, None).into_response();
        }
        let pair = WebSocketPair::new()?;
        self.state.accept_websocket_with_tags(&pair.server, &[caller.role.as_str()]);
        let frame = self.published.borrow_mut().answer_of(&h, caller.role, render_record);
        let (w, step) = Watcher::open(caller.role, valid_until_s, after, h.record.version, h.record.is_closed(), frame.len());
        // The socket's state is its attachment from the start, whatever it is sent.
        carry_out(&pair.server, None, &w, step, &frame);
        let mut response = Response::from_websocket(pair.client)?;
        if subprotocol {
            response.headers_mut().set("Sec-WebSocket-Protocol", watch::SUBPROTOCOL)?;
        }
        Ok(response.into())
    }

    /// Sends every socket what it is owed of `h`: after each published version, and once by a
    /// woken object, which compares each socket's last version sent with the record.
    pub(super) fn fan_out(&self, h: &Handoff) {
        let sockets = self.state.get_websockets();
        if sockets.is_empty() {
            return;
        }
        // Each role's frame (its record lists that role's actions), rendered when first needed.
        let mut frames: [Option<Rc<str>>; 2] = [None, None];
        let (version, closed, now) = (h.record.version, h.record.is_closed(), now_s());
        for ws in sockets {
            if let Some(before) = attachment(&ws) {
                let frame = frames[usize::from(before.role == Role::Machine)]
                    .get_or_insert_with(|| self.published.borrow_mut().answer_of(h, before.role, render_record))
                    .clone();
                let mut w = before.clone();
                let step = w.on_version(version, closed, frame.len(), now);
                carry_out(&ws, Some(&before), &w, step, &frame);
            }
        }
    }

    /// The first time a woken object runs anything, it catches up every socket that a deploy,
    /// an eviction or a failure between a commit and its sends left behind.
    pub(super) fn catch_up_once(&self) -> Result<()> {
        if self.caught_up.replace(true) {
            return Ok(());
        }
        if let Some(h) = self.load()? {
            self.fan_out(&h);
        }
        Ok(())
    }

    /// A message from a watching client: an acknowledgement or a resynchronisation
    /// (`{"after": V}`); anything else closes it.
    pub(super) fn on_watch_message(&self, ws: &WebSocket, text: Option<&str>) -> Result<()> {
        let Some(before) = attachment(ws) else {
            return Ok(());
        };
        let Some(h) = self.load()? else {
            return Ok(());
        };
        let frame = self.published.borrow_mut().answer_of(&h, before.role, render_record);
        let mut w = before.clone();
        let step = w.on_message(text, h.record.version, h.record.is_closed(), frame.len(), now_s());
        carry_out(ws, Some(&before), &w, step, &frame);
        Ok(())
    }
}

/// The socket's watcher, from its attachment; `None` for a socket this build did not accept.
fn attachment(ws: &WebSocket) -> Option<Watcher> {
    match ws.deserialize_attachment::<String>() {
        Ok(Some(text)) => Watcher::decode(&text),
        _ => None,
    }
}

/// Keeps `w` as the socket's attachment when it differs from `before` (what the attachment
/// held; `None` for a new socket), then does what `step` says. An acknowledgement changes the
/// watcher and sends nothing: it is kept all the same. A socket the client has already left
/// refuses the send; that is its close on the way, not a failure of the object.
fn carry_out(ws: &WebSocket, before: Option<&Watcher>, w: &Watcher, step: Step, frame: &str) {
    if before != Some(w) {
        if let Err(e) = ws.serialize_attachment(w.encode()) {
            console_error!("a watch's attachment: {e}");
        }
    }
    let (send, close) = match step {
        Step::Nothing => return,
        Step::Send => (true, None),
        Step::SendThenClose(c) => (true, Some(c)),
        Step::Close(c) => (false, Some(c)),
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
