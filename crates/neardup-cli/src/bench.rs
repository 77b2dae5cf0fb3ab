//! `neardup bench find-all`: times batch all-pairs in process and prints one JSON line per
//! block setting, with the keys of the peers' benchmark harness (`../shared/peers` in the
//! development tree), so the lines can be read beside the peers' own.
//!
//! `seconds` is the median over `--repeats` runs of the whole job from an unsorted list of
//! fingerprints in memory to the final list of pairs (sort, deduplicate, every table), as
//! the peers time theirs from index build to the last query.

use std::collections::HashSet;
use std::time::Instant;

use anyhow::anyhow;
use neardup::batch::{self, planner, Distinct, Matcher};
use neardup::tables::Blocks;
use neardup_io::docs::{self, ReadOptions};
use neardup_io::fingerprints::{read_decimal, read_u64_le, Source};
use serde_json::{json, Value};

use crate::failure::Failure;
use crate::fpconfig::{FingerprintArgs, Pipeline};
use crate::output::{refuse_overwrite, Named, Output};
use crate::progress::Progress;
use neardup_eval::splitmix::SplitMix64;

/// Settings of `neardup bench find-all`.
#[derive(clap::Args, Clone, Debug)]
pub struct FindAllBench {
    /// Fingerprints: little-endian u64 (`.u64`) or one decimal per line.
    #[arg(
        long,
        conflicts_with = "generate",
        required_unless_present = "generate"
    )]
    pub input: Option<String>,
    /// Planted pairs: little-endian u64 pairs of line numbers (`allpairs_*_truth.u64`).
    #[arg(long, requires = "input")]
    pub truth: Option<String>,
    /// Generate N fingerprints instead, exactly as the peers' gen_data.py writes
    /// allpairs_N.u64 (splitmix64, seed 3): random, with `--planted` near copies.
    #[arg(long, value_name = "N")]
    pub generate: Option<usize>,
    /// Planted near pairs (distance 1..3) when generating.
    #[arg(long, default_value_t = 10_000, requires = "generate")]
    pub planted: usize,
    /// Block settings to time, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4,5,6,auto")]
    pub blocks: Vec<Blocks>,
    /// Largest distance reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=63))]
    pub distance: u32,
    /// Timed runs per setting; the median is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeats: u32,
}

/// The peers' all-pairs workload: `(fingerprints, planted pairs of positions)`.
pub fn generate(n: usize, planted: usize) -> (Vec<u64>, Vec<(usize, usize)>) {
    let mut rng = SplitMix64(3);
    let mut fps: Vec<u64> = (0..n).map(|_| rng.next_u64()).collect();
    let half = n / 2;
    let a = rng.sample(0, half, planted);
    let b = rng.sample(half, n, planted);
    let mut pairs: Vec<(usize, usize)> = a.into_iter().zip(b).collect();
    pairs.sort_unstable();
    for &(i, j) in &pairs {
        let d = 1 + rng.below(3) as usize;
        fps[j] = rng.flip(fps[i], d);
    }
    (fps, pairs)
}

struct Usage {
    cpu_s: f64,
    max_rss_mb: f64,
}

fn usage() -> Usage {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Usage {
        cpu_s: secs(u.ru_utime) + secs(u.ru_stime),
        max_rss_mb: u.ru_maxrss as f64 / 1024.0,
    }
}

fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn round(x: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (x * p).round() / p
}

/// Runs the benchmark, printing one JSON line per block setting on standard output.
pub fn find_all(args: &FindAllBench) -> Result<(), Failure> {
    // Standard output appended to the input (`>> fps.txt`) would grow it while it is read.
    let reads: Vec<Named<'_>> = args
        .input
        .iter()
        .map(|p| ("the input", p.as_str()))
        .collect();
    refuse_overwrite(&[("output", "-")], &reads)?;
    let load = loadavg();
    let (fps, truth) = match (&args.input, args.generate) {
        (_, Some(n)) => {
            if n < 2 || args.planted > n / 2 {
                return Err(Failure::input(anyhow!(
                    "--generate needs N >= 2 and --planted <= N/2"
                )));
            }
            let (fps, pairs) = generate(n, args.planted);
            (fps, Some(pairs))
        }
        (Some(path), None) => {
            let fps = if path.ends_with(".u64") {
                read_u64_le(path)?
            } else {
                read_decimal(Source::open(path)?, &Progress::hidden())?
            };
            let truth = match &args.truth {
                Some(t) => {
                    let raw = read_u64_le(t)?;
                    let pairs: Vec<(usize, usize)> = raw
                        .chunks_exact(2)
                        .map(|p| (p[0] as usize, p[1] as usize))
                        .collect();
                    if let Some(&(i, j)) = pairs.iter().find(|&&(i, j)| i.max(j) >= fps.len()) {
                        return Err(Failure::input(anyhow!(
                            "'{t}': pair ({i}, {j}) is past the {} fingerprints",
                            fps.len()
                        )));
                    }
                    Some(pairs)
                }
                None => None,
            };
            (fps, truth)
        }
        (None, None) => return Err(Failure::input(anyhow!("give --input or --generate"))),
    };
    let n = fps.len();
    let k = args.distance;
    let mut runs = Vec::new();
    for &blocks in &args.blocks {
        let layout = batch::layout(blocks, n, k)
            .map_err(|e| Failure::input(anyhow!("--blocks {blocks}: {e}")))?;
        runs.push(Run {
            blocks,
            matcher: Matcher::new(layout),
            secs: Vec::new(),
            cpus: Vec::new(),
            pairs: Vec::new(),
        });
    }
    // Round-robin, so drift in the machine's speed touches every setting alike.
    for _ in 0..args.repeats {
        for run in &mut runs {
            let input = fps.clone();
            let mut pairs = Vec::new();
            let (t, cpu) = (Instant::now(), usage().cpu_s);
            let set = Distinct::from_vec(input).map_err(Failure::input)?;
            let found: Result<(), ()> = run.matcher.find_all(&set, |a, b| {
                pairs.push((a, b));
                Ok(())
            });
            found.map_err(|()| Failure::io(anyhow!("matching stopped")))?;
            run.secs.push(t.elapsed().as_secs_f64());
            run.cpus.push(usage().cpu_s - cpu);
            run.pairs = pairs;
        }
    }
    let mut out = Output::create("-")?;
    for mut run in runs {
        let line = report(&mut run, &fps, truth.as_deref(), k, args.repeats, load);
        out.line(line.to_string().as_bytes())?;
    }
    out.finish()
}

/// One block setting's timings.
struct Run {
    blocks: Blocks,
    matcher: Matcher,
    secs: Vec<f64>,
    cpus: Vec<f64>,
    pairs: Vec<(u64, u64)>,
}

/// The JSON line of one setting.
fn report(
    run: &mut Run,
    fps: &[u64],
    truth: Option<&[(usize, usize)]>,
    k: u32,
    repeats: u32,
    load: Option<f64>,
) -> Value {
    let n = fps.len();
    let layout = run.matcher.layout();
    let (m, tables) = (layout.blocks(), layout.tables().len());
    let lo = run.secs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = run.secs.iter().copied().fold(0.0, f64::max);
    let seconds = median(&mut run.secs);
    let pairs = &run.pairs;
    let wrong = pairs
        .iter()
        .filter(|(a, b)| (a ^ b).count_ones() > k)
        .count();
    let (recall, recall_by_d, planted) = match truth {
        Some(truth) => {
            let found: HashSet<(u64, u64)> = pairs.iter().copied().collect();
            let (mut hit, mut tot) = ([0u64; 4], [0u64; 4]);
            for &(i, j) in truth {
                let (a, b) = (fps[i].min(fps[j]), fps[i].max(fps[j]));
                let d = ((a ^ b).count_ones() as usize).min(3);
                tot[d] += 1;
                hit[d] += u64::from(found.contains(&(a, b)));
            }
            let by_d: Vec<Value> = (0..4)
                .map(|d| {
                    if tot[d] == 0 {
                        Value::Null
                    } else {
                        json!(round(hit[d] as f64 / tot[d] as f64, 4))
                    }
                })
                .collect();
            let total: u64 = tot.iter().sum();
            let recall = round(hit.iter().sum::<u64>() as f64 / total.max(1) as f64, 4);
            (json!(recall), json!(by_d), json!(total))
        }
        None => (Value::Null, Value::Null, Value::Null),
    };
    let plan = planner::cost(n, m, k);
    json!({
        "peer": "neardup",
        "impl": format!("neardup {} Matcher::find_all ({m} blocks, {tables} tables)", env!("CARGO_PKG_VERSION")),
        "variant": format!("blocks={}", run.blocks),
        "workload": "allpairs",
        "threads": batch::threads(),
        "n": n,
        "queries": null,
        "planted": planted,
        "mb": null,
        "build_s": null,
        "seconds": round(seconds, 4),
        "cpu_s": round(median(&mut run.cpus), 4),
        "throughput": (n as f64 / seconds).round(),
        "unit": "fingerprints/s",
        "recall": recall,
        "recall_by_d": recall_by_d,
        "found": pairs.len(),
        "wrong": wrong,
        "max_rss_mb": usage().max_rss_mb.round(),
        "loadavg": load,
        "repeats": repeats,
        "seconds_min": round(lo, 4),
        "seconds_max": round(hi, 4),
        "modelled_ms": plan.map(|p| round(p.cost / 1e6, 1)),
    })
}

/// Settings of `neardup bench fingerprint`.
#[derive(clap::Args, Clone, Debug)]
pub struct FingerprintBench {
    /// Documents to fingerprint (JSON Lines with a "text" field, like the peers'
    /// corpus.jsonl, or any input `neardup fingerprint` reads). Several corpora, given as
    /// several --input or comma-separated, are timed one after the other, two lines each:
    /// e.g. the peers' English corpus, a natural one and a Chinese one
    /// (scripts/cjk_corpus.py).
    #[arg(long, required = true, value_delimiter = ',')]
    pub input: Vec<String>,
    /// Passes over the corpus; the fastest is reported, as the peers' harness does.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeats: u32,
    #[command(flatten)]
    pub fingerprint: FingerprintArgs,
}

/// Runs the benchmark: per corpus, one JSON line for one thread, one for all threads.
pub fn fingerprint(args: &FingerprintBench) -> Result<(), Failure> {
    // A corpus read after the lines of an earlier one are written would hold them, if
    // standard output were appended to it.
    let mut reads: Vec<Named<'_>> = args
        .input
        .iter()
        .map(|p| ("an input", p.as_str()))
        .collect();
    reads.extend(
        args.fingerprint
            .idf
            .as_deref()
            .map(|p| ("the idf table", p)),
    );
    reads.extend(
        args.fingerprint
            .weights
            .as_deref()
            .map(|p| ("the weights", p)),
    );
    refuse_overwrite(&[("output", "-")], &reads)?;
    let mut out = Output::create("-")?;
    for input in &args.input {
        fingerprint_corpus(args, input, &mut out)?;
    }
    out.finish()
}

/// The two lines of one corpus.
fn fingerprint_corpus(
    args: &FingerprintBench,
    input: &str,
    out: &mut Output,
) -> Result<(), Failure> {
    use rayon::prelude::*;

    let load = loadavg();
    let pipeline = args.fingerprint.pipeline()?;
    let doc_args = ReadOptions::paths(vec![input.to_string()]);
    let mut texts: Vec<String> = Vec::new();
    docs::read::<Failure>(&doc_args, &Progress::hidden(), |batch| {
        texts.extend(batch.into_iter().map(|d| d.text));
        Ok(())
    })?;
    let mb = texts.iter().map(|t| t.len()).sum::<usize>() as f64 / 1e6;
    let describe = match &pipeline {
        Pipeline::Neardup(fp) => {
            let c = fp.config();
            format!("{:?}, window {}, {:?}", c.tokenizer, c.window, c.weighting)
        }
        Pipeline::Compat(c) => format!("compat {c:?}"),
    };
    // Warm-up, as the peers do.
    for t in texts.iter().take(20) {
        std::hint::black_box(pipeline.fingerprint(t));
    }
    let threads = rayon::current_num_threads();
    for (variant, n_threads) in [("serial", 1), ("par", threads)] {
        let mut best: Option<(f64, f64)> = None;
        for _ in 0..args.repeats {
            let (t, cpu) = (Instant::now(), usage().cpu_s);
            let fps: Vec<u64> = if n_threads == 1 {
                texts.iter().map(|d| pipeline.fingerprint(d)).collect()
            } else {
                texts.par_iter().map(|d| pipeline.fingerprint(d)).collect()
            };
            std::hint::black_box(fps);
            let run = (t.elapsed().as_secs_f64(), usage().cpu_s - cpu);
            if best.is_none_or(|b| run.0 < b.0) {
                best = Some(run);
            }
        }
        let (seconds, cpu_s) = best.unwrap_or_default();
        let line = json!({
            "peer": "neardup",
            "impl": format!("neardup {} Fingerprinter ({describe})", env!("CARGO_PKG_VERSION")),
            "variant": variant,
            "workload": "fp",
            "threads": n_threads,
            "n": texts.len(),
            "queries": null,
            "planted": null,
            "mb": round(mb, 3),
            "build_s": null,
            "seconds": round(seconds, 4),
            "cpu_s": round(cpu_s, 4),
            "throughput": round(mb / seconds, 3),
            "unit": "MB/s",
            "recall": null,
            "recall_by_d": null,
            "found": null,
            "wrong": null,
            "max_rss_mb": usage().max_rss_mb.round(),
            "loadavg": load,
            "corpus": input,
        });
        out.line(line.to_string().as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_the_peers_workload() {
        // gen_data.py's allpairs algorithm at n = 1000, planted = 10 (values printed by
        // running its SplitMix64 class).
        let (fps, pairs) = generate(1000, 10);
        assert_eq!(
            pairs,
            vec![
                (124, 961),
                (152, 949),
                (168, 651),
                (266, 748),
                (280, 867),
                (298, 835),
                (309, 607),
                (443, 642),
                (446, 519),
                (483, 568)
            ]
        );
        assert_eq!(fps[0], 2092789425003139053);
        assert_eq!(fps[999], 998712922965755625);
        assert_eq!(fps[961], 17844174956510286191);
        assert_eq!(fps[949], 15745079749503312151);
        assert_eq!(fps[651], 3098194544528318687);
    }
}

/// Settings of `neardup bench index`.
#[derive(clap::Args, Clone, Debug)]
pub struct IndexBench {
    /// Fingerprints to index, little-endian u64 (the peers' `index_1m.u64`); document id =
    /// position.
    #[arg(long)]
    pub index: String,
    /// Queries, little-endian u64 (`queries_100k.u64`).
    #[arg(long)]
    pub queries: String,
    /// Per query, little-endian i64 (source position, distance), -1 for a random query
    /// (`queries_100k_truth.i64`): recall is the share of near queries whose source is
    /// among the results.
    #[arg(long)]
    pub truth: Option<String>,
    /// Blocks ('auto': the corpus planner).
    #[arg(long, default_value = "auto")]
    pub blocks: Blocks,
    /// Largest distance matched.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=63))]
    pub distance: u32,
    /// Timed runs; medians are reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeats: u32,
}

/// Runs `neardup bench index`: build a corpus from `--index`, then `find_all` every query,
/// one call per query and in bulk; one JSON line each, with the peers' keys.
pub fn index(args: &IndexBench) -> Result<(), Failure> {
    use neardup::corpus::Corpus;

    let mut reads: Vec<Named<'_>> = vec![
        ("the index file", args.index.as_str()),
        ("the queries", args.queries.as_str()),
    ];
    reads.extend(args.truth.as_deref().map(|p| ("the truth file", p)));
    refuse_overwrite(&[("output", "-")], &reads)?;
    let load = loadavg();
    let fps = read_u64_le(&args.index)?;
    let queries = read_u64_le(&args.queries)?;
    let truth: Option<Vec<(i64, i64)>> = match &args.truth {
        Some(t) => {
            let raw = read_u64_le(t)?;
            if raw.len() != 2 * queries.len() {
                return Err(Failure::input(anyhow!(
                    "'{t}': {} values for {} queries (want 2 each)",
                    raw.len(),
                    queries.len()
                )));
            }
            Some(
                raw.chunks_exact(2)
                    .map(|p| (p[0] as i64, p[1] as i64))
                    .collect(),
            )
        }
        None => None,
    };
    let docs: Vec<(u64, u64)> = fps
        .iter()
        .enumerate()
        .map(|(i, &f)| (i as u64, f))
        .collect();
    let (mut builds, mut one, mut bulk) = (Vec::new(), Vec::new(), Vec::new());
    let (mut one_cpu, mut bulk_cpu) = (Vec::new(), Vec::new());
    let mut results: Vec<Vec<(u64, u32)>> = Vec::new();
    let (mut blocks, mut heap) = (0, 0);
    for _ in 0..args.repeats {
        let t = Instant::now();
        let mut corpus =
            Corpus::new(args.blocks, args.distance, fps.len()).map_err(Failure::input)?;
        corpus.insert_bulk(&docs).map_err(Failure::input)?;
        builds.push(t.elapsed().as_secs_f64());
        blocks = corpus.layout().blocks();
        heap = corpus.heap_bytes();
        let (t, cpu) = (Instant::now(), usage().cpu_s);
        let each: Vec<Vec<(u64, u32)>> = queries.iter().map(|&q| corpus.find_all(q)).collect();
        one.push(t.elapsed().as_secs_f64());
        one_cpu.push(usage().cpu_s - cpu);
        let (t, cpu) = (Instant::now(), usage().cpu_s);
        let all = corpus.find_all_bulk(&queries);
        bulk.push(t.elapsed().as_secs_f64());
        bulk_cpu.push(usage().cpu_s - cpu);
        if all != each {
            return Err(Failure::io(anyhow!("bulk and single queries disagree")));
        }
        results = all;
    }
    let recall = truth.as_ref().map(|truth| {
        let (mut hit, mut total) = (0u64, 0u64);
        for (r, &(src, _)) in results.iter().zip(truth) {
            if src >= 0 {
                total += 1;
                hit += u64::from(r.iter().any(|&(id, _)| id == src as u64));
            }
        }
        round(hit as f64 / total.max(1) as f64, 4)
    });
    let found: usize = results.iter().map(Vec::len).sum();
    let build = median(&mut builds);
    let mut out = Output::create("-")?;
    for (variant, secs, cpus) in [
        ("one-by-one", &mut one, &mut one_cpu),
        ("bulk", &mut bulk, &mut bulk_cpu),
    ] {
        let seconds = median(secs);
        let cpu_s = median(cpus);
        out.line(
            json!({
                "peer": "neardup", "workload": "index", "variant": variant,
                "impl": format!("neardup {} Corpus, {blocks} blocks, find_all{}", env!("CARGO_PKG_VERSION"), if variant == "bulk" { "_bulk" } else { "" }),
                "threads": if variant == "bulk" { batch::threads() } else { 1 },
                "n": fps.len(), "queries": queries.len(),
                "build_s": round(build, 3), "seconds": round(seconds, 4), "cpu_s": round(cpu_s, 4),
                "throughput": (queries.len() as f64 / seconds).round(), "unit": "queries/s",
                "recall": recall, "found": found,
                "bytes_per_fingerprint": round(heap as f64 / fps.len().max(1) as f64, 1),
                "max_rss_mb": round(usage().max_rss_mb, 1), "loadavg": load,
            })
            .to_string()
            .as_bytes(),
        )?;
    }
    out.finish()
}
