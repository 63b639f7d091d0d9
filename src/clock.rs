//! The runtime's clock, read one way by the router and both objects: `Date.now()` itself
//! (`worker::Date::now` allocates a `Date` object to read it).

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    js_sys::Date::now() as i64
}

/// Whole seconds since the Unix epoch (what a token's `exp` is judged against).
pub fn now_s() -> i64 {
    now_ms() / 1000
}
