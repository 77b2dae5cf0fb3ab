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

/// Buckets per [`Group`] of a packed directory.
const GROUP: usize = 11;

/// Eleven buckets of a packed directory in 16 bytes: where the first starts, then where
/// each bucket starts and the last one ends, less that.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(16))]
pub(super) struct Group {
    base: u32,
    /// `offsets[0]` is 0; bucket `i` of the group is `offsets[i]..offsets[i + 1]`.
    offsets: [u8; GROUP + 1],
}

/// Where each bucket's run of keys starts. A query reads one bucket of every table, and
/// the keys it then scans push other lines out of the cache: at 4 bytes a bucket, a
/// million keys' directories (a megabyte) missed the cache on most queries, one memory
/// latency before the keys could even be asked for. Packed at 16 bytes per eleven
/// buckets, they take about a third of that and stay in the core's cache.
#[derive(Clone, Debug)]
pub(super) enum Dir {
    /// `starts[b]..starts[b + 1]` is bucket `b`.
    Wide(Vec<u32>),
    /// Used when every group holds at most 255 keys (up to about 15 a bucket).
    Packed(Vec<Group>),
}

impl Dir {
    /// The directory of buckets `starts[b]..starts[b + 1]`.
    fn new(starts: Vec<u32>) -> Dir {
        let buckets = starts.len() - 1;
        let end = *starts.last().unwrap_or(&0);
        let start = |b: usize| starts.get(b).copied().unwrap_or(end);
        let fits = (0..buckets)
            .step_by(GROUP)
            .all(|b| start(b + GROUP) - start(b) <= u32::from(u8::MAX));
        if !fits {
            return Dir::Wide(starts);
        }
        Dir::Packed(
            (0..buckets)
                .step_by(GROUP)
                .map(|b| Group {
                    base: start(b),
                    offsets: std::array::from_fn(|i| (start(b + i) - start(b)) as u8),
                })
                .collect(),
        )
    }

    /// The run of bucket `b`.
    #[inline(always)]
    pub(super) fn bounds(&self, b: usize) -> (usize, usize) {
        match self {
            Dir::Wide(v) => (v[b] as usize, v[b + 1] as usize),
            Dir::Packed(v) => {
                let g = &v[b / GROUP];
                let i = b % GROUP;
                let base = g.base as usize;
                (
                    base + usize::from(g.offsets[i]),
                    base + usize::from(g.offsets[i + 1]),
                )
            }
        }
    }

    /// Asks for the cache line holding bucket `b`.
    #[inline(always)]
    pub(super) fn prefetch(&self, b: usize) {
        match self {
            Dir::Wide(v) => prefetch(&v[b]),
            Dir::Packed(v) => prefetch(&v[b / GROUP]),
        }
    }

    /// The bucket holding position `position` (below the number of keys): the last
    /// non-empty bucket that starts at or before it.
    fn bucket_of(&self, position: usize) -> usize {
        match self {
            Dir::Wide(v) => v.partition_point(|&d| d as usize <= position) - 1,
            Dir::Packed(v) => {
                let g = v.partition_point(|g| g.base as usize <= position) - 1;
                let base = v[g].base as usize;
                let i = v[g].offsets[1..].partition_point(|&o| base + usize::from(o) <= position);
                g * GROUP + i
            }
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Dir::Wide(v) => v.capacity() * 4,
            Dir::Packed(v) => v.capacity() * std::mem::size_of::<Group>(),
        }
    }
}

/// One table of the merged part: permuted fingerprints sorted, and a directory on them.
#[derive(Clone, Debug)]
pub(super) struct Index {
    pub(super) keys: Keys,
    /// The run of keys whose top `dir_bits` bits are `b`, for every `b`.
    pub(super) dir: Dir,
    /// Buckets in the directory.
    pub(super) buckets: usize,
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
            buckets: dir.len() - 1,
            dir: Dir::new(dir),
            dir_bits,
            lead_bits: lead,
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        let keys = match &self.keys {
            Keys::Full(v) => v.capacity() * 8,
            Keys::Low(v) => v.capacity() * 6,
        };
        keys + self.dir.heap_bytes()
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

    /// The range of keys in bucket `b`, with a prefetch of every cache line they take
    /// (of the first few, for a long run, which the hardware's prefetcher follows):
    /// probing every table's range before scanning any lets their cache misses overlap.
    #[inline]
    pub(super) fn range(&self, b: usize) -> (usize, usize) {
        let (lo, hi) = self.dir.bounds(b);
        match &self.keys {
            Keys::Full(v) => prefetch_run(&v[lo..hi]),
            Keys::Low(v) => prefetch_run(&v[lo..hi]),
        }
        (lo, hi)
    }

    /// Calls `f(diff, position)` for every key of bucket `b` (whose range is `lo..hi`)
    /// that agrees with permuted query `q` under `mask` and is within `k` bits of it,
    /// `diff` being their XOR. `wide`: the AVX-512 kernel may run (see [`Wide`]).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run(
        &self,
        q: u64,
        mask: u64,
        k: u32,
        b: usize,
        (lo, hi): (usize, usize),
        wide: Wide,
        mut f: impl FnMut(u64, usize),
    ) {
        // When the bucket is exactly the run of the query's leading blocks, no key needs
        // the mask; otherwise (a small corpus) the run is a sorted stretch of the bucket.
        let exact = self.dir_bits >= self.lead_bits;
        match &self.keys {
            Keys::Full(v) => scan(&v[lo..hi], lo, |&x| x, q, mask, k, exact, &mut f),
            Keys::Low(v) => {
                let high = self.high(b);
                if exact {
                    scan_low48(&v[lo..hi], lo, high, q, k, wide, &mut f);
                } else {
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
    }

    /// The positions holding exactly `key`.
    pub(super) fn exact(&self, key: u64) -> Range<usize> {
        let b = self.bucket(key);
        self.exact_in(key, b, self.dir.bounds(b))
    }

    /// The positions holding exactly `key`, whose bucket `b` has the range `lo..hi`.
    pub(super) fn exact_in(&self, key: u64, b: usize, (lo, hi): (usize, usize)) -> Range<usize> {
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
            Keys::Low(v) => self.high(self.dir.bucket_of(position)) | from_low48(&v[position]),
        }
    }

    /// Calls `f(position, key)` for every key, in order.
    pub(super) fn for_each(&self, mut f: impl FnMut(usize, u64)) {
        match &self.keys {
            Keys::Full(v) => v.iter().enumerate().for_each(|(i, &k)| f(i, k)),
            Keys::Low(v) => {
                for b in 0..self.buckets {
                    let high = self.high(b);
                    let (lo, hi) = self.dir.bounds(b);
                    for (i, x) in v[lo..hi].iter().enumerate() {
                        f(lo + i, high | from_low48(x));
                    }
                }
            }
        }
    }
}

/// Asks for every cache line of `run`. The usual run (a bucket of a million keys' table:
/// about 15 keys, 90 bytes) takes two or three lines: its first, the next and its last
/// are asked for without a loop, whose varying count the branch predictor would miss.
#[inline(always)]
fn prefetch_run<T>(run: &[T]) {
    let bytes = std::mem::size_of_val(run);
    if bytes == 0 {
        return;
    }
    let first = run.as_ptr().cast::<u8>();
    // In bounds: offsets below `bytes`.
    prefetch_ptr(first);
    prefetch_ptr(first.wrapping_add(64.min(bytes - 1)));
    prefetch_ptr(first.wrapping_add(bytes - 1));
    // A long run (a large corpus): its first 512 bytes, the hardware's prefetcher
    // follows the rest.
    let mut at = 128;
    while at < bytes.min(512) {
        prefetch_ptr(first.wrapping_add(at));
        at += 64;
    }
}

/// Asks for the cache line holding the byte at `p` (a hint: never faults).
#[inline(always)]
fn prefetch_ptr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch changes no state visible to the program and never faults.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Whether the AVX-512 kernel of [`scan_low48`] may run: the CPU (at the level allowed
/// on this thread) has AVX-512F and BW, and the distance is small enough for it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Wide(bool);

impl Wide {
    /// Up to this distance the kernel clears one bit per round, `k` rounds.
    const MAX_K: u32 = 8;

    /// Whether the kernel may run for distance `k` on this thread now.
    pub(super) fn for_distance(k: u32) -> Wide {
        Wide(k <= Wide::MAX_K && crate::arch::features().avx512bw())
    }
}

/// Calls `f(diff, lo + i)` for every `keys[i]`, the low 48 bits of a key whose top bits
/// are `high` and equal those of `q` (a bucket that is exactly the query's run), within
/// `k` bits of `q`.
#[inline(always)]
pub(super) fn scan_low48(
    keys: &[[u8; 6]],
    lo: usize,
    high: u64,
    q: u64,
    k: u32,
    wide: Wide,
    f: &mut impl FnMut(u64, usize),
) {
    #[cfg(target_arch = "x86_64")]
    if wide.0 && keys.len() >= 4 {
        // SAFETY: `Wide` is true only where the CPU has AVX-512F and BW.
        unsafe { scan_low48_avx512(keys, lo, high, q, k, f) };
        return;
    }
    let _ = wide;
    for (i, x) in keys.iter().enumerate() {
        let diff = (high | from_low48(x)) ^ q;
        if diff.count_ones() <= k {
            f(diff, lo + i);
        }
    }
}

/// [`scan_low48`] eight keys at a time: 48 bytes loaded under a mask (never past the
/// run), each key's six bytes spread to a 64-bit lane (a dword permute puts each pair of
/// keys in its 128-bit lane, a byte shuffle splits them), XORed with the query, and `k`
/// rounds of `x & (x - 1)` leave zero exactly in the lanes within `k` bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn scan_low48_avx512(
    keys: &[[u8; 6]],
    lo: usize,
    high: u64,
    q: u64,
    k: u32,
    f: &mut impl FnMut(u64, usize),
) {
    use std::arch::x86_64::*;

    debug_assert!(k <= Wide::MAX_K);
    let n = keys.len();
    let base = keys.as_ptr().cast::<u8>();
    // Lane j (bytes 16j..16j+16) gets bytes 12j..12j+12 of the loaded keys: two keys.
    let spread = _mm512_setr_epi32(0, 1, 2, 2, 3, 4, 5, 5, 6, 7, 8, 8, 9, 10, 11, 11);
    // In each lane, key 0's bytes to the first quadword, key 1's to the second; the top
    // two bytes of each are zero (index with the high bit set).
    let split = _mm512_broadcast_i32x4(_mm_setr_epi8(
        0, 1, 2, 3, 4, 5, -128, -128, 6, 7, 8, 9, 10, 11, -128, -128,
    ));
    let query = _mm512_set1_epi64((q & 0xffff_ffff_ffff) as i64);
    let one = _mm512_set1_epi64(1);
    // Eight keys from key `i` on (fewer at the end of the run, none past it): the lanes
    // within `k`.
    macro_rules! hits {
        ($i:expr) => {{
            let m = n.saturating_sub($i).min(8);
            // SAFETY: the mask covers the 6·m bytes of keys i..i+m, all inside `keys`;
            // masked-off bytes are not read, so with m = 0 nothing is.
            let v =
                _mm512_maskz_loadu_epi8((1u64 << (6 * m)) - 1, base.wrapping_add(6 * $i).cast());
            let v = _mm512_shuffle_epi8(_mm512_permutexvar_epi32(spread, v), split);
            let mut x = _mm512_xor_si512(v, query);
            for _ in 0..k {
                x = _mm512_and_si512(x, _mm512_sub_epi64(x, one));
            }
            let lanes = ((1u32 << m) - 1) as __mmask8;
            _mm512_mask_cmpeq_epi64_mask(lanes, x, _mm512_setzero_si512())
        }};
    }
    let mut report = |i: usize, mut hits: u8| {
        while hits != 0 {
            let j = i + hits.trailing_zeros() as usize;
            hits &= hits - 1;
            f((high | from_low48(&keys[j])) ^ q, lo + j);
        }
    };
    // The usual run fits in two rounds: both taken whatever its length, so that the
    // loop's end is no branch to mispredict.
    let (a, b) = (hits!(0), hits!(8));
    if a | b != 0 {
        report(0, a);
        report(8, b);
    }
    let mut i = 16;
    while i < n {
        let h = hits!(i);
        if h != 0 {
            report(i, h);
        }
        i += 8;
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

    /// Asks for the cache line holding value `i` (below `len`).
    #[inline(always)]
    pub(super) fn prefetch(&self, i: usize) {
        prefetch(&self.words[i * self.bits as usize / 64]);
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.words.capacity() * 8
    }

    /// Asks for the cache line holding value `i` (the first of its words).
    #[inline(always)]
    pub(super) fn prefetch_at(&self, i: usize) {
        if let Some(w) = self.words.get(i * self.bits as usize / 64) {
            prefetch(w);
        }
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

    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// A packed directory gives the runs the bucket starts give, and the bucket of every
    /// position; a group of more than 255 keys keeps the wide form.
    #[test]
    fn packed_directories_agree_with_their_starts() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for (buckets, max, packed) in [
            (1, 5, true),
            (7, 3, true),
            (1000, 23, true),
            (1000, 60, false),
        ] {
            let mut starts = vec![0u32];
            for b in 0..buckets {
                // Runs of empty buckets too.
                let n = if b % 5 == 1 { 0 } else { (next() % max) as u32 };
                starts.push(starts.last().unwrap() + n);
            }
            let dir = Dir::new(starts.clone());
            assert_eq!(
                matches!(dir, Dir::Packed(_)),
                packed,
                "{buckets} buckets, {max}"
            );
            for b in 0..buckets {
                let want = (starts[b] as usize, starts[b + 1] as usize);
                assert_eq!(dir.bounds(b), want, "bucket {b}");
                for p in want.0..want.1 {
                    assert_eq!(dir.bucket_of(p), b, "position {p}");
                }
            }
        }
    }

    /// Every kernel the CPU can run finds exactly the keys within `k` bits, on runs of
    /// every length around the vector width and keys at every distance.
    #[test]
    fn scan_kernels_find_exactly_the_keys_within_k() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for round in 0..3000 {
            let n = round % 41;
            let k = (round / 41) as u32 % 10;
            let q = next();
            let high = q & !0xffff_ffff_ffff;
            let keys: Vec<[u8; 6]> = (0..n)
                .map(|_| {
                    let flips = next() % 6;
                    let mut key = q;
                    for _ in 0..flips {
                        key ^= 1 << (next() % 48);
                    }
                    if next().is_multiple_of(4) {
                        key = next();
                    }
                    low48(key)
                })
                .collect();
            let want: Vec<(u64, usize)> = keys
                .iter()
                .enumerate()
                .map(|(i, x)| ((high | from_low48(x)) ^ q, 100 + i))
                .filter(|(diff, _)| diff.count_ones() <= k)
                .collect();
            for level in crate::arch::levels() {
                let got = crate::arch::with_level(level, || {
                    let mut got = Vec::new();
                    let wide = Wide::for_distance(k);
                    scan_low48(&keys, 100, high, q, k, wide, &mut |d, p| got.push((d, p)));
                    got
                });
                assert_eq!(got, want, "{level}, n {n}, k {k}");
            }
        }
    }

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
