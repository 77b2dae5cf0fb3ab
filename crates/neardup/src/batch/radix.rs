//! Radix partitioning and sorting on the leading bits of a 64-bit key: the hot kernel of
//! batch matching.
//!
//! One pass scatters keys into 2^p buckets by their top `p` bits (in parallel: per-chunk
//! histograms give every chunk its own disjoint write ranges). Each bucket, small enough to
//! stay in cache, is then split further by one counting pass on the bits below while it is
//! still hot: into sub-buckets of a few keys whose pairs are compared directly
//! ([`prefix_pairs`]), or sorted by insertion ([`sort_bucket`], for a full sort). Only the
//! bits that matter are touched: a table with 26 leading bits costs one partition pass and
//! one small in-bucket pass, not eight.

use crate::par;

/// Something sorted by a 64-bit key.
pub(crate) trait Keyed: Copy + Send + Sync {
    fn key(&self) -> u64;
}

impl Keyed for u64 {
    #[inline]
    fn key(&self) -> u64 {
        *self
    }
}

/// Buckets hold about 2^BUCKET_LOG2 keys on average: small enough for L1/L2 during the
/// in-bucket sort and scan.
const BUCKET_LOG2: u32 = 8;
/// At most 2^MAX_PARTITION_BITS buckets, so the scatter's write heads stay in cache.
const MAX_PARTITION_BITS: u32 = 10;
/// Widest digit of an in-bucket counting pass.
const MAX_DIGIT_BITS: u32 = 8;
/// Sub-buckets up to this size are insertion-sorted instead of split further.
const INSERTION_MAX: usize = 16;
/// Keys per chunk of the parallel partition pass.
const CHUNK: usize = 1 << 16;

/// How many leading bits the partition pass splits `n` keys on, when `w` bits matter.
pub(crate) fn partition_bits(n: usize, w: u32) -> u32 {
    let log2 = usize::BITS - n.leading_zeros();
    log2.saturating_sub(BUCKET_LOG2)
        .clamp(1, MAX_PARTITION_BITS)
        .min(w)
        .max(1)
}

/// How many counting passes [`prefix_pairs`] makes over a bucket of `len` random keys with
/// `bits` bits left to split on.
pub(crate) fn msd_passes(len: usize, bits: u32) -> u32 {
    let (mut len, mut bits, mut passes) = (len, bits, 0);
    while bits > 0 && len > PAIRWISE_MAX {
        let digit = bits.min(digit_bits(len));
        len >>= digit;
        bits -= digit;
        passes += 1;
    }
    passes
}

/// Scatters `map(x)` for every `x` of `src` into `dst`, grouped by the top `bits` bits of the
/// mapped key, keeping input order inside a bucket (stable). Returns the 2^bits + 1 bucket
/// bounds.
///
/// With `tmp`, the counting pass keeps the mapped keys there and the scatter pass reads them
/// back, so `map` runs once per key instead of twice (worth it when `map` is a permutation).
pub(crate) fn partition<S, T, F>(
    src: &[S],
    dst: &mut [T],
    tmp: Option<&mut [T]>,
    bits: u32,
    map: F,
) -> Vec<usize>
where
    S: Copy + Sync,
    T: Keyed,
    F: Fn(S) -> T + Sync,
{
    assert_eq!(src.len(), dst.len());
    assert!(
        (1..=16).contains(&bits),
        "partition bits out of range: {bits}"
    );
    let buckets = 1usize << bits;
    let shift = 64 - bits;
    let chunks: Vec<&[S]> = src.chunks(CHUNK).collect();
    let tmps: Vec<Option<&mut [T]>> = match tmp {
        Some(t) => {
            assert_eq!(t.len(), src.len());
            t.chunks_mut(CHUNK).map(Some).collect()
        }
        None => chunks.iter().map(|_| None).collect(),
    };
    let jobs: Vec<(&[S], Option<&mut [T]>)> = chunks.into_iter().zip(tmps).collect();
    let counted: Vec<Counted<'_, S, T>> = par::map(jobs, |(chunk, tmp)| {
        let mut h = vec![0u32; buckets];
        match tmp {
            Some(tmp) => {
                for (t, &x) in tmp.iter_mut().zip(chunk) {
                    let y = map(x);
                    h[(y.key() >> shift) as usize] += 1;
                    *t = y;
                }
                (chunk, Some(tmp), h)
            }
            None => {
                for &x in chunk {
                    h[(map(x).key() >> shift) as usize] += 1;
                }
                (chunk, None, h)
            }
        }
    });
    let mut bounds = Vec::with_capacity(buckets + 1);
    let mut heads = vec![vec![0usize; buckets]; counted.len()];
    let mut pos = 0usize;
    for b in 0..buckets {
        bounds.push(pos);
        for (c, (_, _, h)) in counted.iter().enumerate() {
            heads[c][b] = pos;
            pos += h[b] as usize;
        }
    }
    bounds.push(pos);
    let out = SharedOut(dst.as_mut_ptr());
    let jobs: Vec<_> = counted.into_iter().zip(heads).collect();
    par::map(jobs, |((chunk, tmp, _), mut head)| {
        let out = &out;
        let mut put = |y: T| {
            let b = (y.key() >> shift) as usize;
            // SAFETY: chunk c owns dst[heads[c][b] .. heads[c][b] + hists[c][b]] for every
            // b: the ranges are disjoint across chunks and buckets, lie inside dst (they sum
            // to src.len() == dst.len()), and the chunk writes exactly hists[c][b] keys into
            // bucket b, so every write lands in its own range and no two threads share one.
            unsafe { out.0.add(head[b]).write(y) };
            head[b] += 1;
        };
        match tmp {
            Some(tmp) => tmp.iter().for_each(|&y| put(y)),
            None => chunk.iter().for_each(|&x| put(map(x))),
        }
    });
    bounds
}

/// How many of `map(x)`, for `x` in `src`, fall in each bucket of the top `bits` bits.
pub(crate) fn bucket_counts<S, F>(src: &[S], bits: u32, map: F) -> Vec<usize>
where
    S: Copy + Sync,
    F: Fn(S) -> u64 + Sync,
{
    let shift = 64 - bits;
    let hists = par::map(src.chunks(CHUNK).collect(), |chunk: &[S]| {
        let mut h = vec![0u32; 1 << bits];
        for &x in chunk {
            h[(map(x) >> shift) as usize] += 1;
        }
        h
    });
    let mut total = vec![0usize; 1 << bits];
    for h in hists {
        for (t, c) in total.iter_mut().zip(h) {
            *t += c as usize;
        }
    }
    total
}

/// [`partition`] of the keys whose bucket (top `bits` bits of `map(x)`) lies in
/// `buckets`, and of no others: each bucket holds the same keys in the same order as
/// after a partition of all of them. `dst` must hold them; returns the bounds of the
/// range's buckets (`buckets.len() + 1` of them, from 0). Maps every key twice (count,
/// scatter), keeping nothing per key in between: the pass of an out-of-core table.
pub(crate) fn partition_range<S, F>(
    src: &[S],
    dst: &mut [u64],
    bits: u32,
    buckets: std::ops::Range<usize>,
    map: F,
) -> Vec<usize>
where
    S: Copy + Sync,
    F: Fn(S) -> u64 + Sync,
{
    assert!(
        (1..=16).contains(&bits),
        "partition bits out of range: {bits}"
    );
    let shift = 64 - bits;
    let (first, len) = (buckets.start, buckets.len());
    let slot = |y: u64| ((y >> shift) as usize).wrapping_sub(first);
    let chunks: Vec<&[S]> = src.chunks(CHUNK).collect();
    let hists: Vec<Vec<u32>> = par::map(chunks.clone(), |chunk| {
        let mut h = vec![0u32; len];
        for &x in chunk {
            if let Some(c) = h.get_mut(slot(map(x))) {
                *c += 1;
            }
        }
        h
    });
    let mut bounds = Vec::with_capacity(len + 1);
    let mut heads = vec![vec![0usize; len]; chunks.len()];
    let mut pos = 0usize;
    for b in 0..len {
        bounds.push(pos);
        for (c, h) in hists.iter().enumerate() {
            heads[c][b] = pos;
            pos += h[b] as usize;
        }
    }
    bounds.push(pos);
    assert!(
        pos <= dst.len(),
        "a pass of {pos} keys in room for {}",
        dst.len()
    );
    let out = SharedOut(dst.as_mut_ptr());
    par::map(
        chunks.into_iter().zip(heads).collect(),
        |(chunk, mut head)| {
            let out = &out;
            for &x in chunk {
                let y = map(x);
                if let Some(h) = head.get_mut(slot(y)) {
                    // SAFETY: as in `partition`: chunk c owns dst[heads[c][b] ..
                    // heads[c][b] + hists[c][b]] for each bucket b of the range, disjoint
                    // across chunks and buckets and inside dst (asserted above: they sum to
                    // `pos`), and writes exactly hists[c][b] keys into bucket b, because
                    // `map` gives the same key in both passes.
                    unsafe { out.0.add(*h).write(y) };
                    *h += 1;
                }
            }
        },
    );
    bounds
}

/// A chunk of a partition's input, its mapped keys (if kept) and its histogram.
type Counted<'a, S, T> = (&'a [S], Option<&'a mut [T]>, Vec<u32>);

/// A raw pointer to the partition output, shared by the chunks that each write their own
/// disjoint ranges of it.
struct SharedOut<T>(*mut T);
// SAFETY: see `partition`: threads write disjoint ranges, and the buffer outlives them.
unsafe impl<T: Send> Sync for SharedOut<T> {}

/// Sorts `keys` on bits `[lo, hi)` of their key, given they agree on every bit at or above
/// `hi`. Stable. `scratch` is as long as `keys`.
///
/// MSD: one counting pass on the top digit spreads a cache-sized bucket into sub-buckets
/// of about four keys, which insertion sort finishes; only a large sub-bucket recurses. On
/// random keys that is one pass whatever the width, where LSD would make one per digit.
pub(crate) fn sort_bucket<T: Keyed>(keys: &mut [T], scratch: &mut [T], lo: u32, hi: u32) {
    let bits = hi.saturating_sub(lo);
    if bits == 0 || keys.len() < 2 {
        return;
    }
    if keys.len() <= INSERTION_MAX {
        insertion_sort(keys, lo);
        return;
    }
    let digit = bits.min(digit_bits(keys.len()));
    let shift = hi - digit;
    let ends = spread(keys, scratch, shift, digit);
    keys.copy_from_slice(scratch);
    let mut start = 0;
    for &end in &ends[..1 << digit] {
        let end = end as usize;
        match end - start {
            0 | 1 => {}
            len if len <= INSERTION_MAX => insertion_sort(&mut keys[start..end], lo),
            _ => sort_bucket(&mut keys[start..end], &mut scratch[start..end], lo, shift),
        }
        start = end;
    }
}

/// Sub-buckets up to this size are compared pair by pair instead of split further.
const PAIRWISE_MAX: usize = 12;

/// Calls `visit(a, b)` for every pair of `keys` that agree on bits `[lo, 64)`, given they
/// all agree on bits `[hi, 64)`. Reorders `keys`; `scratch` is as long as `keys`.
///
/// The batch engine needs runs of equal leading bits, not sorted order. So instead of
/// sorting and scanning, one counting pass splits the bucket on its top digit into
/// sub-buckets of about four keys, and each sub-bucket compares its pairs directly: a
/// prefix test that is almost never true, hence almost never mispredicted, where insertion
/// sort mispredicts at every key. Only an unusually large sub-bucket splits again; one
/// with no bits left to split on is a true run, all of whose pairs are candidates.
pub(crate) fn prefix_pairs(
    keys: &mut [u64],
    scratch: &mut [u64],
    lo: u32,
    hi: u32,
    visit: &mut impl FnMut(u64, u64),
) {
    let bits = hi.saturating_sub(lo);
    if keys.len() < 2 {
        return;
    }
    if bits == 0 {
        for (i, &a) in keys.iter().enumerate() {
            for &b in &keys[i + 1..] {
                visit(a, b);
            }
        }
        return;
    }
    if keys.len() <= PAIRWISE_MAX {
        for (i, &a) in keys.iter().enumerate() {
            for &b in &keys[i + 1..] {
                if (a ^ b) >> lo == 0 {
                    visit(a, b);
                }
            }
        }
        return;
    }
    let digit = bits.min(digit_bits(keys.len()));
    let shift = hi - digit;
    // The sub-buckets now lie in scratch.
    let ends = spread(keys, scratch, shift, digit);
    let mut start = 0;
    for &end in &ends[..1 << digit] {
        let end = end as usize;
        if end - start >= 2 {
            prefix_pairs(
                &mut scratch[start..end],
                &mut keys[start..end],
                lo,
                shift,
                visit,
            );
        }
        start = end;
    }
}

/// One counting pass: copies `keys` into `out` grouped (stably) by the `digit` bits at
/// `shift`, and returns where each group ends (the first 2^digit entries count).
#[inline(always)]
fn spread<T: Keyed>(
    keys: &[T],
    out: &mut [T],
    shift: u32,
    digit: u32,
) -> [u32; 1 << MAX_DIGIT_BITS] {
    let mask = (1u64 << digit) - 1;
    let mut heads = [0u32; 1 << MAX_DIGIT_BITS];
    for x in keys {
        heads[((x.key() >> shift) & mask) as usize] += 1;
    }
    let mut sum = 0u32;
    for h in heads.iter_mut().take(1 << digit) {
        let count = *h;
        *h = sum;
        sum += count;
    }
    for &x in keys {
        let d = ((x.key() >> shift) & mask) as usize;
        out[heads[d] as usize] = x;
        heads[d] += 1;
    }
    heads
}

/// Digit width that splits `len` random keys into sub-buckets of about four.
fn digit_bits(len: usize) -> u32 {
    let log2 = usize::BITS - 1 - len.leading_zeros();
    log2.saturating_sub(2).clamp(1, MAX_DIGIT_BITS)
}

fn insertion_sort<T: Keyed>(keys: &mut [T], lo: u32) {
    for i in 1..keys.len() {
        let x = keys[i];
        let kx = x.key() >> lo;
        let mut j = i;
        while j > 0 && keys[j - 1].key() >> lo > kx {
            keys[j] = keys[j - 1];
            j -= 1;
        }
        keys[j] = x;
    }
}

/// Sorts `keys` on their whole 64-bit key: partition into `scratch`, sort each bucket.
/// Stable. On return the sorted keys are in `keys`.
pub(crate) fn sort<T: Keyed>(keys: &mut [T], scratch: &mut [T]) {
    sort_into(keys, scratch);
    keys.copy_from_slice(scratch);
}

/// [`sort`] without its last copy: the sorted keys are left in `scratch` (as long as
/// `keys`), and `keys` holds no particular order, for callers that can take `scratch` as
/// the result (a million fingerprints are 8 MB not copied).
pub(crate) fn sort_into<T: Keyed>(keys: &mut [T], scratch: &mut [T]) {
    let bits = partition_bits(keys.len(), 64);
    let bounds = partition(keys, scratch, None, bits, |x| x);
    let lo = 0;
    let hi = 64 - bits;
    // The buckets now live in `scratch`; sort each there (with `keys` as its scratch).
    for_each_task(scratch, keys, &bounds, |task| {
        for (keys, scratch) in task.buckets() {
            sort_bucket(keys, scratch, lo, hi);
        }
    });
}

/// Sorts the keys of `src` into `dst` (as long): one partition pass from `src`, then each
/// bucket sorted in place with a scratch of its own size. `src` is only read, so a mapped
/// file sorts into one array, not two (the whole-set [`sort_into`] uses its input as the
/// scratch).
pub(crate) fn sort_from(src: &[u64], dst: &mut [u64]) {
    let bits = partition_bits(src.len(), 64);
    let bounds = partition(src, dst, None, bits, |x| x);
    let hi = 64 - bits;
    let mut groups = Vec::new();
    let mut rest = dst;
    let mut b = 0;
    let last = bounds.len() - 1;
    while b < last {
        let start = bounds[b];
        let mut e = b + 1;
        while e < last && bounds[e + 1] - start <= TASK_KEYS {
            e += 1;
        }
        let (group, tail) = std::mem::take(&mut rest).split_at_mut(bounds[e] - start);
        rest = tail;
        groups.push((
            group,
            bounds[b..=e].iter().map(|x| x - start).collect::<Vec<_>>(),
        ));
        b = e;
    }
    par::map(groups, |(group, bounds)| {
        let largest = bounds.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        let mut scratch = vec![0u64; largest];
        for w in bounds.windows(2) {
            let len = w[1] - w[0];
            sort_bucket(&mut group[w[0]..w[1]], &mut scratch[..len], 0, hi);
        }
    });
}

/// Consecutive buckets handed to one thread, with their scratch.
pub(crate) struct Task<'a, T> {
    keys: &'a mut [T],
    scratch: &'a mut [T],
    /// Bucket bounds relative to the start of `keys`.
    bounds: Vec<usize>,
}

impl<T> Task<'_, T> {
    /// Each bucket and its scratch, in order.
    pub(crate) fn buckets(&mut self) -> impl Iterator<Item = (&mut [T], &mut [T])> {
        let mut keys = &mut *self.keys;
        let mut scratch = &mut *self.scratch;
        self.bounds.windows(2).map(move |w| {
            let len = w[1] - w[0];
            let (k, rest) = std::mem::take(&mut keys).split_at_mut(len);
            let (s, rest_s) = std::mem::take(&mut scratch).split_at_mut(len);
            keys = rest;
            scratch = rest_s;
            (k, s)
        })
    }
}

/// Keys per task: enough work to be worth a thread, few enough that results of a wave of
/// tasks stay small.
const TASK_KEYS: usize = 1 << 16;

/// Splits the buckets into tasks of consecutive buckets.
fn tasks<'a, T>(keys: &'a mut [T], scratch: &'a mut [T], bounds: &[usize]) -> Vec<Task<'a, T>> {
    let mut out = Vec::new();
    let (mut keys, mut scratch) = (keys, scratch);
    let mut b = 0;
    let last = bounds.len() - 1;
    while b < last {
        let start = bounds[b];
        let mut e = b + 1;
        while e < last && bounds[e + 1] - start <= TASK_KEYS {
            e += 1;
        }
        let len = bounds[e] - start;
        let (k, rest) = keys.split_at_mut(len);
        let (s, rest_s) = scratch.split_at_mut(len);
        keys = rest;
        scratch = rest_s;
        out.push(Task {
            keys: k,
            scratch: s,
            bounds: bounds[b..=e].iter().map(|x| x - start).collect(),
        });
        b = e;
    }
    out
}

/// Runs `work` on every task of buckets, in parallel, discarding results.
pub(crate) fn for_each_task<T, F>(keys: &mut [T], scratch: &mut [T], bounds: &[usize], work: F)
where
    T: Send,
    F: Fn(&mut Task<'_, T>) + Sync,
{
    par::map(tasks(keys, scratch, bounds), |mut t| work(&mut t));
}

/// Runs `work` on every task of buckets, in parallel, and hands the results to `sink` in
/// bucket order. Tasks run in waves, so at most a few tasks' results wait for the sink.
pub(crate) fn map_tasks<T, R, E, F>(
    keys: &mut [T],
    scratch: &mut [T],
    bounds: &[usize],
    work: F,
    mut sink: impl FnMut(R) -> Result<(), E>,
) -> Result<(), E>
where
    T: Send,
    R: Send,
    F: Fn(&mut Task<'_, T>) -> R + Sync,
{
    let mut all = tasks(keys, scratch, bounds);
    let wave = par::threads() * 4;
    while !all.is_empty() {
        let rest = all.split_off(wave.min(all.len()));
        for r in par::map(all, |mut t| work(&mut t)) {
            sink(r)?;
        }
        all = rest;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn prefix_pairs_are_the_pairs_sharing_the_prefix(
            v in proptest::collection::vec(any::<u64>(), 0..600),
            low in proptest::collection::vec(0u64..64, 0..300),
            w in 1u32..=64,
        ) {
            // Keys sharing their top bits, some sharing many more (low values).
            let mut keys: Vec<u64> = v.iter().map(|x| x >> 3).chain(low).collect();
            let mut expected = Vec::new();
            let lo = 64 - w;
            for i in 0..keys.len() {
                for j in i + 1..keys.len() {
                    if (keys[i] ^ keys[j]) >> lo == 0 {
                        let (a, b) = (keys[i].min(keys[j]), keys[i].max(keys[j]));
                        expected.push((a, b));
                    }
                }
            }
            expected.sort_unstable();
            let mut scratch = vec![0; keys.len()];
            let mut got = Vec::new();
            // All keys agree on their top 3 bits (zero).
            prefix_pairs(&mut keys, &mut scratch, lo, 61.max(lo), &mut |a, b| got.push((a.min(b), a.max(b))));
            got.sort_unstable();
            prop_assert_eq!(got, expected);
        }

        #[test]
        fn a_range_of_buckets_holds_what_the_whole_partition_holds_there(
            v in proptest::collection::vec(any::<u64>(), 1..5000),
            low in proptest::collection::vec(0u64..8, 0..500),
            bits in 1u32..=10,
            cut in any::<prop::sample::Index>(),
            width in any::<prop::sample::Index>(),
        ) {
            let v: Vec<u64> = v.into_iter().chain(low).collect();
            let map = |x: u64| x.rotate_left(13);
            let mut all = vec![0; v.len()];
            let whole = partition(&v, &mut all, None, bits, map);
            let counts = bucket_counts(&v, bits, map);
            let buckets = 1usize << bits;
            prop_assert_eq!(counts.len(), buckets);
            let start = cut.index(buckets);
            let end = start + 1 + width.index(buckets - start);
            let want = &all[whole[start]..whole[end]];
            prop_assert_eq!(counts[start..end].iter().sum::<usize>(), want.len());
            let mut dst = vec![0; want.len()];
            let bounds = partition_range(&v, &mut dst, bits, start..end, map);
            prop_assert_eq!(&dst[..], want);
            let rebased: Vec<usize> = whole[start..=end].iter().map(|b| b - whole[start]).collect();
            prop_assert_eq!(bounds, rebased);
        }

        #[test]
        fn sorts_from_a_borrowed_slice_like_std(
            mut v in proptest::collection::vec(any::<u64>(), 0..3000),
            low in proptest::collection::vec(0u64..4, 0..3000),
        ) {
            v.extend(low);
            let mut got = vec![0; v.len()];
            sort_from(&v, &mut got);
            v.sort_unstable();
            prop_assert_eq!(got, v);
        }

        #[test]
        fn sorts_like_std(mut v in proptest::collection::vec(any::<u64>(), 0..3000),
                          low in proptest::collection::vec(0u64..4, 0..3000)) {
            v.extend(low); // many equal keys
            let mut expected = v.clone();
            expected.sort_unstable();
            let mut scratch = vec![0; v.len()];
            sort(&mut v, &mut scratch);
            prop_assert_eq!(v, expected);
        }

        #[test]
        fn partition_then_buckets_sort_top_bits(v in proptest::collection::vec(any::<u64>(), 1..5000),
                                                w in 1u32..=64) {
            let n = v.len();
            let bits = partition_bits(n, w);
            let mut keys = vec![0; n];
            let mut scratch = vec![0; n];
            let bounds = partition(&v, &mut keys, Some(&mut scratch), bits, |x: u64| x.rotate_left(7));
            for_each_task(&mut keys, &mut scratch, &bounds, |t| {
                for (k, s) in t.buckets() {
                    sort_bucket(k, s, 64 - w, 64 - bits);
                }
            });
            let top = |x: u64| if w == 64 { x } else { x >> (64 - w) };
            prop_assert!(keys.windows(2).all(|p| top(p[0]) <= top(p[1])));
            let mut a = keys.clone();
            let mut b: Vec<u64> = v.iter().map(|x| x.rotate_left(7)).collect();
            a.sort_unstable();
            b.sort_unstable();
            prop_assert_eq!(a, b);
        }
    }
}
