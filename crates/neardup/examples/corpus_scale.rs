//! The corpus at scale: memory, queries and inserts for `n` random fingerprints.
//!
//! ```bash
//! cargo run --release -p neardup --example corpus_scale -- 10000000
//! ```
//!
//! Builds a `Corpus` (k = 3, planner's layout) in bulks of 10M, reports its heap bytes and
//! the growth of VmRSS per fingerprint, times 100k queries (half an indexed fingerprint
//! with 0–3 bits flipped, half random) one by one and in bulk, then single and bulk
//! inserts, with the worst single insert. Not a test: figures, for docs/benchmarks.md.

use std::time::Instant;

use neardup::corpus::Corpus;
use neardup::tables::Blocks;

/// splitmix64: the fingerprint of document `i`.
fn fp(i: u64) -> u64 {
    let mut x = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A field of /proc/self/status in MB (0 where there is none).
fn status_mb(key: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = match std::env::args().nth(1) {
        Some(a) => a.parse()?,
        None => 1_000_000,
    };
    let base = status_mb("VmRSS:");
    let t = Instant::now();
    let mut corpus = Corpus::new(Blocks::Auto, 3, n as usize)?;
    let mut i = 0;
    while i < n {
        let end = (i + 10_000_000).min(n);
        let docs: Vec<(u64, u64)> = (i..end).map(|j| (j, fp(j))).collect();
        corpus.insert_bulk(&docs)?;
        i = end;
    }
    corpus.finish_rebuild();
    let build = t.elapsed().as_secs_f64();
    let heap = corpus.heap_bytes() as f64 / n as f64;
    let rss = (status_mb("VmRSS:") - base) * 1_048_576.0 / n as f64;
    let mut x = 12345u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut queries, mut sources) = (Vec::new(), Vec::new());
    for q in 0..100_000u64 {
        if q % 2 == 0 {
            let j = next() % n.max(1);
            let mut f = fp(j);
            for _ in 0..next() % 4 {
                f ^= 1 << (next() % 64);
            }
            queries.push(f);
            sources.push(Some(j));
        } else {
            queries.push(next());
            sources.push(None);
        }
    }
    let t = Instant::now();
    let one: Vec<Vec<(u64, u32)>> = queries.iter().map(|&q| corpus.find_all(q)).collect();
    let one_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let bulk = corpus.find_all_bulk(&queries);
    let bulk_s = t.elapsed().as_secs_f64();
    let found = one
        .iter()
        .zip(&sources)
        .filter(|(r, s)| s.is_some_and(|j| r.iter().any(|m| m.0 == j)))
        .count();
    println!(
        "n {n}, {} blocks: build {build:.2} s; {heap:.2} B/fp in the tables, RSS grew {rss:.2} B/fp, peak {:.0} MB",
        corpus.layout().blocks(),
        status_mb("VmHWM:")
    );
    println!(
        "queries: {:.0}/s one by one, {:.0}/s in bulk; recall {:.4}; bulk agrees: {}",
        1e5 / one_s,
        1e5 / bulk_s,
        found as f64 / 50_000.0,
        one == bulk
    );
    let (mut worst, t) = (0f64, Instant::now());
    for j in n..n + 50_000 {
        let w = Instant::now();
        corpus.insert(j, fp(j))?;
        worst = worst.max(w.elapsed().as_secs_f64());
    }
    let single = 50_000.0 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    for b in 0..50u64 {
        let start = n + 50_000 + b * 10_000;
        let docs: Vec<(u64, u64)> = (start..start + 10_000).map(|j| (j, fp(j))).collect();
        corpus.insert_bulk(&docs)?;
    }
    println!(
        "inserts: {single:.0}/s one by one (worst {:.1} ms), {:.0}/s in bulks of 10k",
        worst * 1e3,
        500_000.0 / t.elapsed().as_secs_f64()
    );
    Ok(())
}
