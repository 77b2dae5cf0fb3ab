//! splitmix64, the one random source of generated workloads: reproducible from a seed
//! everywhere, and the generator of the peer harness (its gen_data.py), so that workloads
//! made here are the ones it makes.

/// splitmix64's increment.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The first number of splitmix64's stream seeded with `z`.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// splitmix64 state.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next number of the stream.
    pub fn next_u64(&mut self) -> u64 {
        let z = mix(self.0);
        self.0 = self.0.wrapping_add(GOLDEN);
        z
    }

    /// A number below `m`, as gen_data.py's `below`: `(next · m) >> 64`.
    pub fn below(&mut self, m: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(m)) >> 64) as u64
    }

    /// An index below `n`.
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// `k` distinct integers of `lo..hi` by a partial Fisher-Yates shuffle.
    pub fn sample(&mut self, lo: usize, hi: usize, k: usize) -> Vec<usize> {
        let mut pool: Vec<usize> = (lo..hi).collect();
        for i in 0..k {
            let j = i + self.index(pool.len() - i);
            pool.swap(i, j);
        }
        pool.truncate(k);
        pool
    }

    /// `v` with `d` distinct random bits flipped.
    pub fn flip(&mut self, mut v: u64, d: usize) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// splitmix64's published first outputs from seed 0.
    #[test]
    fn the_stream_is_splitmix64() {
        let mut rng = SplitMix64(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(mix(0), 0xE220_A839_7B1D_CDAF);
    }
}
