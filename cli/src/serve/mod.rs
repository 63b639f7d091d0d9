//! `handoff serve`: runs every turn opened on a hand-off on this machine.

pub mod codex;
