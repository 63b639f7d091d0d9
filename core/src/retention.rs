//! How long a closed hand-off is kept: `HANDOFF_RETENTION_DAYS` after its close its object
//! erases everything it stored and the owner's index drops its row. Pure: the object's alarm
//! asks [`Retention::erase_due`], and the owner's index asks [`Retention::expired_before`]
//! which closed rows no hand-off can still hold.

use crate::limits::{HANDOFF_RETENTION_DAYS_DEFAULT, HANDOFF_RETENTION_DAYS_MAX, HANDOFF_RETENTION_DAYS_MIN};
use crate::time::EpochMs;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// An environment's retention, in whole days within
/// [`HANDOFF_RETENTION_DAYS_MIN`]..=[`HANDOFF_RETENTION_DAYS_MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    days: u32,
}

impl Default for Retention {
    fn default() -> Retention {
        Retention { days: HANDOFF_RETENTION_DAYS_DEFAULT }
    }
}

impl Retention {
    /// `HANDOFF_RETENTION_DAYS` as set: absent is the default; anything but a whole number of
    /// days in range is the operator's mistake, named in the error (the caller keeps the default).
    pub fn parse(var: Option<&str>) -> Result<Retention, String> {
        let Some(text) = var.map(str::trim) else {
            return Ok(Retention::default());
        };
        let days: u32 =
            text.parse().map_err(|_| format!("HANDOFF_RETENTION_DAYS is not a whole number of days: {text:?}"))?;
        if !(HANDOFF_RETENTION_DAYS_MIN..=HANDOFF_RETENTION_DAYS_MAX).contains(&days) {
            return Err(format!(
                "HANDOFF_RETENTION_DAYS {days} is outside {HANDOFF_RETENTION_DAYS_MIN}..={HANDOFF_RETENTION_DAYS_MAX}"
            ));
        }
        Ok(Retention { days })
    }

    pub fn days(self) -> u32 {
        self.days
    }

    fn ms(self) -> i64 {
        i64::from(self.days) * DAY_MS
    }

    /// When a hand-off closed at `closed_at` is erased.
    pub fn erase_at(self, closed_at: EpochMs) -> EpochMs {
        closed_at.saturating_add(self.ms())
    }

    /// Whether a hand-off closed at `closed_at` is due to be erased at `now`.
    pub fn erase_due(self, closed_at: EpochMs, now: EpochMs) -> bool {
        now >= self.erase_at(closed_at)
    }

    /// Closed rows of the owner's index last changed before this are past retention: their
    /// hand-offs are erased (or their erasure is overdue), so the index may drop them.
    pub fn expired_before(self, now: EpochMs) -> EpochMs {
        now.saturating_sub(self.ms())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_hand_off_is_due_for_erasure_exactly_its_retention_after_its_close() {
        let r = Retention::default();
        let closed = 1_700_000_000_000;
        let at = closed + i64::from(HANDOFF_RETENTION_DAYS_DEFAULT) * DAY_MS;
        assert_eq!(r.erase_at(closed), at);
        assert!(!r.erase_due(closed, at - 1), "kept until its retention has passed");
        assert!(r.erase_due(closed, at) && r.erase_due(closed, at + DAY_MS));
        assert_eq!(r.expired_before(at), closed, "the index drops a row exactly when its hand-off is due");
    }

    #[test]
    fn retention_is_a_whole_number_of_days_in_range_and_absent_is_the_default() {
        assert_eq!(Retention::parse(None), Ok(Retention::default()));
        assert_eq!(Retention::parse(Some(" 7 ")).map(Retention::days), Ok(7));
        assert_eq!(Retention::parse(Some("3650")).map(Retention::days), Ok(HANDOFF_RETENTION_DAYS_MAX));
        for bad in ["0", "3651", "-1", "1.5", "", "thirty"] {
            assert!(Retention::parse(Some(bad)).is_err(), "{bad:?}");
        }
        assert_eq!(Retention::default().days(), 30);
    }
}
