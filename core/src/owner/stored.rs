//! The names the owner's index stores, read back: a receiver's kind, a delivery's state and a
//! receiver's events. A name this build does not know was written by another build (a deploy
//! that mixes versions, or one rolled back); it is an [`Unknown`], never read as a name it is
//! not, and the index decides what the row then does (`Index::handle`).

use super::receiver::{DeliveryState, Receiver};
use crate::notice::Notice;

/// A name read from storage that this build does not know, and what it named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// What the name stood for: "a receiver kind", "a delivery state" or "an event".
    pub what: &'static str,
    pub name: String,
}

impl std::fmt::Display for Unknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} this build does not know ({:?})", self.what, self.name)
    }
}

impl std::error::Error for Unknown {}

fn unknown(what: &'static str, name: &str) -> Unknown {
    Unknown { what, name: name.to_string() }
}

/// A stored delivery's kind of receiver (its `kind` column).
pub fn kind(name: &str) -> Result<Receiver, Unknown> {
    Receiver::parse(name).ok_or_else(|| unknown("a receiver kind", name))
}

/// A stored delivery's state (its `state` column).
pub fn state(name: &str) -> Result<DeliveryState, Unknown> {
    DeliveryState::parse(name).ok_or_else(|| unknown("a delivery state", name))
}

/// A receiver's events as its table stores them, their names comma-separated: the ones this
/// build knows, in their order, and the ones it does not.
pub fn events(stored: &str) -> (Vec<Notice>, Vec<Unknown>) {
    let mut known = Vec::new();
    let mut unknown_names = Vec::new();
    if stored.is_empty() {
        return (known, unknown_names);
    }
    for name in stored.split(',') {
        match Notice::parse(name) {
            Some(notice) => known.push(notice),
            None => unknown_names.push(unknown("an event", name)),
        }
    }
    (known, unknown_names)
}

/// A receiver's events as its table stores them (what [`events`] reads back).
pub fn events_text(events: &[Notice]) -> String {
    events.iter().map(|e| e.name()).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests;
