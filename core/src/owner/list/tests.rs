use super::*;
use crate::turn::Status;
use proptest::prelude::*;
use std::collections::BTreeSet;

/// Hand-off `ho_1` at `version`, on turn 1, in `status`, read from its JSON as the index stores it.
fn row(version: u64, status: Status) -> Row {
    serde_json::from_value(serde_json::json!({
        "id": "ho_1", "session": "s", "machine": "m", "size": "large", "turn": 1, "state": "open",
        "status": status, "summary": null, "version": version, "updated_at": "2023-11-14T22:13:20.000Z",
    }))
    .expect("a list row")
}

fn held(r: &Row) -> Option<Held<'_>> {
    Some(Held { version: r.version, row: Some(r) })
}

#[test]
fn a_newer_row_replaces_the_one_held_and_owes_what_it_entered() {
    let (running, asking) = (row(1, Status::Running), row(2, Status::NeedsYou));
    assert_eq!(
        put(held(&running), &[], &asking, true),
        Put { store: true, notices: vec![(&asking, Notice::NeedsYou)] }
    );
    assert!(put(None, &[], &asking, true).store, "a first row");
}

#[test]
fn a_row_no_newer_than_the_one_held_is_not_stored_and_owes_nothing() {
    let (asking, done) = (row(2, Status::NeedsYou), row(3, Status::Done));
    assert_eq!(put(held(&done), &[], &asking, true), Put { store: false, notices: vec![] }, "late");
    assert_eq!(put(held(&done), &[], &done, true), Put { store: false, notices: vec![] }, "twice");
}

#[test]
fn an_unreadable_row_held_counts_as_none_for_the_notices_but_its_version_still_wins() {
    let asking = row(2, Status::NeedsYou);
    let older = Some(Held { version: 1, row: None });
    assert_eq!(put(older, &[], &asking, true).notices, vec![(&asking, Notice::NeedsYou)], "told at least once");
    let newer = Some(Held { version: 9, row: None });
    assert_eq!(
        put(newer, &[], &asking, true),
        Put { store: false, notices: vec![] },
        "a replay under it is told nothing"
    );
}

#[test]
fn an_owner_with_no_receivers_is_owed_no_notice_and_still_gets_the_row() {
    let asking = row(2, Status::NeedsYou);
    assert_eq!(put(None, &[], &asking, false), Put { store: true, notices: vec![] });
}

proptest! {
    /// Over one hand-off's rows delivered in any order, some twice, each with the rows before
    /// it that it passed: the list ends holding the newest; no notice is owed twice for one
    /// version; and every notice owed is for a row newer than the one held then.
    #[test]
    fn rows_late_twice_or_out_of_order_leave_the_newest_and_owe_each_notice_once(
        statuses in prop::collection::vec(prop_oneof![Just(Status::Running), Just(Status::NeedsYou), Just(Status::Done), Just(Status::Failed)], 1..8),
        order in prop::collection::vec(0usize..8, 1..20),
    ) {
        let rows: Vec<Row> = statuses.iter().enumerate().map(|(i, s)| row(i as u64 + 1, *s)).collect();
        let mut list: Option<Row> = None;
        let mut told = BTreeSet::new();
        for &pick in &order {
            let i = pick % rows.len();
            let (passed, newest) = (&rows[..i], &rows[i]);
            let before = list.clone();
            let put = put(before.as_ref().map(|r| Held { version: r.version, row: Some(r) }), passed, newest, true);
            for (owed, notice) in &put.notices {
                prop_assert!(before.as_ref().is_none_or(|b| owed.version > b.version));
                prop_assert!(told.insert((owed.version, *notice)), "owed twice: {:?} at {}", notice, owed.version);
            }
            if put.store {
                list = Some(newest.clone());
            }
        }
        let newest = order.iter().map(|p| p % rows.len()).max().map(|i| rows[i].version);
        prop_assert_eq!(list.map(|r| r.version), newest);
    }
}
