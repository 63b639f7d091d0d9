//! Where the service may send: webhook URLs and push endpoints share one rule.
//!
//! Outside `local`, only `https` to a host name: no IP literal (in any form the WHATWG parser
//! reads as one), no `localhost`, no single-label name, no credentials, no fragment. In
//! `local`, `http://127.0.0.1:PORT/…` as well, for the test peers on this machine.

use crate::limits::ENDPOINT_BYTES_MAX;
use std::fmt;
use url::{Host, Url};

/// Where the Worker runs, as far as these rules go: `HANDOFF_ENV=local`, or anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Environment {
    Local,
    Deployed,
}

/// A URL the service may send to; its text is the parser's normal form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    url: Url,
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
    /// Not an absolute URL.
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
        };
        write!(f, "{} {why}", self.field)
    }
}

impl std::error::Error for EndpointRefusal {}

impl Endpoint {
    /// Checks `text`, from the request field `field`, against the rules of `env`.
    pub fn parse(field: &'static str, text: &str, env: Environment) -> Result<Endpoint, EndpointRefusal> {
        let refuse = |problem| EndpointRefusal { field, problem };
        if text.len() > ENDPOINT_BYTES_MAX {
            return Err(refuse(EndpointProblem::TooLong));
        }
        let url = Url::parse(text).map_err(|_| refuse(EndpointProblem::NotUrl))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(refuse(EndpointProblem::Credentials));
        }
        if url.fragment().is_some() {
            return Err(refuse(EndpointProblem::Fragment));
        }
        let local_loopback = env == Environment::Local
            && url.scheme() == "http"
            && url.host() == Some(Host::Ipv4(std::net::Ipv4Addr::LOCALHOST));
        if local_loopback {
            return Ok(Endpoint { url });
        }
        if url.scheme() != "https" {
            return Err(refuse(EndpointProblem::Scheme));
        }
        match url.host() {
            Some(Host::Domain(name)) => check_host_name(name).map_err(refuse)?,
            Some(Host::Ipv4(_)) | Some(Host::Ipv6(_)) => return Err(refuse(EndpointProblem::IpLiteral)),
            // An https URL always has a host; a parser that disagreed is refused all the same.
            None => return Err(refuse(EndpointProblem::NotUrl)),
        }
        Ok(Endpoint { url })
    }

    /// The URL to send to.
    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }

    /// `scheme://host[:port]`: VAPID's `aud`, and how a subscription is listed.
    pub fn origin(&self) -> String {
        self.url.origin().ascii_serialization()
    }
}

fn check_host_name(name: &str) -> Result<(), EndpointProblem> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name == "localhost" || name.ends_with(".localhost") {
        return Err(EndpointProblem::Localhost);
    }
    if !name.contains('.') {
        return Err(EndpointProblem::SingleLabel);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
