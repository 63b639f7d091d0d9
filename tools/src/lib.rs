//! Release tools for the hand-off service. The rules are plain functions over plain data:
//! `promote` decides what production may bind and migrate, `smoke` decides whether a
//! deployed Worker answered as expected, `hooks` keeps the test and bench hooks out of every
//! deployable environment. The binaries only read files, talk HTTP and print.
pub mod cli;
pub mod hooks;
pub mod promote;
pub mod smoke;
