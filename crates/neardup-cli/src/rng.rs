//! splitmix64: the deterministic generator of the peer harness (its gen_data.py), so that
//! workloads made here are the ones it makes.

/// splitmix64 state.
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `m`, as gen_data.py's `below`: `(next · m) >> 64`.
    pub(crate) fn below(&mut self, m: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(m)) >> 64) as u64
    }

    /// An index below `n`.
    pub(crate) fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// One of `items`.
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// `k` distinct integers of `lo..hi` by a partial Fisher-Yates shuffle.
    pub(crate) fn sample(&mut self, lo: usize, hi: usize, k: usize) -> Vec<usize> {
        let mut pool: Vec<usize> = (lo..hi).collect();
        for i in 0..k {
            let j = i + self.index(pool.len() - i);
            pool.swap(i, j);
        }
        pool.truncate(k);
        pool
    }

    /// `v` with `d` distinct random bits flipped.
    pub(crate) fn flip(&mut self, mut v: u64, d: usize) -> u64 {
        let mut bits = Vec::with_capacity(d);
        while bits.len() < d {
            let b = self.below(64);
            if !bits.contains(&b) {
                bits.push(b);
            }
        }
        for b in bits {
            v ^= 1 << b;
        }
        v
    }
}
