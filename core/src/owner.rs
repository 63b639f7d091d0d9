//! The owner's index: one owner's list and the notifications it owes, as pure rules. The
//! `OwnerIndex` Durable Object (`src/owner_index/`) stores what these decide and sends what
//! they say is due.

pub mod list;
pub mod sending;
pub mod receiver;
