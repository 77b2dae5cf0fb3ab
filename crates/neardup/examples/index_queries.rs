//! Queries on the peers' index workload, in process, without the command line around it:
//! the quick loop for work on the query path (`neardup bench index` is the reported one).
//!
//! ```bash
//! GLIBC_TUNABLES=glibc.malloc.hugetlb=1 RAYON_NUM_THREADS=1 \
//!     cargo run --release -p neardup --example index_queries -- DATA [REPEATS] [MODE]
//! ```
//!
//! Modes: `one` (one call a query), `bulk`, `both`, `hot` (each query twice: the second
//! finds its lines cached), `build` (no queries: its instruction count is the baseline
//! to subtract under callgrind). `DATA` holds `index_1m.u64` and `queries_100k.u64` (the peers' `gen_data.py`). Prints
//! the median nanoseconds per query over `REPEATS` passes (5), and a checksum of the
//! results, which must not change with the query path. With `REPEATS` 1 it suits
//! `valgrind --tool=callgrind`, whose counts are per pass.

use std::time::Instant;

use neardup::corpus::Corpus;
use neardup::tables::Blocks;

fn read_u64s(path: &str) -> Result<Vec<u64>, Box<dyn std::error::Error>> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

/// Nanoseconds the process's threads have run on a CPU (the first field of each one's
/// schedstat): time slices taken by other work on a loaded machine do not count.
fn cpu_ns() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .sum()
}

fn checksum(results: &[Vec<(u64, u32)>]) -> u64 {
    results.iter().enumerate().fold(0u64, |h, (i, r)| {
        r.iter().fold(h, |h, &(id, d)| {
            (h ^ (id << 3 | u64::from(d)) ^ i as u64).wrapping_mul(0x100_0000_01b3)
        })
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir = args
        .get(1)
        .ok_or("usage: index_queries DATA [REPEATS] [MODE]")?;
    let repeats: usize = args.get(2).map_or(Ok(5), |r| r.parse())?;
    let mode = args.get(3).map_or("both", String::as_str);
    let fps = read_u64s(&format!("{dir}/index_1m.u64"))?;
    let queries = read_u64s(&format!("{dir}/queries_100k.u64"))?;
    let docs: Vec<(u64, u64)> = fps
        .iter()
        .enumerate()
        .map(|(i, &f)| (i as u64, f))
        .collect();
    let t = Instant::now();
    let mut corpus = Corpus::new(Blocks::Auto, 3, fps.len())?;
    corpus.insert_bulk(&docs)?;
    corpus.finish_rebuild();
    eprintln!(
        "built in {:.3} s: {} blocks, {:.2} bytes per fingerprint",
        t.elapsed().as_secs_f64(),
        corpus.layout().blocks(),
        corpus.heap_bytes() as f64 / fps.len() as f64
    );
    let per_query = |v: &mut Vec<f64>, scale: f64| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2] * scale / queries.len() as f64
    };
    if mode == "one" || mode == "both" || mode == "hot" {
        let (mut secs, mut cpu) = (Vec::new(), Vec::new());
        let mut sum = 0;
        for _ in 0..repeats {
            let (t, c) = (Instant::now(), cpu_ns());
            let r: Vec<Vec<(u64, u32)>> = queries.iter().map(|&q| corpus.find_all(q)).collect();
            secs.push(t.elapsed().as_secs_f64());
            cpu.push(cpu_ns() - c);
            sum = checksum(&r);
        }
        println!(
            "one-by-one: {:.1} ns/query wall, {:.1} cpu, checksum {sum:016x}",
            per_query(&mut secs, 1e9),
            per_query(&mut cpu, 1.0)
        );
    }
    if mode == "split" {
        // Queries without a match (random ones: four probes, nothing found) and with one
        // (their matches looked up too), timed apart.
        let (empty, near): (Vec<u64>, Vec<u64>) = queries
            .iter()
            .partition(|&&q| corpus.find_all(q).is_empty());
        for (name, set) in [("no match", &empty), ("matches", &near)] {
            let mut cpu = Vec::new();
            for _ in 0..repeats {
                let c = cpu_ns();
                for &q in set.iter() {
                    std::hint::black_box(corpus.find_all(q));
                }
                cpu.push((cpu_ns() - c) / set.len() as f64);
            }
            cpu.sort_by(f64::total_cmp);
            println!(
                "{name}: {:.1} ns cpu per query ({} queries)",
                cpu[cpu.len() / 2],
                set.len()
            );
        }
    }
    if mode == "hot" {
        // Each query twice in a row: the second finds its lines in the cache, so the
        // difference from one pass is the cost of a query without its cache misses.
        let mut cpu = Vec::new();
        for _ in 0..repeats {
            let c = cpu_ns();
            for &q in &queries {
                std::hint::black_box(corpus.find_all(q));
                std::hint::black_box(corpus.find_all(q));
            }
            cpu.push(cpu_ns() - c);
        }
        println!(
            "twice each: {:.1} ns cpu per query pair",
            per_query(&mut cpu, 1.0)
        );
    }
    if mode == "both" || mode == "bulk" {
        let (mut secs, mut cpu) = (Vec::new(), Vec::new());
        let mut sum = 0;
        for _ in 0..repeats {
            let (t, c) = (Instant::now(), cpu_ns());
            let r = corpus.find_all_bulk(&queries);
            secs.push(t.elapsed().as_secs_f64());
            cpu.push(cpu_ns() - c);
            sum = checksum(&r);
        }
        println!(
            "bulk: {:.1} ns/query wall, {:.1} cpu, checksum {sum:016x}",
            per_query(&mut secs, 1e9),
            per_query(&mut cpu, 1.0)
        );
    }
    Ok(())
}
