//! [`Client::follow`], over `GET …/watch`: one WebSocket that is sent every version, instead of
//! a wait asked again and again. Where the upgrade is not served (an older service, a proxy that
//! does not pass WebSockets, the watch's cap reached), [`Watched::Unserved`] tells the caller to
//! follow with `/wait` instead.
//!
//! The client keeps its side of the contract: it acknowledges with `{"after": V}` at least every
//! [`watch::ACK_EVERY_FRAMES`] frames and [`watch::ACK_EVERY_BYTES`] bytes (the service closes a
//! socket that leaves more unacknowledged with 1013), sends `ping` when the socket has been
//! quiet for [`PING_EVERY_S`] (answered by the runtime, it keeps proxies from dropping an idle
//! connection), and reconnects from the last version it saw after a 1013, a lost connection or
//! a silent peer.

use super::*;
use handoff_core::watch;
use std::io::ErrorKind;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Instant;
use tungstenite::client::IntoClientRequest;
use tungstenite::handshake::HandshakeError;
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

/// A socket quiet this long is sent `ping`.
pub const PING_EVERY_S: u64 = 30;
/// A socket that has answered nothing (not even `pong`) for this long is taken for lost.
pub const SILENT_S_MAX: u64 = 2 * PING_EVERY_S + 10;

/// How a watch ended.
pub enum Watched {
    /// The hand-off closed, or `seen` asked to stop: the last record.
    Ended(Box<Handoff>),
    /// The service does not serve the watch here: follow with `/wait`.
    Unserved,
}

/// Whether a refused upgrade means "follow with `/wait` instead" rather than an error: the
/// upgrade not served (426, 405, 501, an older service's `route.not_found`, an answer that is
/// not a switch at all) or the watch's cap reached (429 `watch.too_many`). A refusal that
/// `/wait` would give too (a bad token, an unknown hand-off) is the error itself.
pub fn falls_back(status: u16, code: Option<&str>) -> bool {
    match status {
        426 | 405 | 501 => true,
        404 => code == Some("route.not_found"),
        429 => code == Some("watch.too_many"),
        s => s < 300,
    }
}

type Socket = WebSocket<MaybeTlsStream<TcpStream>>;

/// Why one attempt (a connect, then reading) ended.
enum Dropped {
    /// Reconnect from the last version seen (1013, a lost or silent connection).
    Reconnect(String),
    /// Done: the caller's answer.
    Done(Result<Watched, Error>),
}

impl Client {
    /// Follows the hand-off's versions from `after`: calls `seen` once for each answer whose
    /// version is above the last one seen, until `seen` breaks or the hand-off is closed.
    /// Answers the last record.
    ///
    /// Over the watch (`GET …/watch`, one WebSocket sent every version) where the service
    /// serves it, otherwise with `/wait` asked again and again (`timeout_s` each), where
    /// versions that move while no wait is held are seen together, as the newest record.
    pub fn follow(
        &self,
        id: &str,
        after: u64,
        timeout_s: u64,
        mut seen: impl FnMut(&Reply<Handoff>) -> ControlFlow<()>,
    ) -> Result<Handoff, Error> {
        match self.watch_follow(id, after, &mut seen)? {
            Watched::Ended(last) => Ok(*last),
            Watched::Unserved => self.follow_waiting(id, after, timeout_s, seen),
        }
    }

    /// [`Client::follow`] with `/wait` only.
    pub fn follow_waiting(
        &self,
        id: &str,
        after: u64,
        timeout_s: u64,
        mut seen: impl FnMut(&Reply<Handoff>) -> ControlFlow<()>,
    ) -> Result<Handoff, Error> {
        let mut after = after;
        loop {
            let reply = self.wait(id, after, timeout_s)?;
            let record = &reply.value;
            if record.version > after {
                after = record.version;
                if seen(&reply).is_break() {
                    return Ok(reply.value);
                }
            }
            if reply.value.state == State::Closed {
                return Ok(reply.value);
            }
        }
    }

    /// Follows from `after` over the watch; see the module's description.
    fn watch_follow(
        &self,
        id: &str,
        after: u64,
        seen: &mut impl FnMut(&Reply<Handoff>) -> ControlFlow<()>,
    ) -> Result<Watched, Error> {
        let mut after = after;
        let mut last: Option<Handoff> = None;
        let mut failures = 0u32;
        loop {
            let dropped = match self.watch_connect(id, after) {
                Ok(socket) => self.watch_read(socket, &mut after, &mut last, &mut failures, seen),
                Err(dropped) => dropped,
            };
            match dropped {
                Dropped::Done(answer) => return answer,
                Dropped::Reconnect(message) => {
                    failures += 1;
                    if failures >= self.retry.attempts_max {
                        return Err(Error::Network { attempts: failures, message });
                    }
                    std::thread::sleep(self.retry.delay(failures, None, random_u64()));
                }
            }
        }
    }

    /// Opens the socket, or says why not: a connection that failed (tried again), or an
    /// upgrade refused (final: an error, or [`Watched::Unserved`]).
    fn watch_connect(&self, id: &str, after: u64) -> Result<Socket, Dropped> {
        let failed = |e: &dyn std::fmt::Display| Dropped::Reconnect(e.to_string());
        if let Some(message) = self.refused() {
            return Err(Dropped::Done(Err(Error::Unexpected { status: 0, message: message.to_string() })));
        }
        let url = url_of(&self.base, &handoff_path(id, "/watch"), &[("after", after.to_string())]);
        let Some(ws_url) = url.strip_prefix("http").map(|rest| format!("ws{rest}")) else {
            return Err(Dropped::Done(Ok(Watched::Unserved)));
        };
        if ws_url.starts_with("wss:") && !cfg!(feature = "tls") {
            return Err(Dropped::Done(Ok(Watched::Unserved)));
        }
        let mut request = ws_url.into_client_request().map_err(|e| failed(&e))?;
        if let Some(token) = &self.token {
            let value =
                format!("Bearer {token}").parse().map_err(|_| failed(&"the token is not a valid header value"))?;
            request.headers_mut().insert("Authorization", value);
        }
        let host = request.uri().host().unwrap_or("127.0.0.1").to_string();
        let port = request.uri().port_u16().unwrap_or(if request.uri().scheme_str() == Some("wss") { 443 } else { 80 });
        let address = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| failed(&e))?
            .next()
            .ok_or_else(|| failed(&"no address"))?;
        let stream =
            TcpStream::connect_timeout(&address, Duration::from_secs(REQUEST_TIMEOUT_S)).map_err(|e| failed(&e))?;
        stream.set_read_timeout(Some(Duration::from_secs(REQUEST_TIMEOUT_S))).map_err(|e| failed(&e))?;
        match handshake(request, stream) {
            Ok((socket, _)) => Ok(socket),
            Err(HandshakeError::Failure(tungstenite::Error::Http(response))) => {
                let status = response.status().as_u16();
                let text = response.body().as_deref().map(String::from_utf8_lossy).unwrap_or_default().to_string();
                let code = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v["error"]["code"].as_str().map(str::to_string));
                if falls_back(status, code.as_deref()) {
                    return Err(Dropped::Done(Ok(Watched::Unserved)));
                }
                if is_retryable(Outcome::Answered(status)) {
                    return Err(failed(&format!("the watch answered {status}")));
                }
                Err(Dropped::Done(Err(refusal_of(Raw { status, text }))))
            }
            Err(e) => Err(failed(&e)),
        }
    }

    /// Reads records until the socket ends.
    fn watch_read(
        &self,
        mut socket: Socket,
        after: &mut u64,
        last: &mut Option<Handoff>,
        failures: &mut u32,
        seen: &mut impl FnMut(&Reply<Handoff>) -> ControlFlow<()>,
    ) -> Dropped {
        let (mut unacked_frames, mut unacked_bytes) = (0usize, 0usize);
        let mut heard = Instant::now();
        let _ = tcp(&socket).set_read_timeout(Some(Duration::from_secs(PING_EVERY_S)));
        loop {
            let message = match socket.read() {
                Ok(m) => m,
                Err(tungstenite::Error::Io(e)) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if heard.elapsed() >= Duration::from_secs(SILENT_S_MAX) {
                        return Dropped::Reconnect("the watch went silent".into());
                    }
                    if socket.send(Message::text(watch::PING)).is_err() {
                        return Dropped::Reconnect("the watch's ping failed".into());
                    }
                    continue;
                }
                Err(e) => return Dropped::Reconnect(format!("the watch dropped: {e}")),
            };
            heard = Instant::now();
            let text = match message {
                Message::Text(text) => text,
                Message::Close(frame) => return self.watch_closed(frame.map(|f| u16::from(f.code)), last),
                _ => continue,
            };
            if text.as_str() == watch::PONG {
                continue;
            }
            let reply = match read_handoff(Raw { status: 200, text: text.to_string() }) {
                Ok(reply) => reply,
                Err(e) => return Dropped::Done(Err(e)),
            };
            *failures = 0;
            unacked_frames += 1;
            unacked_bytes += text.len();
            let version = reply.value.version;
            let closed = reply.value.state == State::Closed;
            *last = Some(reply.value.clone());
            if version > *after {
                *after = version;
                if seen(&reply).is_break() {
                    let _ = socket.close(None);
                    return Dropped::Done(Ok(Watched::Ended(Box::new(reply.value))));
                }
            }
            if closed {
                return Dropped::Done(Ok(Watched::Ended(Box::new(reply.value))));
            }
            if unacked_frames >= watch::ACK_EVERY_FRAMES || unacked_bytes >= watch::ACK_EVERY_BYTES {
                if socket.send(Message::text(format!(r#"{{"after":{after}}}"#))).is_err() {
                    return Dropped::Reconnect("the watch's acknowledgement failed".into());
                }
                (unacked_frames, unacked_bytes) = (0, 0);
            }
        }
    }

    /// The server closed the socket with `code`.
    fn watch_closed(&self, code: Option<u16>, last: &Option<Handoff>) -> Dropped {
        match code {
            Some(watch::CLOSE_HANDOFF_CLOSED) => match last {
                Some(h) if h.state == State::Closed => Dropped::Done(Ok(Watched::Ended(Box::new(h.clone())))),
                // A close without the closed record: read the record to end on.
                _ => Dropped::Reconnect("the watch closed before its last record".into()),
            },
            Some(watch::CLOSE_TOKEN_EXPIRED) => {
                let body = json!({"error": {"code": "auth.invalid", "message": "the token expired during the watch"}});
                Dropped::Done(Err(refusal_of(Raw { status: 401, text: body.to_string() })))
            }
            Some(watch::CLOSE_UNSUPPORTED) => Dropped::Done(Err(Error::Unexpected {
                status: 101,
                message: "the watch refused a message of this client".into(),
            })),
            other => {
                Dropped::Reconnect(format!("the watch closed ({})", other.map_or("no code".into(), |c| c.to_string())))
            }
        }
    }
}

fn tcp(socket: &Socket) -> &TcpStream {
    match socket.get_ref() {
        MaybeTlsStream::Plain(s) => s,
        #[cfg(feature = "tls")]
        MaybeTlsStream::Rustls(s) => s.get_ref(),
        #[allow(unreachable_patterns)]
        _ => unreachable!("only plain and rustls streams are made here"),
    }
}

// The handshake's error is tungstenite's own, matched once by the caller; boxing it buys nothing.
#[cfg(feature = "tls")]
#[allow(clippy::result_large_err)]
fn handshake(
    request: tungstenite::handshake::client::Request,
    stream: TcpStream,
) -> Result<
    (Socket, tungstenite::handshake::client::Response),
    HandshakeError<tungstenite::ClientHandshake<MaybeTlsStream<TcpStream>>>,
> {
    tungstenite::client_tls(request, stream)
}

#[cfg(not(feature = "tls"))]
fn handshake(
    request: tungstenite::handshake::client::Request,
    stream: TcpStream,
) -> Result<
    (Socket, tungstenite::handshake::client::Response),
    HandshakeError<tungstenite::ClientHandshake<MaybeTlsStream<TcpStream>>>,
> {
    tungstenite::client(request, MaybeTlsStream::Plain(stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unserved_upgrade_or_a_full_watch_falls_back_to_wait() {
        for (status, code) in [
            (426, Some("request.upgrade_required")),
            (405, None),
            (501, None),
            (404, Some("route.not_found")),
            (429, Some("watch.too_many")),
            (200, None),
        ] {
            assert!(falls_back(status, code), "{status} {code:?}");
        }
        for (status, code) in [
            (401, Some("auth.invalid")),
            (404, Some("handoff.not_found")),
            (400, Some("request.invalid")),
            (429, Some("wait.too_many")),
            (503, Some("store.unavailable")),
        ] {
            assert!(!falls_back(status, code), "{status} {code:?}");
        }
    }
}
