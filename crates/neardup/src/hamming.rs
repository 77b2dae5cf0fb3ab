//! Hamming distance between 64-bit fingerprints.

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
    }
}
