//! One sort for the service: a stable merge sort over the places of the items, compiled once
//! whatever is sorted. The standard library's sorts (driftsort, ipnsort) are compiled again for
//! each element type and each comparison, about 50 KB of the Worker's `.wasm` before it is
//! compressed; only the move of the items into their order is generic here.

use std::cmp::Ordering;

/// The places `0..n` in order, stable, where `before(i, j)` says the item at `i` goes before
/// the one at `j`.
fn places(n: usize, before: &dyn Fn(usize, usize) -> bool) -> Vec<usize> {
    let mut from: Vec<usize> = (0..n).collect();
    let mut to = vec![0; n];
    let mut width = 1;
    while width < n {
        let mut start = 0;
        while start < n {
            let mid = (start + width).min(n);
            let end = (start + 2 * width).min(n);
            let (mut left, mut right, mut k) = (start, mid, start);
            while left < mid && right < end {
                // An equal item on the right stays after the left one: stable.
                if before(from[right], from[left]) {
                    to[k] = from[right];
                    right += 1;
                } else {
                    to[k] = from[left];
                    left += 1;
                }
                k += 1;
            }
            to[k..k + (mid - left)].copy_from_slice(&from[left..mid]);
            k += mid - left;
            to[k..k + (end - right)].copy_from_slice(&from[right..end]);
            start = end;
        }
        std::mem::swap(&mut from, &mut to);
        width *= 2;
    }
    from
}

/// Sorts `items` by `cmp`, keeping equal items in their order.
pub fn sort_by<T>(items: &mut Vec<T>, cmp: impl Fn(&T, &T) -> Ordering) {
    if items.len() < 2 {
        return;
    }
    let order = {
        let held = &*items;
        places(held.len(), &|i, j| cmp(&held[i], &held[j]) == Ordering::Less)
    };
    let mut taken: Vec<Option<T>> = items.drain(..).map(Some).collect();
    items.extend(order.into_iter().filter_map(|i| taken[i].take()));
}

/// Sorts `items` by `key`, keeping items of equal keys in their order.
pub fn sort_by_key<T, K: Ord>(items: &mut Vec<T>, key: impl Fn(&T) -> K) {
    sort_by(items, |a, b| key(a).cmp(&key(b)));
}

/// Sorts `items` in their own order.
pub fn sort<T: Ord>(items: &mut Vec<T>) {
    sort_by(items, T::cmp);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn it_orders_as_the_standard_librarys_stable_sort(items in proptest::collection::vec((0u8..8, any::<u16>()), 0..200)) {
            let mut ours = items.clone();
            sort_by_key(&mut ours, |(k, _)| *k);
            let mut std = items.clone();
            std.sort_by_key(|(k, _)| *k);
            prop_assert_eq!(ours, std);
            let mut ours = items.clone();
            sort(&mut ours);
            let mut std = items;
            std.sort();
            prop_assert_eq!(ours, std);
        }
    }
}
