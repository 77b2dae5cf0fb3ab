//! The main part of a corpus: per table the sorted keys (48 bits of them once the
//! directory gives the top 16), a bucket directory, and, for the first table, the ids and
//! the positions in id order, bit-packed.

use std::ops::Range;

use crate::hint::prefetch;

/// Key bits a directory must cover before tables drop them from their keys.
pub(super) const IMPLIED: u32 = 16;

/// The low 48 bits of `key`, little-endian.
#[inline]
pub(super) fn low48(key: u64) -> [u8; 6] {
    let b = key.to_le_bytes();
    [b[0], b[1], b[2], b[3], b[4], b[5]]
}

/// The key bits kept by [`low48`].
#[inline(always)]
pub(super) fn from_low48(b: &[u8; 6]) -> u64 {
    u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        | u64::from(u16::from_le_bytes([b[4], b[5]])) << 32
}

/// One table's sorted keys: whole, or without the top 16 bits when the directory gives
/// them.
#[derive(Clone, Debug)]
pub(super) enum Keys {
    Full(Vec<u64>),
    Low(Vec<[u8; 6]>),
}

/// One table of the merged part: permuted fingerprints sorted, and a directory on them.
#[derive(Clone, Debug)]
pub(super) struct Index {
    pub(super) keys: Keys,
    /// `dir[b]..dir[b + 1]` is the run of keys whose top `dir_bits` bits are `b`.
    pub(super) dir: Vec<u32>,
    pub(super) dir_bits: u32,
    /// Bits of the leading blocks: when the directory covers them, a bucket is a run.
    pub(super) lead_bits: u32,
}

impl Index {
    /// The index of `n` sorted keys, the `i`th being `key(i)`.
    pub(super) fn build(n: usize, key: impl Fn(usize) -> u64, lead: u32) -> Index {
        // About one key per bucket, never finer than the leading blocks.
        let dir_bits = (usize::BITS - n.leading_zeros())
            .clamp(1, 24)
            .min(lead.max(1));
        let mut dir = vec![0u32; (1 << dir_bits) + 1];
        for i in 0..n {
            dir[(key(i) >> (64 - dir_bits)) as usize + 1] += 1;
        }
        for b in 1..dir.len() {
            dir[b] += dir[b - 1];
        }
        let keys = if dir_bits >= IMPLIED {
            Keys::Low((0..n).map(|i| low48(key(i))).collect())
        } else {
            Keys::Full((0..n).map(key).collect())
        };
        Index {
            keys,
            dir,
            dir_bits,
            lead_bits: lead,
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        let keys = match &self.keys {
            Keys::Full(v) => v.capacity() * 8,
            Keys::Low(v) => v.capacity() * 6,
        };
        keys + self.dir.capacity() * 4
    }

    /// The directory bucket of permuted key `q`.
    #[inline]
    pub(super) fn bucket(&self, q: u64) -> usize {
        (q >> (64 - self.dir_bits)) as usize
    }

    /// The top bits of every key in bucket `b` that the stored keys leave out.
    #[inline]
    pub(super) fn high(&self, b: usize) -> u64 {
        match self.keys {
            Keys::Full(_) => 0,
            Keys::Low(_) => (b as u64 >> (self.dir_bits - IMPLIED)) << 48,
        }
    }

    /// The range of keys in bucket `b`, with a prefetch of its first keys: probing every
    /// table's range before scanning any lets their cache misses overlap.
    #[inline]
    pub(super) fn range(&self, b: usize) -> (usize, usize) {
        let (lo, hi) = (self.dir[b] as usize, self.dir[b + 1] as usize);
        match &self.keys {
            Keys::Full(v) => v.get(lo).map(prefetch),
            Keys::Low(v) => v.get(lo).map(prefetch),
        };
        (lo, hi)
    }

    /// Calls `f(diff, position)` for every key of bucket `b` (whose range is `lo..hi`)
    /// that agrees with permuted query `q` under `mask` and is within `k` bits of it,
    /// `diff` being their XOR.
    #[inline]
    pub(super) fn run(
        &self,
        q: u64,
        mask: u64,
        k: u32,
        b: usize,
        (lo, hi): (usize, usize),
        mut f: impl FnMut(u64, usize),
    ) {
        // When the bucket is exactly the run of the query's leading blocks, no key needs
        // the mask; otherwise (a small corpus) the run is a sorted stretch of the bucket.
        let exact = self.dir_bits >= self.lead_bits;
        match &self.keys {
            Keys::Full(v) => scan(&v[lo..hi], lo, |&x| x, q, mask, k, exact, &mut f),
            Keys::Low(v) => {
                let high = self.high(b);
                scan(
                    &v[lo..hi],
                    lo,
                    |x| high | from_low48(x),
                    q,
                    mask,
                    k,
                    exact,
                    &mut f,
                );
            }
        }
    }

    /// The positions holding exactly `key`.
    pub(super) fn exact(&self, key: u64) -> Range<usize> {
        let b = self.bucket(key);
        let (lo, hi) = (self.dir[b] as usize, self.dir[b + 1] as usize);
        let high = self.high(b);
        let find = |at: &dyn Fn(usize) -> u64| {
            let (mut l, mut h) = (lo, hi);
            while l < h {
                let mid = (l + h) / 2;
                if at(mid) < key {
                    l = mid + 1;
                } else {
                    h = mid;
                }
            }
            let mut end = l;
            while end < hi && at(end) == key {
                end += 1;
            }
            l..end
        };
        match &self.keys {
            Keys::Full(v) => find(&|i| v[i]),
            Keys::Low(v) => find(&|i| high | from_low48(&v[i])),
        }
    }

    /// The key at `position`.
    pub(super) fn key(&self, position: usize) -> u64 {
        match &self.keys {
            Keys::Full(v) => v[position],
            Keys::Low(v) => {
                let b = self.dir.partition_point(|&d| d as usize <= position) - 1;
                self.high(b) | from_low48(&v[position])
            }
        }
    }

    /// Calls `f(position, key)` for every key, in order.
    pub(super) fn for_each(&self, mut f: impl FnMut(usize, u64)) {
        match &self.keys {
            Keys::Full(v) => v.iter().enumerate().for_each(|(i, &k)| f(i, k)),
            Keys::Low(v) => {
                for b in 0..self.dir.len() - 1 {
                    let high = self.high(b);
                    let (lo, hi) = (self.dir[b] as usize, self.dir[b + 1] as usize);
                    for (i, x) in v[lo..hi].iter().enumerate() {
                        f(lo + i, high | from_low48(x));
                    }
                }
            }
        }
    }
}

/// Calls `f(diff, lo + i)` for every `keys[i]` (read through `key`) that agrees with `q`
/// under `mask` (known to hold throughout when `exact`) and is within `k` bits of it.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn scan<K>(
    keys: &[K],
    lo: usize,
    key: impl Fn(&K) -> u64,
    q: u64,
    mask: u64,
    k: u32,
    exact: bool,
    f: &mut impl FnMut(u64, usize),
) {
    if exact {
        for (i, x) in keys.iter().enumerate() {
            let diff = key(x) ^ q;
            if diff.count_ones() <= k {
                f(diff, lo + i);
            }
        }
    } else {
        let lead = q & mask;
        let start = keys.partition_point(|x| key(x) & mask < lead);
        for (i, x) in keys.iter().enumerate().skip(start) {
            let key = key(x);
            if key & mask != lead {
                break;
            }
            let diff = key ^ q;
            if diff.count_ones() <= k {
                f(diff, lo + i);
            }
        }
    }
}

/// Unsigned integers packed end to end at the width of the largest: ids and positions
/// take the bits they need (20 for a million), not 32 or 64.
#[derive(Debug, Default)]
pub(super) struct Packed {
    pub(super) bits: u32,
    pub(super) len: usize,
    /// One word more than the values need, so a read may always take two.
    pub(super) words: Vec<u64>,
}

impl Packed {
    /// `len` values `value(i)`, none above `max`, without a vector of them first.
    pub(super) fn from_fn(len: usize, max: u64, value: impl Fn(usize) -> u64) -> Packed {
        Packed::collect(max, len, (0..len).map(value))
    }

    /// The values of `values`, none above `max`, packed as they come (about `hint` of
    /// them): a part can be built from a merge without a vector of its entries first.
    pub(super) fn collect(max: u64, hint: usize, values: impl IntoIterator<Item = u64>) -> Packed {
        let mut out = PackedBuilder::new(max, hint);
        for v in values {
            out.push(v);
        }
        out.finish()
    }

    /// A builder of values none above `max`, about `hint` of them, pushed one by one.
    pub(super) fn builder(max: u64, hint: usize) -> PackedBuilder {
        PackedBuilder::new(max, hint)
    }

    pub(super) fn new(values: &[u64]) -> Packed {
        let max = values.iter().copied().max().unwrap_or(0);
        Packed::from_fn(values.len(), max, |i| values[i])
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> u64 {
        debug_assert!(i < self.len);
        let at = i * self.bits as usize;
        let (w, o) = (at / 64, (at % 64) as u32);
        let mut v = self.words[w] >> o;
        if o + self.bits > 64 {
            v |= self.words[w + 1] << (64 - o);
        }
        if self.bits == 64 {
            v
        } else {
            v & ((1 << self.bits) - 1)
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.words.capacity() * 8
    }
}

/// [`Packed`] being filled, value by value.
pub(super) struct PackedBuilder {
    bits: u32,
    words: Vec<u64>,
    /// The word being filled, and its bits used.
    word: u64,
    used: u32,
    len: usize,
}

impl PackedBuilder {
    fn new(max: u64, hint: usize) -> PackedBuilder {
        let bits = (u64::BITS - max.leading_zeros()).max(1);
        PackedBuilder {
            bits,
            words: Vec::with_capacity((hint * bits as usize).div_ceil(64) + 1),
            word: 0,
            used: 0,
            len: 0,
        }
    }

    /// Appends `v` (at most the builder's `max`).
    #[inline]
    pub(super) fn push(&mut self, v: u64) {
        debug_assert!(self.bits == 64 || v >> self.bits == 0);
        self.word |= v << self.used;
        self.used += self.bits;
        if self.used >= 64 {
            self.words.push(self.word);
            self.used -= 64;
            // The high bits of `v` that did not fit start the next word.
            self.word = if self.used == 0 {
                0
            } else {
                v >> (self.bits - self.used)
            };
        }
        self.len += 1;
    }

    pub(super) fn finish(mut self) -> Packed {
        self.words.push(self.word);
        self.words
            .resize((self.len * self.bits as usize).div_ceil(64) + 1, 0);
        Packed {
            bits: self.bits,
            len: self.len,
            words: self.words,
        }
    }
}

/// The merged part of a snapshot. A slot here is a position in the first table, which
/// alone keeps ids; `by_id` lists the positions in id order.
#[derive(Debug)]
pub(super) struct Main {
    pub(super) indexes: Vec<Index>,
    pub(super) ids: Packed,
    pub(super) by_id: Packed,
}

impl Main {
    pub(super) fn len(&self) -> usize {
        self.ids.len
    }

    /// The position of `id`, if it was merged (it may since have been removed).
    pub(super) fn position(&self, id: u64) -> Option<u32> {
        let id_at = |i: usize| self.ids.get(self.by_id.get(i) as usize);
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if id_at(mid) < id {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo < self.len() && id_at(lo) == id).then(|| self.by_id.get(lo) as u32)
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.indexes.iter().map(Index::heap_bytes).sum::<usize>()
            + self.ids.heap_bytes()
            + self.by_id.heap_bytes()
    }
}

impl super::engine::MainPart for Main {
    fn len(&self) -> usize {
        Main::len(self)
    }

    #[inline]
    fn id(&self, slot: usize) -> u64 {
        self.ids.get(slot)
    }

    fn position(&self, id: u64) -> Option<u32> {
        Main::position(self, id)
    }

    fn heap_bytes(&self) -> usize {
        Main::heap_bytes(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_values_read_back_at_every_width() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for bits in 1..=64u32 {
            let mask = if bits == 64 {
                u64::MAX
            } else {
                (1 << bits) - 1
            };
            let values: Vec<u64> = (0..200)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // The widest value first, so the width is exactly `bits`.
                    if i == 0 {
                        mask
                    } else {
                        x & mask
                    }
                })
                .collect();
            let packed = Packed::new(&values);
            assert_eq!(packed.bits, bits);
            // The layout snapshots hold: one spare word after the values.
            assert_eq!(packed.words.len(), (200 * bits as usize).div_ceil(64) + 1);
            for len in [0, 1, 63, 64, 65] {
                let some = Packed::collect(mask, 0, values[..len].iter().copied());
                assert_eq!(some.words.len(), (len * bits as usize).div_ceil(64) + 1);
                assert!(
                    (0..len).all(|i| some.get(i) == values[i]),
                    "{bits} bits, {len}"
                );
            }
            let back: Vec<u64> = (0..values.len()).map(|i| packed.get(i)).collect();
            assert_eq!(back, values, "{bits} bits");
        }
    }
}
