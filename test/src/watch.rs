//! A blocking client of the watch (`GET /v1/handoffs/:id/watch`) for the tests: one socket,
//! read frame by frame with a deadline.

use serde_json::Value;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tungstenite::client::IntoClientRequest;
use tungstenite::handshake::HandshakeError;
use tungstenite::http::HeaderValue;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::{Message, WebSocket};

/// How the token goes: the `Authorization` header, or the `bearer.<token>` subprotocol next to
/// `handoff.v1` (as a browser must).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    Header,
    Subprotocol,
}

/// What a socket read.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// `{"handoff": …}`: the record.
    Record(Value),
    /// Any other text.
    Text(String),
    /// The server's close, with its code.
    Closed(u16),
    /// Nothing arrived before the deadline.
    Silent,
}

impl Frame {
    /// The record's version, for a record.
    pub fn version(&self) -> Option<u64> {
        match self {
            Frame::Record(v) => v["handoff"]["version"].as_u64(),
            _ => None,
        }
    }
}

/// A refused upgrade: its status and JSON body.
#[derive(Debug, Clone)]
pub struct Refused {
    pub status: u16,
    pub body: Value,
}

impl Refused {
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
}

pub struct Watch {
    socket: WebSocket<TcpStream>,
    /// The subprotocol the answer selected.
    pub protocol: Option<String>,
    /// Bytes of every text frame read.
    pub bytes_read: usize,
}

/// `ws://` of an `http://` base.
fn ws_base(base: &str) -> String {
    base.replacen("http://", "ws://", 1)
}

impl Watch {
    /// Opens a watch of `id` from `after` with `token`.
    pub fn open(base: &str, id: &str, token: &str, after: u64, auth: Auth) -> Result<Watch, Refused> {
        Watch::open_with(base, &format!("/v1/handoffs/{id}/watch?after={after}"), token, auth, &[])
    }

    /// Opens `path` (with its query) with extra headers.
    pub fn open_with(
        base: &str,
        path: &str,
        token: &str,
        auth: Auth,
        headers: &[(&str, &str)],
    ) -> Result<Watch, Refused> {
        let mut request = format!("{}{path}", ws_base(base)).into_client_request().expect("a watch URL");
        let h = request.headers_mut();
        match auth {
            Auth::Header => {
                h.insert("Authorization", HeaderValue::from_str(&format!("Bearer {token}")).unwrap());
            }
            Auth::Subprotocol => {
                h.insert(
                    "Sec-WebSocket-Protocol",
                    HeaderValue::from_str(&format!("handoff.v1, bearer.{token}")).unwrap(),
                );
            }
        }
        for (name, value) in headers {
            h.insert(
                tungstenite::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        let host = request.uri().host().unwrap().to_string();
        let port = request.uri().port_u16().unwrap();
        let stream = TcpStream::connect((host.as_str(), port))
            .map_err(|e| Refused { status: 0, body: Value::String(e.to_string()) })?;
        stream.set_read_timeout(Some(Duration::from_secs(crate::REQUEST_TIMEOUT_S))).unwrap();
        match tungstenite::client(request, stream) {
            Ok((socket, response)) => {
                let protocol =
                    response.headers().get("Sec-WebSocket-Protocol").and_then(|v| v.to_str().ok()).map(str::to_string);
                Ok(Watch { socket, protocol, bytes_read: 0 })
            }
            Err(HandshakeError::Failure(tungstenite::Error::Http(response))) => {
                let status = response.status().as_u16();
                let body =
                    response.body().as_deref().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or(Value::Null);
                Err(Refused { status, body })
            }
            Err(e) => Err(Refused { status: 0, body: Value::String(e.to_string()) }),
        }
    }

    /// The next frame within `within` (pongs included as text).
    pub fn next(&mut self, within: Duration) -> Frame {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
            self.socket.get_mut().set_read_timeout(Some(left)).unwrap();
            match self.socket.read() {
                Ok(Message::Text(text)) => {
                    self.bytes_read += text.len();
                    return match serde_json::from_str::<Value>(text.as_str()) {
                        Ok(v) if v.get("handoff").is_some() => Frame::Record(v),
                        _ => Frame::Text(text.to_string()),
                    };
                }
                Ok(Message::Close(frame)) => {
                    return Frame::Closed(frame.map(|f| u16::from(f.code)).unwrap_or(u16::from(CloseCode::Status)))
                }
                Ok(_) => continue,
                Err(tungstenite::Error::Io(e)) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if Instant::now() >= deadline {
                        return Frame::Silent;
                    }
                }
                Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => {
                    return Frame::Closed(1006)
                }
                Err(e) => panic!("a watch read: {e}"),
            }
        }
    }

    /// The next record's version, or a panic naming what came instead.
    pub fn next_version(&mut self, within: Duration) -> u64 {
        let frame = self.next(within);
        frame.version().unwrap_or_else(|| panic!("expected a record, got {frame:?}"))
    }

    pub fn send_text(&mut self, text: &str) {
        self.socket.send(Message::text(text.to_string())).expect("a watch send");
    }

    /// `{"after": V}`: acknowledges (and resynchronises) up to `version`.
    pub fn ack(&mut self, version: u64) {
        self.send_text(&format!(r#"{{"after":{version}}}"#));
    }

    /// Closes from the client's side and reads until the server's close.
    pub fn close(mut self) {
        let _ = self.socket.close(None);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            match self.socket.read() {
                Ok(_) => continue,
                Err(_) => break,
            }
        }
    }
}
