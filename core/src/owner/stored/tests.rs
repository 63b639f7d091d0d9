use super::*;
use proptest::prelude::*;

#[test]
fn each_kind_this_build_stores_reads_back_and_an_unknown_kind_is_a_typed_error_naming_it() {
    for r in Receiver::ALL {
        assert_eq!(kind(r.as_str()), Ok(r));
    }
    assert_eq!(kind("email"), Err(Unknown { what: "a receiver kind", name: "email".into() }));
    assert_eq!(kind(""), Err(Unknown { what: "a receiver kind", name: String::new() }));
    assert_eq!(kind("Webhook"), Err(Unknown { what: "a receiver kind", name: "Webhook".into() }), "names are exact");
}

#[test]
fn each_state_this_build_stores_reads_back_and_an_unknown_state_is_never_read_as_failed() {
    for s in [DeliveryState::Pending, DeliveryState::Delivered, DeliveryState::Failed] {
        assert_eq!(state(s.as_str()), Ok(s));
    }
    assert_eq!(state("expired"), Err(Unknown { what: "a delivery state", name: "expired".into() }));
    assert_eq!(state("FAILED"), Err(Unknown { what: "a delivery state", name: "FAILED".into() }));
}

#[test]
fn an_unknown_name_says_what_it_named_and_the_name() {
    let text = state("expired").expect_err("unknown").to_string();
    assert_eq!(text, "a delivery state this build does not know (\"expired\")");
}

#[test]
fn stored_events_read_back_in_order_and_unknown_event_names_are_kept_apart_not_dropped() {
    assert_eq!(events("needs-you,done"), (vec![Notice::NeedsYou, Notice::Done], vec![]));
    assert_eq!(
        events("closed,later-event,failed,"),
        (
            vec![Notice::Closed, Notice::Failed],
            vec![
                Unknown { what: "an event", name: "later-event".into() },
                Unknown { what: "an event", name: String::new() }
            ],
        )
    );
    assert_eq!(events(""), (vec![], vec![]), "no events stored: none, and nothing unknown");
}

proptest! {
    #[test]
    fn any_events_written_read_back_the_same(picks in proptest::collection::vec(0..Notice::ALL.len(), 0..6)) {
        let written: Vec<Notice> = picks.iter().map(|&i| Notice::ALL[i]).collect();
        prop_assert_eq!(events(&events_text(&written)), (written, vec![]));
    }
}
