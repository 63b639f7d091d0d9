//! Enrolling a machine without copying a secret: the machine starts an enrolment with the
//! SHA-256 of a secret key it keeps and shows a short code, the owner approves (or refuses)
//! that code, and the machine collects its credential by sending the key itself, accepting only
//! the owner it expects. Pending codes are bounded globally, per client address and in time;
//! tries on them are bounded per approver. One `Enrolments` value is what the `Enrolments`
//! object holds (`src/enrolments_object.rs`).

use crate::limits::{
    ENROLMENTS_PER_ADDRESS_PER_MINUTE_MAX, ENROLMENT_CODE_TRIES_PER_MINUTE_MAX, ENROLMENT_CODE_TTL_MS,
    PENDING_CODES_MAX, PENDING_CODES_PER_ADDRESS_MAX,
};
use crate::time::EpochMs;
use serde::{Deserialize, Serialize};

/// The code's characters: uppercase letters and digits without `I`, `O`, `0` and `1`, which
/// a person misreads: 32 of them, 5 bits each.
pub const CODE_ALPHABET: &[u8; 32] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
/// Characters in a code (`XXXX-XXXX`): 8 of 5 bits, 40 bits of randomness.
pub const CODE_CHARS: usize = 8;
/// Random bytes one code is made of.
pub const CODE_RANDOM_BYTES: usize = 5;

/// The odds that one try guesses some live code, at the most codes ever live at once:
/// `PENDING_CODES_MAX / 32^8` (about 9.1e-10).
pub fn guess_odds_per_try() -> f64 {
    PENDING_CODES_MAX as f64 / (CODE_ALPHABET.len() as f64).powi(CODE_CHARS as i32)
}

/// The odds that an approver guesses some live code within one code's life, trying as fast as
/// allowed: `ENROLMENT_CODE_TRIES_PER_MINUTE_MAX` tries a minute for the code's 10 minutes.
pub fn guess_odds_per_code_life() -> f64 {
    let minutes = ENROLMENT_CODE_TTL_MS as f64 / 60_000.0;
    guess_odds_per_try() * ENROLMENT_CODE_TRIES_PER_MINUTE_MAX as f64 * minutes
}

/// `XXXX-XXXX` from 40 random bits.
pub fn code_of(random: [u8; CODE_RANDOM_BYTES]) -> String {
    let bits = random.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
    let mut code = String::with_capacity(CODE_CHARS + 1);
    for i in 0..CODE_CHARS {
        if i == CODE_CHARS / 2 {
            code.push('-');
        }
        let index = (bits >> (5 * (CODE_CHARS - 1 - i))) & 31;
        code.push(CODE_ALPHABET[index as usize] as char);
    }
    code
}

/// A code as a person types it (any case, the dash and spaces optional) in its one written
/// form, or `None` when it cannot be one.
pub fn read_code(typed: &str) -> Option<String> {
    let chars: Vec<u8> = typed.bytes().filter(|b| !matches!(b, b'-' | b' ')).map(|b| b.to_ascii_uppercase()).collect();
    if chars.len() != CODE_CHARS || !chars.iter().all(|c| CODE_ALPHABET.contains(c)) {
        return None;
    }
    let (head, tail) = chars.split_at(CODE_CHARS / 2);
    Some(format!("{}-{}", String::from_utf8_lossy(head), String::from_utf8_lossy(tail)))
}

/// What a machine enrols with: the SHA-256 of its secret key, in hex (its "public key": the
/// key itself is sent only once, to collect the credential).
pub fn public_key_of(key: &[u8]) -> String {
    hex::encode(crate::digest::sha256(&[key]))
}

/// Whether `text` is a public key as [`public_key_of`] writes it.
pub fn is_public_key(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The fingerprint of the key a machine enrols with, as both sides show it before Approve:
/// `SHA256:` and the first 16 bytes of its SHA-256, in hex pairs.
pub fn fingerprint(public_key: &[u8]) -> String {
    let digest = crate::digest::sha256(&[public_key]);
    let pairs: Vec<String> = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("SHA256:{}", pairs.join(":"))
}

/// One enrolment waiting for its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub code: String,
    /// The machine's name (`--name`), its host name and its key's fingerprint: what the owner sees.
    pub name: String,
    pub host: String,
    pub fingerprint: String,
    /// [`public_key_of`] the machine's key: collecting proves the key.
    #[serde(default)]
    pub public_key: String,
    /// The client address it was started from, which bounds its codes.
    pub address: String,
    pub started_ms: EpochMs,
    /// The owner who approved it, once one did.
    pub approved_by: Option<String>,
    /// An owner refused it: the machine's next collect is told, and it is gone.
    #[serde(default)]
    pub refused: bool,
}

impl Pending {
    pub fn expired(&self, now: EpochMs) -> bool {
        now >= self.started_ms.saturating_add(ENROLMENT_CODE_TTL_MS)
    }
}

/// Why an enrolment or a try on a code is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `PENDING_CODES_MAX` codes are live: try later.
    TooManyPending,
    /// This address holds `PENDING_CODES_PER_ADDRESS_MAX` live codes, or started
    /// `ENROLMENTS_PER_ADDRESS_PER_MINUTE_MAX` in the last minute.
    AddressBusy,
    /// The approver tried `ENROLMENT_CODE_TRIES_PER_MINUTE_MAX` codes in the last minute.
    TooManyTries,
    /// No live code is this one (never made, expired, or already approved).
    UnknownCode,
    /// The machine expected another owner: the approval is refused.
    NotTheExpectedOwner,
    /// The owner refused the enrolment.
    RefusedByOwner,
}

impl Refused {
    /// The refusal as the contract answers it.
    pub fn refusal(self) -> crate::error::Refusal {
        use crate::error::{Code, Refusal};
        match self {
            Refused::TooManyPending => Refusal::new(
                Code::EnrolmentTooMany,
                format!("{PENDING_CODES_MAX} enrolments are waiting (PENDING_CODES_MAX): try again in a minute"),
            ),
            Refused::AddressBusy => Refusal::new(
                Code::EnrolmentTooMany,
                format!("this address holds {PENDING_CODES_PER_ADDRESS_MAX} live codes or started {ENROLMENTS_PER_ADDRESS_PER_MINUTE_MAX} enrolments this minute"),
            ),
            Refused::TooManyTries => Refusal::new(
                Code::EnrolmentRateLimited,
                format!("{ENROLMENT_CODE_TRIES_PER_MINUTE_MAX} codes tried this minute (ENROLMENT_CODE_TRIES_PER_MINUTE_MAX): try again in a minute"),
            ),
            Refused::UnknownCode => {
                Refusal::new(Code::EnrolmentNotFound, "no enrolment is waiting under this code (wrong, expired or used)")
            }
            Refused::NotTheExpectedOwner => Refusal::new(
                Code::EnrolmentRefused,
                "the machine expected another owner: this approval is refused and the enrolment is over",
            ),
            Refused::RefusedByOwner => Refusal::new(Code::EnrolmentRefused, "the owner refused this enrolment"),
        }
    }
}

/// What a machine's collect finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Collected {
    /// No owner has approved yet.
    Waiting,
    /// Approved by this owner; the machine named no expected owner yet, so nothing is issued.
    Approved { by: String },
    /// Approved by the owner the machine expects: the enrolment is over, its credential due.
    Accepted { pending: Pending, by: String },
}

/// Every pending enrolment, across owners, and the tries on them: what one store holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enrolments {
    pub pending: Vec<Pending>,
    /// `(address, started_ms)` of the enrolments started in the last minute.
    pub starts: Vec<(String, EpochMs)>,
    /// `(approver, tried_ms)` of the tries in the last minute.
    pub tries: Vec<(String, EpochMs)>,
}

const MINUTE_MS: EpochMs = 60_000;

impl Enrolments {
    /// Drops what has expired or left its minute.
    pub fn sweep(&mut self, now: EpochMs) {
        self.pending.retain(|p| !p.expired(now));
        self.starts.retain(|(_, at)| now - at < MINUTE_MS);
        self.tries.retain(|(_, at)| now - at < MINUTE_MS);
    }

    /// Starts an enrolment under `pending.code` (fresh randomness, drawn by the caller), within
    /// every bound; a code already live is never handed out twice.
    pub fn start(&mut self, pending: Pending, now: EpochMs) -> Result<(), Refused> {
        self.sweep(now);
        if self.pending.len() >= PENDING_CODES_MAX {
            return Err(Refused::TooManyPending);
        }
        let live_here = self.pending.iter().filter(|p| p.address == pending.address).count();
        let started_here = self.starts.iter().filter(|(a, _)| *a == pending.address).count();
        if live_here >= PENDING_CODES_PER_ADDRESS_MAX || started_here >= ENROLMENTS_PER_ADDRESS_PER_MINUTE_MAX as usize
        {
            return Err(Refused::AddressBusy);
        }
        if self.pending.iter().any(|p| p.code == pending.code) {
            return Err(Refused::UnknownCode);
        }
        self.starts.push((pending.address.clone(), now));
        self.pending.push(pending);
        Ok(())
    }

    /// One try by `approver`: refused past its tries this minute, else counted.
    fn try_by(&mut self, approver: &str, now: EpochMs) -> Result<(), Refused> {
        self.sweep(now);
        if self.tries.iter().filter(|(a, _)| a == approver).count() >= ENROLMENT_CODE_TRIES_PER_MINUTE_MAX as usize {
            return Err(Refused::TooManyTries);
        }
        self.tries.push((approver.to_string(), now));
        Ok(())
    }

    /// The index of the live, undecided enrolment `typed` names.
    fn undecided(&self, typed: &str) -> Result<usize, Refused> {
        let code = read_code(typed).ok_or(Refused::UnknownCode)?;
        let found = self.pending.iter().position(|p| p.code == code && p.approved_by.is_none() && !p.refused);
        found.ok_or(Refused::UnknownCode)
    }

    /// One try by `approver` on `typed`: the pending enrolment it names, to show before
    /// Approve. Every try counts, found or not.
    pub fn look_up(&mut self, approver: &str, typed: &str, now: EpochMs) -> Result<&Pending, Refused> {
        self.try_by(approver, now)?;
        let i = self.undecided(typed)?;
        Ok(&self.pending[i])
    }

    /// `approver` approves the code: once, by the first owner only; a try like a look-up.
    pub fn approve(&mut self, approver: &str, typed: &str, now: EpochMs) -> Result<&Pending, Refused> {
        self.try_by(approver, now)?;
        let i = self.undecided(typed)?;
        self.pending[i].approved_by = Some(approver.to_string());
        Ok(&self.pending[i])
    }

    /// `approver` refuses the code: the machine's next collect is told so.
    pub fn refuse(&mut self, approver: &str, typed: &str, now: EpochMs) -> Result<(), Refused> {
        self.try_by(approver, now)?;
        let i = self.undecided(typed)?;
        self.pending[i].refused = true;
        Ok(())
    }

    /// The machine collects: it proves the key it enrolled with by sending `key` itself. With
    /// `expected` (the owner it accepts) an approval by that owner ends the enrolment and
    /// issues the credential, and one by anyone else ends it refused; without, it is told who
    /// approved. A wrong key is as an unknown code.
    pub fn collect(
        &mut self,
        typed: &str,
        key: &[u8],
        expected: Option<&str>,
        now: EpochMs,
    ) -> Result<Collected, Refused> {
        self.sweep(now);
        let code = read_code(typed).ok_or(Refused::UnknownCode)?;
        let public_key = public_key_of(key);
        let i = self.pending.iter().position(|p| p.code == code && p.public_key == public_key);
        let i = i.ok_or(Refused::UnknownCode)?;
        if self.pending[i].refused {
            self.pending.remove(i);
            return Err(Refused::RefusedByOwner);
        }
        let Some(by) = self.pending[i].approved_by.clone() else {
            return Ok(Collected::Waiting);
        };
        let Some(expected) = expected else {
            return Ok(Collected::Approved { by });
        };
        let pending = self.pending.remove(i);
        accept(expected, &by)?;
        Ok(Collected::Accepted { pending, by })
    }
}

/// The machine's side: an approval stands only by the owner it expects (`--owner`, or the one
/// the person at its terminal confirms).
pub fn accept(expected_owner: &str, approved_by: &str) -> Result<(), Refused> {
    if expected_owner == approved_by {
        Ok(())
    } else {
        Err(Refused::NotTheExpectedOwner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(code: &str, address: &str, at: EpochMs) -> Pending {
        Pending {
            code: code.into(),
            name: "vm-7".into(),
            host: "vm-7.internal".into(),
            fingerprint: fingerprint(b"key"),
            public_key: public_key_of(b"key"),
            address: address.into(),
            started_ms: at,
            approved_by: None,
            refused: false,
        }
    }

    #[test]
    fn a_code_is_four_and_four_uppercase_letters_and_digits_and_reads_back_however_typed() {
        let code = code_of([0xde, 0xad, 0xbe, 0xef, 0x42]);
        assert_eq!(code.len(), 9);
        assert_eq!(&code[4..5], "-");
        assert!(code.bytes().filter(|b| *b != b'-').all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()));
        assert_eq!(read_code(&code.to_lowercase().replace('-', " ")), Some(code.clone()));
        assert_eq!(read_code("ABCD-EFG"), None, "too short");
        assert_eq!(read_code("ABCD-EFG0"), None, "0 is not in the alphabet");
        assert_ne!(code_of([0; 5]), code_of([0, 0, 0, 0, 1]), "every bit counts");
    }

    #[test]
    fn the_odds_of_guessing_a_live_code_are_under_one_in_ten_million_per_code_life() {
        assert!(guess_odds_per_try() < 1e-9);
        assert!(guess_odds_per_code_life() < 1e-7, "{}", guess_odds_per_code_life());
    }

    #[test]
    fn pending_codes_are_bounded_per_address_and_an_unapproved_code_expires() {
        let mut e = Enrolments::default();
        for i in 0..PENDING_CODES_PER_ADDRESS_MAX {
            e.start(pending(&code_of([i as u8; 5]), "10.0.0.1", 0), 0).unwrap();
        }
        assert_eq!(e.start(pending("ZZZZ-ZZZZ", "10.0.0.1", 0), 0), Err(Refused::AddressBusy));
        assert!(e.start(pending("ZZZZ-ZZZZ", "10.0.0.2", 0), 0).is_ok(), "another address is not held back");
        e.sweep(ENROLMENT_CODE_TTL_MS);
        assert!(e.pending.is_empty(), "every unapproved code expired");
    }

    #[test]
    fn pending_codes_are_bounded_globally() {
        let full = (0..PENDING_CODES_MAX).map(|i| pending(&format!("{i}"), &format!("a{i}"), 0)).collect();
        let mut e = Enrolments { pending: full, ..Enrolments::default() };
        assert_eq!(e.start(pending("ZZZZ-ZZZZ", "b", 0), 0), Err(Refused::TooManyPending));
    }

    #[test]
    fn a_wrong_code_is_refused_and_tries_are_bounded_per_approver() {
        let mut e = Enrolments::default();
        let code = code_of([7; 5]);
        e.start(pending(&code, "10.0.0.1", 0), 0).unwrap();
        for _ in 0..ENROLMENT_CODE_TRIES_PER_MINUTE_MAX - 1 {
            assert_eq!(e.look_up("mallory", "AAAA-AAAA", 1).err(), Some(Refused::UnknownCode));
        }
        assert_eq!(e.look_up("mallory", &code, 1).unwrap().name, "vm-7", "the last try of the minute");
        assert_eq!(e.look_up("mallory", &code, 2).err(), Some(Refused::TooManyTries), "even the right code");
        assert_eq!(e.look_up("alice", &code, 2).unwrap().host, "vm-7.internal", "another approver is not held back");
        assert!(e.look_up("mallory", &code, MINUTE_MS + 1).is_ok(), "a minute later");
        assert_eq!(e.look_up("alice", &code, ENROLMENT_CODE_TTL_MS).err(), Some(Refused::UnknownCode), "expired");
    }

    #[test]
    fn a_code_is_approved_once_and_the_machine_refuses_an_approval_by_an_owner_it_did_not_expect() {
        let mut e = Enrolments::default();
        let code = code_of([9; 5]);
        e.start(pending(&code, "10.0.0.1", 0), 0).unwrap();
        assert!(e.approve("mallory", &code, 1).is_ok());
        assert_eq!(e.approve("alice", &code, 2).err(), Some(Refused::UnknownCode), "approved already");
        assert_eq!(accept("alice", "mallory"), Err(Refused::NotTheExpectedOwner));
        assert_eq!(accept("alice", "alice"), Ok(()));
    }

    #[test]
    fn a_fingerprint_is_sha256_in_hex_pairs_and_differs_per_key() {
        let f = fingerprint(b"key");
        assert!(f.starts_with("SHA256:") && f.len() == 7 + 16 * 3 - 1, "{f}");
        assert_ne!(f, fingerprint(b"other key"));
    }

    #[test]
    fn the_machine_collects_only_with_its_key_and_only_from_the_owner_it_expects() {
        let mut e = Enrolments::default();
        let code = code_of([3; 5]);
        e.start(pending(&code, "10.0.0.1", 0), 0).unwrap();
        assert_eq!(e.collect(&code, b"key", Some("alice"), 1), Ok(Collected::Waiting));
        assert_eq!(e.collect(&code, b"another key", None, 1), Err(Refused::UnknownCode), "the key is proved");
        e.approve("alice", &code, 2).unwrap();
        assert_eq!(e.collect(&code, b"key", None, 3), Ok(Collected::Approved { by: "alice".into() }));
        assert_eq!(e.collect(&code, b"key", Some("mallory"), 4), Err(Refused::NotTheExpectedOwner));
        assert!(e.pending.is_empty(), "an approval by another owner ends the enrolment");

        e.start(pending(&code, "10.0.0.1", 5), 5).unwrap();
        e.approve("alice", &code, 6).unwrap();
        let Ok(Collected::Accepted { pending, by }) = e.collect(&code, b"key", Some("alice"), 7) else { panic!() };
        assert_eq!((pending.name.as_str(), by.as_str()), ("vm-7", "alice"));
        assert_eq!(e.collect(&code, b"key", Some("alice"), 8), Err(Refused::UnknownCode), "collected once");
    }

    #[test]
    fn a_refused_enrolment_is_told_to_the_machine_once_and_then_gone() {
        let mut e = Enrolments::default();
        let code = code_of([4; 5]);
        e.start(pending(&code, "10.0.0.1", 0), 0).unwrap();
        e.refuse("alice", &code, 1).unwrap();
        assert_eq!(e.approve("alice", &code, 2).err(), Some(Refused::UnknownCode), "decided already");
        assert_eq!(e.collect(&code, b"key", None, 3), Err(Refused::RefusedByOwner));
        assert_eq!(e.collect(&code, b"key", None, 4), Err(Refused::UnknownCode));
    }
}
