//! Bearer token verification. Half the inputs are taken as a raw token; the other half are
//! signed with the right key first (header and payload split at the first 0xFF byte), so that
//! the fuzzer gets past the signature into the header, algorithm and claims checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../checks.rs");

fuzz_target!(|data: &[u8]| {
    check_token(data);
});
