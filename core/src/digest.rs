//! SHA-256 of a package: in software (`sha2`) unless the host installs a native one. The
//! Worker installs the runtime's `createHash` (`node:crypto`), native code that a package's
//! kilobytes cost a fraction of what `sha2` compiled for size costs. Both give the same 32
//! bytes: the golden vectors hold the software one, an integration test the Worker's.

use sha2::{Digest, Sha256};
use std::cell::Cell;

/// A native SHA-256 of the parts, concatenated; `None` when it failed (software then answers).
pub type Native = fn(&[&[u8]]) -> Option<[u8; 32]>;

thread_local! {
    static NATIVE: Cell<Option<Native>> = const { Cell::new(None) };
}

/// Installs `native` for every later [`sha256`] on this thread.
pub fn install(native: Native) {
    NATIVE.with(|n| n.set(Some(native)));
}

/// SHA-256 of `parts`, concatenated.
pub fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    if let Some(digest) = NATIVE.with(Cell::get).and_then(|native| native(parts)) {
        return digest;
    }
    software(parts)
}

fn software(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing(_: &[&[u8]]) -> Option<[u8; 32]> {
        None
    }

    fn constant(_: &[&[u8]]) -> Option<[u8; 32]> {
        Some([7; 32])
    }

    #[test]
    fn parts_hash_as_their_concatenation_and_match_the_standard_vector() {
        // FIPS 180-2's "abc".
        assert_eq!(
            hex::encode(sha256(&[b"ab", b"", b"c"])),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn an_installed_native_digest_answers_and_a_failing_one_falls_back_to_software() {
        std::thread::spawn(|| {
            install(constant);
            assert_eq!(sha256(&[b"abc"]), [7; 32]);
            install(failing);
            assert_eq!(sha256(&[b"abc"]), software(&[b"abc"]));
        })
        .join()
        .unwrap();
    }
}
