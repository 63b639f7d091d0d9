//! What an `Idempotency-Key` remembers, and what a repeat of it is answered: plain decisions
//! over plain data, carried out by the hand-off's Durable Object.
//!
//! Rules:
//! - only an applied change is remembered (one that moved the version, or a no-op that
//!   answered 2xx); a refusal or a dry run changed nothing, so a retry is simply evaluated
//!   again and can change nothing the first attempt could not have;
//! - a repeat with the same fingerprint (method, path, canonical query, role, body) answers
//!   the remembered answer; with another fingerprint it is 422 `idempotency.mismatch`;
//! - an answer over [`IDEMPOTENCY_ANSWER_BYTES_MAX`] is remembered without its `package`,
//!   with the digest of the whole answer; a replay puts the package back from the ledger while
//!   that package is still the current one, and the digest proves the answer is byte for byte
//!   the first; otherwise the replay is the remembered answer without its package (the
//!   answer's JSON, and which part of it is the package, are `handoff_api::idempotency`'s);
//! - a hand-off keeps at most [`IDEMPOTENCY_KEYS_PER_HANDOFF_MAX`] keys and
//!   [`IDEMPOTENCY_BYTES_PER_HANDOFF_MAX`] bytes of answers, the oldest forgotten first, and
//!   none older than [`IDEMPOTENCY_TTL_MS`].

use crate::limits::{
    IDEMPOTENCY_ANSWER_BYTES_MAX, IDEMPOTENCY_BYTES_PER_HANDOFF_MAX, IDEMPOTENCY_KEYS_PER_HANDOFF_MAX,
    IDEMPOTENCY_TTL_MS,
};
use crate::time::EpochMs;
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap};

/// An answer as the store keeps it for its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remembered {
    pub fingerprint: String,
    pub status: u16,
    /// The answer's JSON, without its `package` when [`Remembered::slim`].
    pub body: String,
    pub slim: bool,
    /// SHA-256 (hex) of the whole answer as first sent.
    pub digest: String,
}

impl Remembered {
    /// The bytes this row costs against [`IDEMPOTENCY_BYTES_PER_HANDOFF_MAX`].
    pub fn bytes(&self) -> usize {
        self.body.len() + self.fingerprint.len() + self.digest.len()
    }
}

/// What a keyed request finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<'a> {
    /// The key is new (or forgotten): carry the request out.
    Fresh,
    /// The key answered this same request: answer it again.
    Replay(&'a Remembered),
    /// The key answered another request: 422 `idempotency.mismatch`.
    Mismatch,
}

pub fn decide<'a>(remembered: Option<&'a Remembered>, fingerprint: &str) -> Decision<'a> {
    match remembered {
        None => Decision::Fresh,
        Some(r) if r.fingerprint == fingerprint => Decision::Replay(r),
        Some(_) => Decision::Mismatch,
    }
}

fn digest(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Whether an answer is remembered at all: an applied change's (2xx), never a refusal's or a
/// dry run's.
pub fn keeps(status: u16, dry_run: bool) -> bool {
    !dry_run && (200..300).contains(&status)
}

/// What to remember of `whole`, the text of an answer [`keeps`] keeps. Over the answer cap it
/// is kept as `without_package` gives it (the answer without its package, or `None` when it
/// has none), with the digest of the whole.
pub fn remember(
    fingerprint: &str,
    status: u16,
    whole: &str,
    without_package: impl FnOnce() -> Option<String>,
) -> Remembered {
    let digest = digest(whole);
    let (body, slim) = match (whole.len() > IDEMPOTENCY_ANSWER_BYTES_MAX).then(without_package).flatten() {
        Some(slim) => (slim, true),
        None => (whole.to_string(), false),
    };
    Remembered { fingerprint: fingerprint.to_string(), status, body, slim, digest }
}

/// The text a replay answers: the remembered one, or for a slim one the whole answer that
/// `with_package` rebuilds from it (the package put back while it is still current), but only
/// when its digest proves it byte for byte the first. Never a different answer.
pub fn replay(r: &Remembered, with_package: impl FnOnce(&str) -> Option<String>) -> String {
    if !r.slim {
        return r.body.clone();
    }
    match with_package(&r.body) {
        Some(whole) if digest(&whole) == r.digest => whole,
        _ => r.body.clone(),
    }
}

/// How many of the oldest rows to forget so that a table of `count` rows and `bytes` bytes
/// (the newest row included) fits both caps; `oldest_bytes` gives the rows' sizes, oldest first.
pub fn evictions(count: usize, bytes: usize, oldest_bytes: impl IntoIterator<Item = usize>) -> usize {
    let (mut count, mut bytes) = (count, bytes);
    let mut forget = 0;
    for size in oldest_bytes {
        if count <= IDEMPOTENCY_KEYS_PER_HANDOFF_MAX && bytes <= IDEMPOTENCY_BYTES_PER_HANDOFF_MAX {
            break;
        }
        count -= 1;
        bytes = bytes.saturating_sub(size);
        forget += 1;
    }
    forget
}

/// Whether a table of `count` rows and `bytes` bytes is over either cap.
pub fn over_caps(count: usize, bytes: usize) -> bool {
    count > IDEMPOTENCY_KEYS_PER_HANDOFF_MAX || bytes > IDEMPOTENCY_BYTES_PER_HANDOFF_MAX
}

/// One remembered key as the ledger holds it: when it was remembered and what its row costs
/// (its answer stays in storage until a replay reads it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyEntry {
    pub key: String,
    pub at: EpochMs,
    pub bytes: usize,
}

/// What remembering one more key forgets, in the same transaction: every key remembered before
/// `expired_before` (past [`IDEMPOTENCY_TTL_MS`]), then `keys`, the oldest first, until both
/// caps fit with the new one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Forget {
    pub expired_before: Option<EpochMs>,
    pub keys: Vec<String>,
}

/// Every key one hand-off remembers, with its age and size: what the caps and the expiry are
/// judged on. The object loads it once (the first keyed change after a start) and carries out
/// the [`Forget`] that each [`Keys::remember`] answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keys {
    by_age: BTreeSet<(EpochMs, String)>,
    by_key: HashMap<String, (EpochMs, usize)>,
    bytes: usize,
}

impl Keys {
    pub fn restore(entries: impl IntoIterator<Item = KeyEntry>) -> Keys {
        let mut keys = Keys::default();
        for e in entries {
            keys.insert(e.key, e.at, e.bytes);
        }
        keys
    }

    /// The oldest moment a key may have been remembered at and still answer, at `now`.
    pub fn oldest_live(now: EpochMs) -> EpochMs {
        now - IDEMPOTENCY_TTL_MS
    }

    /// Whether `key` still answers at `now` (remembered, and within the TTL).
    pub fn is_live(&self, key: &str, now: EpochMs) -> bool {
        self.by_key.get(key).is_some_and(|(at, _)| *at >= Keys::oldest_live(now))
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// The bytes of every row held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn insert(&mut self, key: String, at: EpochMs, bytes: usize) {
        self.remove(&key);
        self.by_age.insert((at, key.clone()));
        self.by_key.insert(key, (at, bytes));
        self.bytes += bytes;
    }

    fn remove(&mut self, key: &str) {
        if let Some((at, bytes)) = self.by_key.remove(key) {
            self.by_age.remove(&(at, key.to_string()));
            self.bytes -= bytes;
        }
    }

    /// Remembers `key` at `now`, its row costing `bytes`: answers what to forget with it. The
    /// keys past their TTL go first, then the oldest (by time, then key) until the hand-off's
    /// keys fit both caps, the new one included.
    pub fn remember(&mut self, key: &str, bytes: usize, now: EpochMs) -> Forget {
        let oldest_live = Keys::oldest_live(now);
        let expired: Vec<String> =
            self.by_age.iter().take_while(|(at, _)| *at < oldest_live).map(|(_, k)| k.clone()).collect();
        let mut forget = Forget { expired_before: (!expired.is_empty()).then_some(oldest_live), keys: Vec::new() };
        for k in &expired {
            self.remove(k);
        }
        self.remove(key);
        let sizes: Vec<(String, usize)> = self.by_age.iter().map(|(_, k)| (k.clone(), self.by_key[k].1)).collect();
        let n = evictions(self.len() + 1, self.bytes + bytes, sizes.iter().map(|(_, b)| *b));
        for (k, _) in sizes.into_iter().take(n) {
            self.remove(&k);
            forget.keys.push(k);
        }
        self.insert(key.to_string(), now, bytes);
        debug_assert!(!over_caps(self.len(), self.bytes) || self.len() == 1, "the keys kept fit both caps");
        forget
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BIG: usize = IDEMPOTENCY_ANSWER_BYTES_MAX + 1;

    #[test]
    fn a_refusal_or_a_dry_run_is_not_kept_and_every_2xx_is() {
        assert!(!keeps(409, false) && !keeps(200, true));
        for status in [200, 201, 204, 299] {
            assert!(keeps(status, false), "{status}");
        }
        for status in [199, 300, 422, 503] {
            assert!(!keeps(status, false), "{status}");
        }
    }

    #[test]
    fn the_same_key_replays_the_same_request_and_refuses_another() {
        let r = remember("f1", 201, "{}", || unreachable!("small"));
        assert_eq!(decide(None, "f1"), Decision::Fresh);
        assert_eq!(decide(Some(&r), "f1"), Decision::Replay(&r));
        assert_eq!(decide(Some(&r), "f2"), Decision::Mismatch);
    }

    #[test]
    fn a_compile_answer_of_a_few_kilobytes_is_remembered_whole() {
        // A usual package is a few KiB: only a large one is kept without it.
        let usual = format!(r#"{{"package":"{}"}}"#, "p".repeat(12 * 1024));
        let r = remember("f", 200, &usual, || Some("slim".into()));
        assert!(!r.slim && r.body == usual);
    }

    #[test]
    fn an_answer_of_exactly_the_cap_is_kept_whole_and_one_byte_more_is_kept_slim() {
        let at_cap = "x".repeat(IDEMPOTENCY_ANSWER_BYTES_MAX);
        let r = remember("f", 200, &at_cap, || unreachable!("not over the cap"));
        assert_eq!((r.slim, r.body.len()), (false, IDEMPOTENCY_ANSWER_BYTES_MAX));
        let over = "x".repeat(BIG);
        let r = remember("f", 200, &over, || Some("slim".into()));
        assert_eq!((r.slim, r.body.as_str()), (true, "slim"));
        let r = remember("f", 200, &over, || None);
        assert_eq!((r.slim, r.body.len()), (false, BIG), "an answer without a package is kept whole");
    }

    #[test]
    fn a_slim_answer_is_replayed_whole_only_when_the_digest_proves_it_the_first() {
        let whole = "x".repeat(BIG);
        let r = remember("f", 200, &whole, || Some("slim".into()));
        assert_eq!(
            replay(&r, |slim| Some(format!("{}{slim}", "x".repeat(BIG - 4)))),
            "slim",
            "other bytes: the slim answer"
        );
        assert_eq!(replay(&r, |_| Some(whole.clone())), whole, "byte for byte the first");
        assert_eq!(replay(&r, |_| None), "slim", "the package is gone: the slim answer");
        let kept = remember("f", 200, "{}", || unreachable!());
        assert_eq!(replay(&kept, |_| unreachable!("a whole answer is not rebuilt")), "{}");
    }

    #[test]
    fn a_remembered_answer_costs_its_body_fingerprint_and_digest_bytes() {
        let r = remember("fp", 200, "{\"a\":1}", || None);
        assert_eq!(r.digest.len(), 64, "SHA-256 in hex");
        assert_eq!(r.bytes(), "{\"a\":1}".len() + "fp".len() + 64);
    }

    #[test]
    fn the_oldest_rows_are_forgotten_until_both_caps_fit() {
        assert_eq!(evictions(IDEMPOTENCY_KEYS_PER_HANDOFF_MAX, 10, [1, 1]), 0);
        assert_eq!(evictions(IDEMPOTENCY_KEYS_PER_HANDOFF_MAX + 2, 10, [1, 1, 1]), 2);
        let over = IDEMPOTENCY_BYTES_PER_HANDOFF_MAX + 100;
        assert_eq!(evictions(5, over, [60, 30, 20, 1]), 3);
        assert!(over_caps(5, over) && !over_caps(5, 100));
    }

    #[test]
    fn a_table_exactly_at_both_caps_fits_and_one_more_row_or_byte_is_over() {
        let (keys, bytes) = (IDEMPOTENCY_KEYS_PER_HANDOFF_MAX, IDEMPOTENCY_BYTES_PER_HANDOFF_MAX);
        assert!(!over_caps(keys, bytes));
        assert!(over_caps(keys + 1, bytes));
        assert!(over_caps(keys, bytes + 1));
        assert_eq!(evictions(keys, bytes, [1, 1]), 0, "nothing is forgotten at the caps");
        assert_eq!(evictions(keys + 1, bytes, [1, 1]), 1);
        assert_eq!(evictions(keys, bytes + 1, [1, 1]), 1);
        assert_eq!(evictions(3, bytes + 5, [6, 1, 1]), 1, "the bytes of the forgotten row count");
    }

    proptest! {
        #[test]
        fn after_evictions_the_rows_kept_fit_both_caps(sizes in prop::collection::vec(1usize..200_000, 0..1_200)) {
            let bytes: usize = sizes.iter().sum();
            let forget = evictions(sizes.len(), bytes, sizes.iter().copied());
            let kept = &sizes[forget..];
            prop_assert!(!over_caps(kept.len(), kept.iter().sum()));
            // And no more than needed: keeping one more of the oldest would be over a cap.
            if forget > 0 {
                let one_more = &sizes[forget - 1..];
                prop_assert!(over_caps(one_more.len(), one_more.iter().sum()));
            }
        }

        /// A key answers its first answer byte for byte, or (when a slim answer cannot be
        /// rebuilt exactly) the slim answer it stored: never any other text.
        #[test]
        fn a_replay_is_the_first_answer_or_the_stored_one_and_nothing_else(
            extra in 0usize..64,
            tail in "[a-z]{0,8}",
            rebuilt_tail in "[a-z]{0,8}",
            has_package in any::<bool>(),
            status in 200u16..300,
        ) {
            let whole = format!("{}{tail}", "x".repeat(IDEMPOTENCY_ANSWER_BYTES_MAX - 8 + extra));
            let r = remember("f", status, &whole, || has_package.then(|| "slim".to_string()));
            prop_assert_eq!(r.slim, has_package && whole.len() > IDEMPOTENCY_ANSWER_BYTES_MAX);
            prop_assert_eq!(decide(Some(&r), "f"), Decision::Replay(&r));
            let rebuilt = format!("{}{rebuilt_tail}", "x".repeat(IDEMPOTENCY_ANSWER_BYTES_MAX - 8 + extra));
            let answered = replay(&r, |_| Some(rebuilt.clone()));
            prop_assert!(answered == whole || answered == r.body);
            prop_assert_eq!(answered == whole, !r.slim || rebuilt == whole);
        }
    }

    fn entry(key: &str, at: EpochMs, bytes: usize) -> KeyEntry {
        KeyEntry { key: key.into(), at, bytes }
    }

    #[test]
    fn remembering_a_key_forgets_the_expired_ones_first_then_the_oldest_until_both_caps_fit() {
        let now = 10 * IDEMPOTENCY_TTL_MS;
        let mut keys = Keys::restore([
            entry("old", now - IDEMPOTENCY_TTL_MS - 1, 10),
            entry("a", now - 5, 10),
            entry("b", now - 4, 10),
        ]);
        assert!(!keys.is_live("old", now) && keys.is_live("a", now) && !keys.is_live("zzz", now));
        let forget = keys.remember("c", 10, now);
        assert_eq!(forget, Forget { expired_before: Some(now - IDEMPOTENCY_TTL_MS), keys: vec![] });
        assert_eq!((keys.len(), keys.bytes()), (3, 30));
        // Past the byte cap: the oldest go, and no more than needed.
        let big = IDEMPOTENCY_BYTES_PER_HANDOFF_MAX - 15;
        let forget = keys.remember("d", big, now + 1);
        assert_eq!(forget, Forget { expired_before: None, keys: vec!["a".into(), "b".into()] });
        assert!(keys.is_live("c", now + 1) && keys.is_live("d", now + 1));
        assert_eq!(keys.bytes(), 10 + big);
    }

    #[test]
    fn a_key_remembered_again_replaces_its_own_row_and_is_never_its_own_eviction() {
        let mut keys = Keys::default();
        keys.remember("k", IDEMPOTENCY_BYTES_PER_HANDOFF_MAX, 1);
        let forget = keys.remember("k", IDEMPOTENCY_BYTES_PER_HANDOFF_MAX, 2);
        assert_eq!(forget, Forget::default());
        assert_eq!((keys.len(), keys.bytes()), (1, IDEMPOTENCY_BYTES_PER_HANDOFF_MAX));
    }

    proptest! {
        /// Driven like a hand-off's keys over a day and more: whatever is remembered, the
        /// ledger never holds more than the caps allow, forgets only what it must, and what it
        /// says to forget is exactly what it no longer holds.
        #[test]
        fn the_ledger_always_fits_both_caps_and_forgets_only_the_oldest(
            steps in prop::collection::vec((0usize..1_500, 1usize..300_000, 0i64..3_600_000), 1..400),
        ) {
            let mut keys = Keys::default();
            let mut now = 0;
            let mut held: Vec<(EpochMs, String)> = Vec::new();
            for (n, (k, bytes, dt)) in steps.into_iter().enumerate() {
                now += dt;
                let key = format!("k{k}");
                let forget = keys.remember(&key, bytes, now);
                prop_assert!(keys.len() <= IDEMPOTENCY_KEYS_PER_HANDOFF_MAX);
                prop_assert!(keys.bytes() <= IDEMPOTENCY_BYTES_PER_HANDOFF_MAX.max(bytes));
                prop_assert!(keys.is_live(&key, now), "step {n}: the new key answers");
                for gone in &forget.keys {
                    prop_assert!(!keys.is_live(gone, now) && gone != &key);
                }
                held.retain(|(_, k)| k != &key && !forget.keys.contains(k));
                if let Some(before) = forget.expired_before {
                    held.retain(|(at, _)| *at >= before);
                }
                // Everything forgotten for the caps was older than everything kept.
                held.push((now, key));
                prop_assert_eq!(held.len(), keys.len());
            }
        }
    }
}
