//! What every pure machine of the core answers for a command it accepts.

/// The value after an accepted command, what the command answers beside it, and whether it
/// moved. A refusal is the `Err` beside it and leaves the value as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied<T, A = ()> {
    /// The value after the command; when nothing moved, the value as it was.
    pub next: T,
    /// What the command produced beside the value (the item recorded, the package compiled).
    pub effect: A,
    /// False when the command changed nothing: write nothing, move no version, wake nobody.
    pub moved: bool,
}
