//! The lookups of the corpus's small levels above its main part: per table, `(key, slot)`
//! entries sorted by the permuted fingerprint, under a directory once folded.

/// Calls `f(diff, slot)` for every entry of a level's sorted table that agrees with `q`
/// under `mask` and is within `k` bits of it.
#[inline]
pub(super) fn run_level(
    table: &[(u64, u32)],
    dir: &[u32],
    q: u64,
    mask: u64,
    k: u32,
    mut f: impl FnMut(u64, u32),
) {
    // With a directory, search only the query's bucket.
    let table = match dir.len().checked_sub(1) {
        Some(buckets) if buckets > 1 => {
            let b = (q >> (64 - buckets.trailing_zeros())) as usize;
            &table[dir[b] as usize..dir[b + 1] as usize]
        }
        _ => table,
    };
    let lead = q & mask;
    let from = table.partition_point(|e| e.0 & mask < lead);
    for &(key, slot) in &table[from..] {
        if key & mask != lead {
            break;
        }
        let diff = key ^ q;
        if diff.count_ones() <= k {
            f(diff, slot);
        }
    }
}

/// A bucket directory for a level's sorted `entries`: about four per bucket, never finer
/// than the `lead` bits of the table.
pub(super) fn level_dir(entries: &[(u64, u32)], lead: u32) -> Vec<u32> {
    let bits = (usize::BITS - entries.len().leading_zeros())
        .saturating_sub(2)
        .clamp(1, 20)
        .min(lead.max(1));
    let mut dir = vec![0u32; (1 << bits) + 1];
    for e in entries {
        dir[(e.0 >> (64 - bits)) as usize + 1] += 1;
    }
    for b in 1..dir.len() {
        dir[b] += dir[b - 1];
    }
    dir
}
