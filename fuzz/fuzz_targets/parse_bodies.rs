//! Every request body and query string parser of the Worker, fed the same bytes.
//! Beyond "never panics": each refusal is 400 `request.invalid`, and each acceptance keeps
//! the limits the parser promises. The checks live in `handoff_fuzz_checks` below, shared
//! word for word with `test/tests/fuzz_regressions.rs` through `include!`.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../checks.rs");

fuzz_target!(|data: &[u8]| {
    check_bodies(data);
});
