//! The watch, carried out: accepting a hibernatable WebSocket, and sending each socket what
//! `handoff_core::watch` says it is owed. The runtime's list of sockets and each socket's
//! attachment (its [`Watcher`]) are the whole state: no list in memory, no timer, nothing
//! pending once a handler returns, so the object can be evicted while every socket stays open.

use super::*;
use crate::clock::now_s;
use handoff_core::limits::TIMELINE_PAGE_MAX;
use handoff_core::watch::{self, Seen, SocketStep, Watcher};
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
        timeline: Option<Seen>,
    ) -> Result<web_sys::Response> {
        let h = self.inner.decider.borrow().handoff().cloned();
        let Some(h) = h else {
            return Err(Error::RustError("a watch admitted without a hand-off".into()));
        };
        let pair = WebSocketPair::new()?;
        self.state.accept_websocket_with_tags(&pair.server, &[role.as_str()]);
        let frame = self.inner.frame(&h, role);
        let (mut w, step) =
            Watcher::open(role, valid_until_s, after, h.record.version, h.record.is_closed(), frame.len());
        w.timeline = timeline;
        // The socket's state is its attachment from the start, whatever it is sent.
        carry_out(&pair.server, None, &w, step, &frame);
        // A handoff.v2 socket then catches up on the current turn's events.
        self.send_owed_events(&pair.server, &w, h.record.turn, u64::MAX, None)?;
        let mut response = Response::from_websocket(pair.client)?;
        let chosen = if timeline.is_some() { watch::SUBPROTOCOL_V2 } else { watch::SUBPROTOCOL };
        if subprotocol {
            response.headers_mut().set("Sec-WebSocket-Protocol", chosen)?;
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
        // An acknowledgement of a handoff.v2 socket brings what is owed of the current turn.
        self.send_owed_events(ws, &w, h.record.turn, u64::MAX, None)
    }

    /// After a batch of `turn`'s events `first..=last` was committed: every handoff.v2 socket is
    /// sent what it is owed, the batch's frames rendered once for all the sockets in step.
    pub(super) fn fan_out_events(&self, turn: u64, first: u64, last: u64) -> Result<()> {
        let sockets = self.state.get_websockets();
        let mut shared: Option<(u64, Vec<(u64, String)>)> = None;
        for ws in sockets {
            let Some(w) = attachment(&ws) else { continue };
            if w.owed_events(turn, last) == Some(first - 1) && shared.is_none() {
                shared = Some((first - 1, self.events_frames(turn, first - 1)?));
            }
            self.send_owed_events(&ws, &w, turn, last, shared.as_ref())?;
        }
        Ok(())
    }

    /// Sends a handoff.v2 socket (as `before` holds it) `turn`'s events it is owed while the
    /// slow-reader bounds take them (`shared`: frames already rendered from a `seq`; otherwise
    /// read from storage), keeping its attachment.
    fn send_owed_events(
        &self,
        ws: &WebSocket,
        before: &Watcher,
        turn: u64,
        last: u64,
        shared: Option<&(u64, Vec<(u64, String)>)>,
    ) -> Result<()> {
        let Some(after) = before.owed_events(turn, last) else {
            return Ok(());
        };
        let read;
        let frames = match shared {
            Some((from, frames)) if *from == after => frames,
            _ => {
                read = self.events_frames(turn, after)?;
                &read
            }
        };
        let mut w = before.clone();
        let now = now_s();
        let mut sends = Vec::new();
        let mut close = None;
        for (seq, frame) in frames {
            match w.send_events(turn, *seq, frame.len(), now) {
                SocketStep::Send => sends.push(frame),
                SocketStep::Close(c) | SocketStep::SendThenClose(c) => {
                    close = Some(c);
                    break;
                }
                SocketStep::Nothing => break,
            }
        }
        if w != *before {
            if let Err(e) = ws.serialize_attachment(w.encode()) {
                console_error!("a watch's attachment: {e}");
            }
        }
        for frame in sends {
            if let Err(e) = ws.send_with_str(frame) {
                console_log!("a watch's send: {e}");
            }
        }
        if let Some(c) = close {
            if let Err(e) = ws.close(Some(c.code), Some(c.reason)) {
                console_log!("a watch's close: {e}");
            }
        }
        Ok(())
    }

    /// `turn`'s stored events after `after` as timeline frames.
    fn events_frames(&self, turn: u64, after: u64) -> Result<Vec<(u64, String)>> {
        let read = store::timeline(&self.state.storage(), turn, after, TIMELINE_PAGE_MAX)?;
        let events: Vec<handoff_core::timeline::Event> = read
            .events
            .iter()
            .map(|(_, at, json)| handoff_core::timeline::read_back(json, *at))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| Error::RustError(format!("a stored timeline event: {e}")))?;
        Ok(handoff_api::wire::timeline_frames(turn, &events))
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
