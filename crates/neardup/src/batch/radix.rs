//! Radix partitioning and sorting on the leading bits of a 64-bit key: the hot kernel of
//! batch matching.
//!
//! One pass scatters keys into 2^p buckets by their top `p` bits (in parallel: per-chunk
//! histograms give every chunk its own disjoint write ranges). Each bucket, small enough to
//! stay in cache, is then sorted on the bits below by LSD radix passes, and the caller scans
//! it while it is still hot. Only the bits that matter are sorted: a table with 26 leading
//! bits costs one partition pass and two small in-bucket passes, not eight.

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
const MAX_PARTITION_BITS: u32 = 12;
/// Widest digit of an in-bucket LSD pass.
const MAX_DIGIT_BITS: u32 = 8;
/// Buckets up to this size are insertion-sorted instead of radix-sorted.
const INSERTION_MAX: usize = 24;
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

/// How many LSD passes sort a bucket of `len` keys on `bits` bits.
pub(crate) fn lsd_passes(len: usize, bits: u32) -> u32 {
    if bits == 0 || len <= INSERTION_MAX {
        0
    } else {
        bits.div_ceil(MAX_DIGIT_BITS)
    }
}

/// Scatters `map(x)` for every `x` of `src` into `dst`, grouped by the top `bits` bits of the
/// mapped key, keeping input order inside a bucket (stable). Returns the 2^bits + 1 bucket
/// bounds.
pub(crate) fn partition<S, T, F>(src: &[S], dst: &mut [T], bits: u32, map: F) -> Vec<usize>
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
    let chunks: Vec<&[S]> = src.chunks(CHUNK.max(1)).collect();
    let hists: Vec<Vec<u32>> = par::map(chunks.clone(), |chunk| {
        let mut h = vec![0u32; buckets];
        for &x in chunk {
            h[(map(x).key() >> shift) as usize] += 1;
        }
        h
    });
    let mut bounds = Vec::with_capacity(buckets + 1);
    let mut heads = vec![vec![0usize; buckets]; chunks.len()];
    let mut pos = 0usize;
    for b in 0..buckets {
        bounds.push(pos);
        for (c, h) in hists.iter().enumerate() {
            heads[c][b] = pos;
            pos += h[b] as usize;
        }
    }
    bounds.push(pos);
    let out = SharedOut(dst.as_mut_ptr());
    let jobs: Vec<(&[S], Vec<usize>)> = chunks.into_iter().zip(heads).collect();
    par::map(jobs, |(chunk, mut head)| {
        let out = &out;
        for &x in chunk {
            let y = map(x);
            let b = (y.key() >> shift) as usize;
            // SAFETY: chunk c owns dst[heads[c][b] .. heads[c][b] + hists[c][b]] for every b:
            // the ranges are disjoint across chunks and buckets, lie inside dst (they sum to
            // src.len() == dst.len()), and the chunk writes exactly hists[c][b] keys into
            // bucket b, so every write lands in its own range and no two threads share one.
            unsafe { out.0.add(head[b]).write(y) };
            head[b] += 1;
        }
    });
    bounds
}

/// A raw pointer to the partition output, shared by the chunks that each write their own
/// disjoint ranges of it.
struct SharedOut<T>(*mut T);
// SAFETY: see `partition`: threads write disjoint ranges, and the buffer outlives them.
unsafe impl<T: Send> Sync for SharedOut<T> {}

/// Sorts `keys` on bits `[lo, hi)` of their key, given they agree on every bit at or above
/// `hi`. Stable. `scratch` is as long as `keys`.
pub(crate) fn sort_bucket<T: Keyed>(keys: &mut [T], scratch: &mut [T], lo: u32, hi: u32) {
    let bits = hi.saturating_sub(lo);
    match lsd_passes(keys.len(), bits) {
        0 if bits == 0 => {}
        0 => insertion_sort(keys, lo),
        passes => {
            let digit = bits.div_ceil(passes);
            let (mut src, mut dst) = (&mut *keys, &mut *scratch);
            let mut shift = lo;
            while shift < hi {
                let width = digit.min(hi - shift);
                lsd_pass(src, dst, shift, width);
                std::mem::swap(&mut src, &mut dst);
                shift += width;
            }
            if passes % 2 == 1 {
                // The last pass wrote into scratch.
                keys.copy_from_slice(scratch);
            }
        }
    }
}

fn lsd_pass<T: Keyed>(src: &[T], dst: &mut [T], shift: u32, width: u32) {
    let mask = (1u64 << width) - 1;
    let mut count = [0usize; 1 << MAX_DIGIT_BITS];
    for x in src {
        count[((x.key() >> shift) & mask) as usize] += 1;
    }
    let mut sum = 0;
    for c in count.iter_mut().take(1 << width) {
        let n = *c;
        *c = sum;
        sum += n;
    }
    for &x in src {
        let d = ((x.key() >> shift) & mask) as usize;
        dst[count[d]] = x;
        count[d] += 1;
    }
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
    let bits = partition_bits(keys.len(), 64);
    let bounds = partition(keys, scratch, bits, |x| x);
    let lo = 0;
    let hi = 64 - bits;
    // The buckets now live in `scratch`; sort each there (with `keys` as its scratch).
    for_each_task(scratch, keys, &bounds, |task| {
        for (keys, scratch) in task.buckets() {
            sort_bucket(keys, scratch, lo, hi);
        }
    });
    keys.copy_from_slice(scratch);
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
            let bounds = partition(&v, &mut keys, bits, |x: u64| x.rotate_left(7));
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
