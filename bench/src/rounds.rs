//! Rounds: the Workers of a comparison measured in rotated order, and what is quoted of them.
//!
//! Whichever Worker runs first, or right after another, is measured on a machine in another
//! state, and that alone moved a ratio by up to 40 %. So a comparison measures its Workers once
//! per round, each round starting one Worker further on, and quotes the median of the per-round
//! ratios with their lowest and highest: a ratio that the order made is wide, one that survives
//! the order is narrow.

use serde::Serialize;

/// Rounds unless `--rounds` says: with three, a median has a middle and three Workers each take
/// every place once.
pub const ROUNDS_DEFAULT: usize = 3;
/// Fewer would leave a median of two (the mean) and some Worker never first.
pub const ROUNDS_MIN: usize = 3;
/// Every loop of the bench is bounded.
pub const ROUNDS_MAX: usize = 25;

/// The order of round `round` over `count` Workers, as indexes into them: round 0 is the
/// Workers' own order, and each round after starts one Worker further on (round 1 of three:
/// 1, 2, 0; round 2: 2, 0, 1).
pub fn rotation(round: usize, count: usize) -> Vec<usize> {
    (0..count).map(|place| (round + place) % count).collect()
}

/// The median: the middle value, or the mean of the two middle ones of an even count. `None`
/// of no values; NaN values are left out.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    Some(match sorted.len() % 2 {
        1 => sorted[middle],
        _ => (sorted[middle - 1] + sorted[middle]) / 2.0,
    })
}

/// A figure over the rounds: the median, the lowest and the highest.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// `None` of no values (NaN left out).
    pub fn of(values: &[f64]) -> Option<Spread> {
        let median = median(values)?;
        let kept = values.iter().copied().filter(|v| !v.is_nan());
        let min = kept.clone().fold(f64::INFINITY, f64::min);
        let max = kept.fold(f64::NEG_INFINITY, f64::max);
        Some(Spread { median, min, max })
    }

    /// The three figures to `places` places, for the results file.
    pub fn rounded(self, places: i32) -> Spread {
        let r = |x| crate::stats::round(x, places);
        Spread { median: r(self.median), min: r(self.min), max: r(self.max) }
    }
}

/// Round by round, `ours[r] / theirs[r]`: the two measured in the same round. A round where
/// `theirs` has no figure (zero, or missing) has no ratio (NaN), which the spread leaves out.
pub fn ratios(ours: &[f64], theirs: &[f64]) -> Vec<f64> {
    ours.iter().zip(theirs).map(|(&o, &t)| if t > 0.0 { o / t } else { f64::NAN }).collect()
}

/// Ours against the better of two references for one figure, over the rounds.
#[derive(Debug, Clone, Serialize)]
pub struct Versus {
    /// The reference compared against: the one whose median figure is the better.
    pub reference: &'static str,
    /// Ours over that reference, round by round (in the same round), to three places.
    pub per_round: Vec<f64>,
    /// The median of `per_round`, with its lowest and highest; `None` when no round has one.
    pub ratio: Option<Spread>,
}

/// Picks the better reference by its median figure (`higher_is_better`: throughput; else CPU,
/// where lower is better; a tie goes to the first), then ours over it in each round.
pub fn against_better(ours: &[f64], references: [(&'static str, &[f64]); 2], higher_is_better: bool) -> Versus {
    let [(a_name, a), (b_name, b)] = references;
    let (ma, mb) = (median(a).unwrap_or(f64::NAN), median(b).unwrap_or(f64::NAN));
    let a_wins = mb.is_nan() || if higher_is_better { ma >= mb } else { ma <= mb };
    let (reference, theirs) = if a_wins { (a_name, a) } else { (b_name, b) };
    let per_round = ratios(ours, theirs);
    Versus {
        reference,
        ratio: Spread::of(&per_round).map(|s| s.rounded(3)),
        per_round: per_round.into_iter().map(|r| crate::stats::round(r, 3)).collect(),
    }
}

/// `0.98–1.40`: a ratio's lowest and highest, to two places.
pub fn range(s: Spread) -> String {
    format!("{:.2}–{:.2}", s.min, s.max)
}

/// `1.23 0.98–1.40` (the median, then the range), or `-` with no ratio.
pub fn show(ratio: Option<Spread>) -> String {
    match ratio {
        Some(s) => format!("{:.2} {}", s.median, range(s)),
        None => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_zero_keeps_the_order_and_each_round_starts_one_further_on() {
        assert_eq!(rotation(0, 3), [0, 1, 2]);
        assert_eq!(rotation(1, 3), [1, 2, 0]);
        assert_eq!(rotation(2, 3), [2, 0, 1]);
        assert_eq!(rotation(3, 3), [0, 1, 2]);
        assert_eq!(rotation(1, 2), [1, 0]);
    }

    #[test]
    fn over_as_many_rounds_as_workers_each_worker_takes_every_place_once() {
        for count in 1..=5 {
            for place in 0..count {
                let mut seen: Vec<usize> = (0..count).map(|round| rotation(round, count)[place]).collect();
                seen.sort_unstable();
                assert_eq!(seen, (0..count).collect::<Vec<_>>(), "place {place} of {count}");
            }
            for round in 0..count {
                let mut workers = rotation(round, count);
                workers.sort_unstable();
                assert_eq!(workers, (0..count).collect::<Vec<_>>(), "round {round} measures every Worker once");
            }
        }
    }

    #[test]
    fn the_median_is_the_middle_or_the_mean_of_the_two_middle_values() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[10.0, 1.0, 1.5, 0.5]), Some(1.25), "an outlier does not move it");
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN, 5.0, 1.0]), Some(3.0), "NaN is left out");
    }

    #[test]
    fn the_spread_is_the_median_with_the_lowest_and_the_highest() {
        assert_eq!(Spread::of(&[1.2, 0.8, 1.0]), Some(Spread { median: 1.0, min: 0.8, max: 1.2 }));
        assert_eq!(Spread::of(&[2.0, f64::NAN]), Some(Spread { median: 2.0, min: 2.0, max: 2.0 }));
        assert_eq!(Spread::of(&[f64::NAN]), None);
        assert_eq!(
            Spread { median: 1.23456, min: 0.98765, max: 1.5 }.rounded(2),
            Spread { median: 1.23, min: 0.99, max: 1.5 }
        );
    }

    #[test]
    fn each_ratio_is_of_the_same_round() {
        let r = ratios(&[100.0, 200.0, 300.0], &[50.0, 400.0, 0.0]);
        assert_eq!(&r[..2], &[2.0, 0.5]);
        assert!(r[2].is_nan(), "no ratio over a reference with no figure");
    }

    #[test]
    fn the_better_reference_is_picked_by_its_median_and_the_ratio_is_the_median_of_the_rounds() {
        let ours = [120.0, 90.0, 100.0];
        // fetch has the best single round (200), rpc the better median (100 against 80).
        let fetch = [80.0, 200.0, 60.0];
        let rpc = [100.0, 100.0, 100.0];
        let v = against_better(&ours, [("fetch", &fetch), ("rpc", &rpc)], true);
        assert_eq!(v.reference, "rpc");
        assert_eq!(v.per_round, [1.2, 0.9, 1.0]);
        assert_eq!(v.ratio, Some(Spread { median: 1.0, min: 0.9, max: 1.2 }));
        // The median of the rounds' ratios, not the ratio of the medians (200 / 100 = 2 here).
        let v = against_better(&[100.0, 200.0, 300.0], [("fetch", &[100.0, 100.0, 300.0]), ("rpc", &[0.0; 3])], true);
        assert_eq!(v.reference, "fetch");
        assert_eq!(v.per_round, [1.0, 2.0, 1.0]);
        assert_eq!(v.ratio, Some(Spread { median: 1.0, min: 1.0, max: 2.0 }));
        let third = against_better(&[1.0, 1.0, 1.0], [("fetch", &[3.0, 3.0, 3.0]), ("rpc", &[0.0; 3])], true);
        assert_eq!(third.per_round, [0.333; 3], "three places in the results file");
    }

    #[test]
    fn for_cpu_the_better_reference_is_the_cheaper_one() {
        let v = against_better(
            &[300.0, 300.0, 300.0],
            [("fetch", &[400.0, 400.0, 400.0]), ("rpc", &[600.0, 200.0, 700.0])],
            false,
        );
        assert_eq!(v.reference, "fetch", "fetch's median 400 is under rpc's 600, though rpc had the cheapest round");
        assert_eq!(v.ratio.map(|s| s.median), Some(0.75));
        let tie = against_better(&[1.0], [("fetch", &[2.0]), ("rpc", &[2.0])], false);
        assert_eq!(tie.reference, "fetch");
    }

    #[test]
    fn a_range_is_the_lowest_then_the_highest() {
        assert_eq!(range(Spread { median: 1.0, min: 0.876, max: 1.25 }), "0.88–1.25");
        assert_eq!(show(Some(Spread { median: 1.0, min: 0.876, max: 1.25 })), "1.00 0.88–1.25");
        assert_eq!(show(None), "-");
    }
}
