//! The watch (`GET /v1/handoffs/:id/watch`): what one hibernatable WebSocket is owed, decided
//! without the runtime.
//!
//! A watching socket's whole state is its [`Watcher`], which the object keeps in the socket's
//! attachment (the runtime keeps it across hibernation); the object holds no list of sockets
//! and no timer. Every time the object has a version to show (a commit confirmed, a woken
//! object comparing, a message from the client), it asks [`Watcher::on_version`] or
//! [`Watcher::on_message`] for a [`SocketStep`] and carries it out. The rules:
//!
//! - each version the object publishes is pushed once, in order, and never again unasked
//!   ([`Watcher::on_version`] only ever sends a version above [`Watcher::sent`]);
//! - `{"after": V}` acknowledges every version up to V, and re-synchronises: when the record's
//!   version is above V the socket is sent the current record, even if it was sent it before
//!   (a client that lost its state asks the socket for the record again);
//! - once the hand-off is closed, the socket gets its last record and is closed with
//!   [`CLOSE_HANDOFF_CLOSED`];
//! - a socket whose token has expired is closed with [`CLOSE_TOKEN_EXPIRED`] the next time
//!   anything is sent to it or read from it;
//! - the runtime exposes no count of a socket's unsent bytes, so the watcher counts what it sent
//!   and the client has not acknowledged (`{"after": V}` acknowledges every version up to V).
//!   What the runtime buffers for a socket is never more than that; a send that would take it
//!   past [`WATCH_UNACKED_BYTES_MAX`] or [`WATCH_UNACKED_FRAMES_MAX`] closes the socket with
//!   [`CLOSE_SLOW_READER`] instead;
//! - a message that is not `{"after": V}` closes it with [`CLOSE_UNSUPPORTED`] (`ping` never
//!   reaches the object: the runtime answers it `pong`).
//!
//! A socket that chose [`SUBPROTOCOL_V2`] is sent the current turn's timeline too, as
//! `{"timeline": {"turn", "events"}}` frames beside the record frames ([`Watcher::owed_events`],
//! [`Watcher::send_events`]): each event once, in `seq` order, from what the client said it has
//! (`?turn=N&seq=S`, and `{"after": V, "turn": N, "seq": S}`, which acknowledges both); a new
//! turn's events from its first. The slow-reader bounds count these frames too. A
//! [`SUBPROTOCOL`] socket is sent exactly the record frames, and any other message closes it.

use crate::error::{Code, Refusal};
use crate::limits::{
    MACHINE_WATCHERS_PER_HANDOFF_MAX, OWNER_WATCHERS_PER_HANDOFF_MAX, WATCH_UNACKED_BYTES_MAX, WATCH_UNACKED_FRAMES_MAX,
};
use crate::role::Role;
use serde::{Deserialize, Serialize};

/// The subprotocol a watch speaks; a client that offers subprotocols must offer this one, and
/// the answer selects it.
pub const SUBPROTOCOL: &str = "handoff.v1";
/// The subprotocol of a watch that is sent the current turn's timeline beside the records; a
/// client that offers both is answered this one.
pub const SUBPROTOCOL_V2: &str = "handoff.v2";
/// A browser cannot set `Authorization` on a WebSocket: it offers `bearer.<token>` as a
/// subprotocol next to [`SUBPROTOCOL`] instead (never the URL, which logs keep).
pub const BEARER_SUBPROTOCOL_PREFIX: &str = "bearer.";
/// What the client sends to check the socket is alive, and what the runtime answers without
/// waking the object.
pub const PING: &str = "ping";
pub const PONG: &str = "pong";

/// A client acknowledges (`{"after": V}`) at least every this many frames it reads: half the
/// cap, so that an acknowledgement on its way never lets the cap be passed.
pub const ACK_EVERY_FRAMES: usize = WATCH_UNACKED_FRAMES_MAX / 2;
/// A client acknowledges at least every this many bytes it reads: a quarter of the cap (128 KiB,
/// as before the cap grew to hold the longest record frame beside a timeline frame), so that
/// a timeline frame that waits for room is always owed an acknowledgement.
pub const ACK_EVERY_BYTES: usize = WATCH_UNACKED_BYTES_MAX / 4;

/// The hand-off closed: the last record was sent.
pub const CLOSE_HANDOFF_CLOSED: u16 = 1000;
/// The client sent something a watch does not take.
pub const CLOSE_UNSUPPORTED: u16 = 1003;
/// The client left too much unacknowledged: reconnect with `after` once able to read.
pub const CLOSE_SLOW_READER: u16 = 1013;
/// The socket's token expired: reconnect with a fresh one.
pub const CLOSE_TOKEN_EXPIRED: u16 = 4401;

/// A close frame: its code and a short reason (at most 123 bytes, as WebSocket allows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Close {
    pub code: u16,
    pub reason: &'static str,
}

impl Close {
    const HANDOFF_CLOSED: Close = Close { code: CLOSE_HANDOFF_CLOSED, reason: "the hand-off is closed" };
    const UNSUPPORTED: Close = Close { code: CLOSE_UNSUPPORTED, reason: "a watch takes only {\"after\": V} and ping" };
    const SLOW_READER: Close =
        Close { code: CLOSE_SLOW_READER, reason: "too much unacknowledged; reconnect with after" };
    const TOKEN_EXPIRED: Close = Close { code: CLOSE_TOKEN_EXPIRED, reason: "the token has expired" };
}

/// What to do with one socket now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketStep {
    /// Nothing is owed.
    Nothing,
    /// Send the current record.
    Send,
    /// Send the current record, then close.
    SendThenClose(Close),
    /// Close without sending.
    Close(Close),
}

/// One watching socket, as its attachment holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watcher {
    pub role: Role,
    /// The last second at which the socket's token is still accepted (its `exp` plus the
    /// tolerated skew, as a request's token is judged).
    pub valid_until_s: i64,
    /// The newest version this socket was sent, or that its client said it has.
    pub sent: u64,
    /// Versions sent and not acknowledged, with their frames' bytes, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unacked: Vec<(u64, u32)>,
    /// A close was sent: nothing more goes to this socket.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub closed: bool,
    /// A [`SUBPROTOCOL_V2`] socket: the turn and the last `seq` of it sent, or that its client
    /// said it has. `None`: a [`SUBPROTOCOL`] socket, sent records only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Seen>,
    /// Timeline frames sent and not acknowledged: `(turn, last seq, bytes)`, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unacked_events: Vec<(u64, u64, u32)>,
}

/// Where a [`SUBPROTOCOL_V2`] client stands in the timeline: it has `turn`'s events up to `seq`
/// (turn 0: none at all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    pub turn: u64,
    pub seq: u64,
}

/// The one message a client sends (besides `ping`): it has every version up to `after`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Ack {
    after: u64,
    /// A [`SUBPROTOCOL_V2`] client's place in the timeline: both or neither.
    #[serde(default)]
    turn: Option<u64>,
    #[serde(default)]
    seq: Option<u64>,
}

impl Watcher {
    /// A socket that has seen up to `after`, and what it is owed at once: the record when its
    /// version is above `after`, and the last record then the close when the hand-off is closed
    /// (whatever `after` says, so that a watch on a closed hand-off ends at once).
    pub fn open(
        role: Role,
        valid_until_s: i64,
        after: u64,
        version: u64,
        closed: bool,
        frame_bytes: usize,
    ) -> (Watcher, SocketStep) {
        let mut w = Watcher {
            role,
            valid_until_s,
            sent: after,
            unacked: Vec::new(),
            closed: false,
            timeline: None,
            unacked_events: Vec::new(),
        };
        if closed && version <= after {
            w.sent = version.saturating_sub(1);
        }
        // A fresh token: the expiry check can only matter later.
        let step = w.owe(version, closed, frame_bytes);
        (w, step)
    }

    /// What the socket is owed when the record is at `version` (`closed` once the hand-off is),
    /// whose frame is `frame_bytes` long, at `now_s`.
    pub fn on_version(&mut self, version: u64, closed: bool, frame_bytes: usize, now_s: i64) -> SocketStep {
        if let Some(ended) = self.ended(now_s) {
            return ended;
        }
        self.owe(version, closed, frame_bytes)
    }

    /// What a message from the client leads to; `text` is `None` for a binary message.
    pub fn on_message(
        &mut self,
        text: Option<&str>,
        version: u64,
        closed: bool,
        frame_bytes: usize,
        now_s: i64,
    ) -> SocketStep {
        if let Some(ended) = self.ended(now_s) {
            return ended;
        }
        // An object only: `json::from_slice` reads no struct from an array.
        let Some(ack) = text.and_then(|t| crate::json::from_slice::<Ack>(t.as_bytes()).ok()) else {
            return self.close(Close::UNSUPPORTED);
        };
        match (ack.turn, ack.seq, self.timeline.is_some()) {
            (None, None, _) => {}
            (Some(turn), Some(seq), true) => {
                self.unacked_events.retain(|(t, s, _)| (*t, *s) > (turn, seq));
                self.timeline = Some(Seen { turn, seq });
            }
            // A v1 socket takes `{"after": V}` alone; a v2 one both of the timeline's or neither.
            _ => return self.close(Close::UNSUPPORTED),
        }
        self.unacked.retain(|(v, _)| *v > ack.after);
        // What the client has is what it says it has: anything newer is owed again.
        self.sent = ack.after;
        self.owe(version, closed, frame_bytes)
    }

    /// What every step of a socket checks first: nothing more once it is closed, and the close
    /// (4401) once its token has expired.
    fn ended(&mut self, now_s: i64) -> Option<SocketStep> {
        if self.closed {
            return Some(SocketStep::Nothing);
        }
        (now_s > self.valid_until_s).then(|| self.close(Close::TOKEN_EXPIRED))
    }

    /// Bytes sent and not acknowledged, record frames and timeline frames together.
    pub fn unacked_bytes(&self) -> u64 {
        let records: u64 = self.unacked.iter().map(|(_, b)| u64::from(*b)).sum();
        records + self.unacked_events.iter().map(|(_, _, b)| u64::from(*b)).sum::<u64>()
    }

    /// Whether one more frame of `bytes` stays within both slow-reader bounds.
    fn fits(&self, bytes: u32) -> bool {
        let frames = self.unacked.len() + self.unacked_events.len();
        frames < WATCH_UNACKED_FRAMES_MAX && self.unacked_bytes() + u64::from(bytes) <= WATCH_UNACKED_BYTES_MAX as u64
    }

    /// What a [`SUBPROTOCOL_V2`] socket is owed of `turn`'s timeline, whose events run to `last`:
    /// the events after the returned `seq` (after 0 for a turn newer than the one it has).
    /// `None`: nothing (a v1 socket, a closed one, an older turn's late events, nothing new).
    pub fn owed_events(&self, turn: u64, last: u64) -> Option<u64> {
        let seen = self.timeline.filter(|_| !self.closed)?;
        if turn < seen.turn {
            return None;
        }
        let after = if turn > seen.turn { 0 } else { seen.seq };
        (last > after).then_some(after)
    }

    /// A frame of `turn`'s events up to `last`, `frame_bytes` long, is to go now: sent within
    /// the slow-reader bounds, never to a socket closed or expired. One that would pass them
    /// waits ([`SocketStep::Nothing`]): the events stay stored, and the client's next
    /// acknowledgement, which the bounds make it owe, brings them from storage.
    pub fn send_events(&mut self, turn: u64, last: u64, frame_bytes: usize, now_s: i64) -> SocketStep {
        if let Some(ended) = self.ended(now_s) {
            return ended;
        }
        let bytes = u32::try_from(frame_bytes).unwrap_or(u32::MAX);
        if !self.fits(bytes) {
            return SocketStep::Nothing;
        }
        self.unacked_events.push((turn, last, bytes));
        self.timeline = Some(Seen { turn, seq: last });
        SocketStep::Send
    }

    fn owe(&mut self, version: u64, closed: bool, frame_bytes: usize) -> SocketStep {
        if version <= self.sent {
            // Everything up to `version` went out already; a closed hand-off's last record too.
            return if closed { self.close(Close::HANDOFF_CLOSED) } else { SocketStep::Nothing };
        }
        let bytes = u32::try_from(frame_bytes).unwrap_or(u32::MAX);
        if !self.fits(bytes) {
            return self.close(Close::SLOW_READER);
        }
        self.unacked.push((version, bytes));
        self.sent = version;
        if closed {
            self.closed = true;
            SocketStep::SendThenClose(Close::HANDOFF_CLOSED)
        } else {
            SocketStep::Send
        }
    }

    fn close(&mut self, close: Close) -> SocketStep {
        self.closed = true;
        SocketStep::Close(close)
    }

    /// The attachment's text.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("a watcher is plain data: it always serialises")
    }

    /// A watcher from its attachment's text; `None` for anything this build did not write.
    pub fn decode(text: &str) -> Option<Watcher> {
        crate::json::from_slice(text.as_bytes()).ok()
    }
}

/// The cap on `role`'s sockets on one hand-off, and its name.
pub fn cap(role: Role) -> (&'static str, usize) {
    match role {
        Role::Owner => ("OWNER_WATCHERS_PER_HANDOFF_MAX", OWNER_WATCHERS_PER_HANDOFF_MAX),
        Role::Machine | Role::Credential => ("MACHINE_WATCHERS_PER_HANDOFF_MAX", MACHINE_WATCHERS_PER_HANDOFF_MAX),
    }
}

/// Whether one more socket of a role may watch, given how many of that role's the hand-off
/// holds (`held`) and the cap (`max`, named `cap_name`): past it, 429 `watch.too_many`. Each
/// role is counted apart, so a machine's sockets never take the owner's places.
pub fn admit(held: usize, max: usize, cap_name: &str) -> Result<(), Refusal> {
    if held >= max {
        return Err(Refusal::new(
            Code::WatchTooMany,
            format!("this hand-off holds {max} watches of this role ({cap_name})"),
        ));
    }
    Ok(())
}

/// What a `Sec-WebSocket-Protocol` header offers: a bearer token, if any, and whether
/// [`SUBPROTOCOL`] is among the offers. `None` for a header that names a bearer without
/// [`SUBPROTOCOL`], or names two bearers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Offered {
    pub bearer: Option<String>,
    pub handoff_v1: bool,
    /// [`SUBPROTOCOL_V2`] is among the offers (and is the one chosen).
    pub handoff_v2: bool,
}

pub fn offered(header: Option<&str>) -> Result<Offered, Refusal> {
    let mut offered = Offered::default();
    let Some(header) = header else {
        return Ok(offered);
    };
    for p in header.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if p == SUBPROTOCOL {
            offered.handoff_v1 = true;
        } else if p == SUBPROTOCOL_V2 {
            offered.handoff_v2 = true;
        } else if let Some(token) = p.strip_prefix(BEARER_SUBPROTOCOL_PREFIX) {
            if offered.bearer.replace(token.to_string()).is_some() {
                return Err(Refusal::invalid("Sec-WebSocket-Protocol: offer one bearer.<token>"));
            }
        }
    }
    if !offered.handoff_v1 && !offered.handoff_v2 {
        return Err(Refusal::invalid(format!("Sec-WebSocket-Protocol: offer {SUBPROTOCOL} or {SUBPROTOCOL_V2}")));
    }
    Ok(offered)
}

#[cfg(test)]
mod tests;
