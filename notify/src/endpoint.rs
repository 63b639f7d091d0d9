//! Where the service may send: webhook URLs and push endpoints share one rule.
//!
//! Outside `local`, only `https` to a host name: no IP literal, no `localhost`, no
//! single-label name, no credentials, no fragment. In `local`, `http://127.0.0.1[:PORT]/…` as
//! well, for the test peers on this machine.
//!
//! The accepted form is deliberately narrow, ASCII only, so that it needs no URL parser (the
//! `url` crate's IDNA tables would add about 70 KB gzipped to the Worker): a host is labels of
//! letters, digits and hyphens whose last label starts with a letter, so no spelling of an
//! IPv4 address (`2130706433`, `0x7f.1`) gets through; the tests check every accepted URL
//! against the WHATWG parser that the runtime's `fetch` uses.

use crate::limits::ENDPOINT_BYTES_MAX;
use std::fmt;

/// Where the Worker runs, as far as these rules go: `HANDOFF_ENV=local`, or anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Environment {
    Local,
    Deployed,
}

/// A URL the service may send to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `scheme://host[:port]`, lower case, the port only where it is not the scheme's default.
    origin: String,
    /// The path and query as given (`/` where there was none).
    rest: String,
}

/// Why a URL was refused, and the request field that carried it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointRefusal {
    pub field: &'static str,
    pub problem: EndpointProblem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointProblem {
    /// Longer than `ENDPOINT_BYTES_MAX`.
    TooLong,
    /// Not an absolute URL of the accepted form (ASCII, no spaces or backslashes, a port of
    /// 1..=65535, a path of URL characters).
    NotUrl,
    /// Not `https` (or, in `local`, `http` to 127.0.0.1).
    Scheme,
    /// It carries a user name or password.
    Credentials,
    /// It carries a `#fragment`, which is never sent.
    Fragment,
    /// Its host is an IP address.
    IpLiteral,
    /// Its host is `localhost` or under it.
    Localhost,
    /// Its host is a single label (`intranet`), never a public name.
    SingleLabel,
    /// Its host is not labels of letters, digits and hyphens (each 1..=63 characters, none
    /// starting or ending with a hyphen, 253 in all) ending in a label that starts with a letter.
    HostName,
}

impl fmt::Display for EndpointRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.problem {
            EndpointProblem::TooLong => "is longer than the most accepted",
            EndpointProblem::NotUrl => "is not an absolute URL",
            EndpointProblem::Scheme => "must be an https URL",
            EndpointProblem::Credentials => "must not carry a user name or password",
            EndpointProblem::Fragment => "must not carry a #fragment",
            EndpointProblem::IpLiteral => "must name a host, not an IP address",
            EndpointProblem::Localhost => "must not be localhost",
            EndpointProblem::SingleLabel => "must name a public host (a name with a dot)",
            EndpointProblem::HostName => "must name a host of letters, digits, hyphens and dots",
        };
        write!(f, "{} {why}", self.field)
    }
}

impl std::error::Error for EndpointRefusal {}

/// The only host `local` may reach over plain `http`.
const LOOPBACK: &str = "127.0.0.1";
const HOST_NAME_BYTES_MAX: usize = 253;
const LABEL_BYTES_MAX: usize = 63;

impl Endpoint {
    /// Checks `text`, from the request field `field`, against the rules of `env`.
    pub fn parse(field: &'static str, text: &str, env: Environment) -> Result<Endpoint, EndpointRefusal> {
        Endpoint::check(text, env).map_err(|problem| EndpointRefusal { field, problem })
    }

    fn check(text: &str, env: Environment) -> Result<Endpoint, EndpointProblem> {
        if text.len() > ENDPOINT_BYTES_MAX {
            return Err(EndpointProblem::TooLong);
        }
        let (scheme, after) = text.split_once("://").ok_or(EndpointProblem::NotUrl)?;
        let scheme = scheme.to_ascii_lowercase();
        if !scheme.bytes().all(|b| b.is_ascii_lowercase()) || scheme.is_empty() {
            return Err(EndpointProblem::NotUrl);
        }
        if !after.bytes().all(is_url_byte) {
            return Err(EndpointProblem::NotUrl);
        }
        if after.contains('#') {
            return Err(EndpointProblem::Fragment);
        }
        let split = after.find(['/', '?']).unwrap_or(after.len());
        let (authority, rest) = after.split_at(split);
        if authority.contains('@') {
            return Err(EndpointProblem::Credentials);
        }
        let (host, port) = split_port(authority)?;
        let host = host.to_ascii_lowercase();
        let rest = if rest.starts_with('/') { rest.to_string() } else { format!("/{rest}") };

        let default_port = match scheme.as_str() {
            "https" => 443,
            "http" if env == Environment::Local && host == LOOPBACK => 80,
            _ => return Err(EndpointProblem::Scheme),
        };
        if scheme == "https" {
            check_host_name(&host)?;
        }
        let origin = match port {
            Some(port) if port != default_port => format!("{scheme}://{host}:{port}"),
            _ => format!("{scheme}://{host}"),
        };
        Ok(Endpoint { origin, rest })
    }

    /// The URL to send to: the origin, then the path and query as given.
    pub fn url(&self) -> String {
        format!("{}{}", self.origin, self.rest)
    }

    /// `scheme://host[:port]`: VAPID's `aud`, and how a subscription is listed.
    pub fn origin(&self) -> &str {
        &self.origin
    }
}

/// Printable ASCII but for the space and the characters a URL never carries unescaped
/// (`"<>\^`{|}`): the WHATWG parser would drop or re-encode them, so they are refused.
fn is_url_byte(b: u8) -> bool {
    b.is_ascii_graphic() && !matches!(b, b'"' | b'<' | b'>' | b'\\' | b'^' | b'`' | b'{' | b'|' | b'}')
}

/// `host[:port]`, the port 1..=65535 in decimal when given.
fn split_port(authority: &str) -> Result<(&str, Option<u16>), EndpointProblem> {
    if authority.starts_with('[') {
        return Err(EndpointProblem::IpLiteral);
    }
    let Some((host, port)) = authority.split_once(':') else {
        return Ok((authority, None));
    };
    let digits = !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    match port.parse::<u16>() {
        Ok(port) if digits && port > 0 => Ok((host, Some(port))),
        _ => Err(EndpointProblem::NotUrl),
    }
}

fn check_host_name(host: &str) -> Result<(), EndpointProblem> {
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.is_empty() {
        return Err(EndpointProblem::NotUrl);
    }
    let labels: Vec<&str> = name.split('.').collect();
    let last = labels.last().copied().unwrap_or_default();
    if !last.is_empty() && (last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x")) {
        // The WHATWG parser reads a host whose last label is a number as IPv4, in any of its
        // spellings (`127.0.0.1`, `2130706433`, `0x7f.1`).
        return Err(EndpointProblem::IpLiteral);
    }
    let well_formed = name.len() <= HOST_NAME_BYTES_MAX
        && labels.iter().all(|label| is_label(label))
        && last.bytes().next().is_some_and(|b| b.is_ascii_lowercase());
    if !well_formed {
        return Err(EndpointProblem::HostName);
    }
    if name == "localhost" || name.ends_with(".localhost") {
        return Err(EndpointProblem::Localhost);
    }
    if labels.len() < 2 {
        return Err(EndpointProblem::SingleLabel);
    }
    Ok(())
}

fn is_label(label: &str) -> bool {
    let bytes = label.as_bytes();
    let plain = bytes.iter().all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    plain && (1..=LABEL_BYTES_MAX).contains(&bytes.len()) && bytes[0] != b'-' && bytes[bytes.len() - 1] != b'-'
}

#[cfg(test)]
mod tests;
