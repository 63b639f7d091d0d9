//! A small seeded generator (SplitMix64) for the randomised tests. Hand-written rather than a
//! crate on purpose: a printed seed must replay the same choices after any dependency update,
//! and `rand` promises no stable stream across versions.

use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A seed from the clock and the process id, for runs that were not asked to replay one.
    pub fn fresh_seed() -> u64 {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
        Rng::new(nanos ^ ((std::process::id() as u64) << 32)).next_u64()
    }

    /// The seed named by the environment variable `name`, or a fresh one.
    pub fn seed_from_env(name: &str) -> (u64, bool) {
        match std::env::var(name).ok().and_then(|s| s.trim().parse().ok()) {
            Some(seed) => (seed, true),
            None => (Rng::fresh_seed(), false),
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        self.next_u64() % n
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// The seed of the `index`th child stream (a history, a client), independent of the others.
    pub fn derive(seed: u64, index: u64) -> u64 {
        Rng::new(seed ^ index.wrapping_mul(0xD6E8_FEB8_6659_FD93)).next_u64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_replays_the_same_stream() {
        let a: Vec<u64> = (0..5).scan(Rng::new(42), |r, _| Some(r.next_u64())).collect();
        let b: Vec<u64> = (0..5).scan(Rng::new(42), |r, _| Some(r.next_u64())).collect();
        assert_eq!(a, b);
        assert_ne!(Rng::derive(42, 1), Rng::derive(42, 2));
    }
}
