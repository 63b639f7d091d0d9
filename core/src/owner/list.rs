//! The owner's list as its index keeps it: one row per hand-off, and the newest version wins,
//! so a row delivered late, twice or out of order changes nothing. A row that is stored owes
//! the notices its chain entered (`notice::owed_chain`); a row that is not owes none.

use crate::notice::{self, Notice};
use crate::rows::Row;

/// The row the index holds for a hand-off: its version (a column of its own), and the row
/// itself where it can be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held<'a> {
    pub version: u64,
    /// `None`: stored by a build whose row this one cannot read.
    pub row: Option<&'a Row>,
}

/// What a delivered row does to the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Put<'a> {
    /// Store `row` in place of the one held.
    pub store: bool,
    /// The notices owed, in order, each with the row it is owed for; empty unless stored, or
    /// where the owner has no receivers (`notify`).
    pub notices: Vec<(&'a Row, Notice)>,
}

/// `row`, delivered after the rows it `passed`, to an index holding `held`. A held row that
/// cannot be read counts as none for the notices: told at least once, never less.
pub fn put<'a>(held: Option<Held<'a>>, passed: &'a [Row], row: &'a Row, notify: bool) -> Put<'a> {
    let store = held.is_none_or(|h| row.version > h.version);
    let notices = if store && notify { notice::owed_chain(held.and_then(|h| h.row), passed, row) } else { Vec::new() };
    Put { store, notices }
}

#[cfg(test)]
mod tests;
