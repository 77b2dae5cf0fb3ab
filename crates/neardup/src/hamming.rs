//! Hamming distance between 64-bit fingerprints, and between 256-bit ([`Wide`]) ones.

use crate::fingerprint::Wide;

/// Number of bits in which `a` and `b` differ.
#[inline]
pub fn distance(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

/// Whether `a` and `b` differ in at most `k` bits.
#[inline]
pub fn within(a: u64, b: u64, k: u32) -> bool {
    distance(a, b) <= k
}

/// The 256-bit Hamming distance: the distances of the four lanes added.
#[inline]
pub fn wide_distance(a: &Wide, b: &Wide) -> u32 {
    a.iter().zip(b).map(|(&x, &y)| distance(x, y)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_differing_bits() {
        assert_eq!(distance(0, 0), 0);
        assert_eq!(distance(0, u64::MAX), 64);
        assert_eq!(distance(0b1010, 0b0110), 2);
        assert!(within(0b1010, 0b0110, 2));
        assert!(!within(0b1010, 0b0110, 1));
        assert_eq!(wide_distance(&[0, 1, 3, u64::MAX], &[0, 0, 0, 0]), 67);
    }
}
