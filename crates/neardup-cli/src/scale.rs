//! `neardup bench gen-fingerprints` and `neardup bench check-pairs`: the billion-fingerprint
//! workload of docs/benchmarks.md, written fast from a seed, and a check of what
//! `find-all` made of it (every planted pair found, and a random sample brute-forced
//! against the whole set).

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, Write};
use std::time::Instant;

use anyhow::anyhow;
use neardup_eval::splitmix::mix;
use neardup_io::fingerprints::U64File;
use rayon::prelude::*;
use serde_json::json;

use crate::failure::Failure;
use crate::output::{refuse_overwrite, Output};

/// Settings of `neardup bench gen-fingerprints`.
#[derive(clap::Args, Clone, Debug)]
pub struct GenFingerprints {
    /// Fingerprints in all.
    #[arg(short, long)]
    pub n: u64,
    /// Of them, near copies of earlier ones ("planted pairs"), the last of the file.
    #[arg(long, default_value_t = 100_000)]
    pub planted: u64,
    /// A planted copy differs from its original in 1 to this many bits.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_distance: u32,
    /// The seed: the same seed writes the same file.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Where to write the raw little-endian u64 (`find-all --format u64`).
    #[arg(short, long)]
    pub output: String,
    /// Where to write the planted pairs, `[a,b]` with a < b, one per line.
    #[arg(long)]
    pub truth: Option<String>,
}

/// The workload: position `j` below `n − planted` holds a random value; position
/// `n − planted + i` a copy of a random earlier position's value with 1 to `max` distinct
/// bits flipped. Each value is a function of the seed and its position alone, so the file
/// is written in parallel chunks.
struct Workload {
    n: u64,
    planted: u64,
    max: u32,
    seed: u64,
}

impl Workload {
    fn random(&self, j: u64) -> u64 {
        mix(self.seed.rotate_left(17) ^ mix(j))
    }

    /// The original position and the value of planted copy `i`.
    fn planted(&self, i: u64) -> (u64, u64) {
        let originals = self.n - self.planted;
        let h = mix(self.seed ^ 0x706c_616e_7465_6421 ^ mix(i));
        let at = ((u128::from(h) * u128::from(originals)) >> 64) as u64;
        let mut value = self.random(at);
        let d = 1 + (mix(h) % u64::from(self.max)) as u32;
        let mut flipped = 0u64;
        let mut g = h;
        while flipped.count_ones() < d {
            g = mix(g);
            flipped |= 1 << (g % 64);
        }
        value ^= flipped;
        (at, value)
    }

    fn value(&self, j: u64) -> u64 {
        match j.checked_sub(self.n - self.planted) {
            Some(i) => self.planted(i).1,
            None => self.random(j),
        }
    }
}

/// Runs `neardup bench gen-fingerprints`.
pub fn gen_fingerprints(args: &GenFingerprints) -> Result<(), Failure> {
    if args.planted > args.n / 2 {
        return Err(Failure::input(anyhow!(
            "--planted {} is more than half of -n {}",
            args.planted,
            args.n
        )));
    }
    let started = Instant::now();
    let w = Workload {
        n: args.n,
        planted: args.planted,
        max: args.max_distance,
        seed: args.seed,
    };
    let mut out = Output::create(&args.output)?;
    const CHUNK: u64 = 1 << 22;
    let mut buf = vec![0u8; (CHUNK * 8) as usize];
    let mut at = 0u64;
    while at < w.n {
        let len = CHUNK.min(w.n - at);
        let bytes = &mut buf[..(len * 8) as usize];
        bytes
            .par_chunks_mut(8 << 12)
            .enumerate()
            .for_each(|(c, part)| {
                let first = at + (c as u64) * (1 << 12);
                for (k, slot) in part.chunks_exact_mut(8).enumerate() {
                    slot.copy_from_slice(&w.value(first + k as u64).to_le_bytes());
                }
            });
        out.write_bytes(bytes)?;
        at += len;
    }
    out.finish()?;
    if let Some(path) = &args.truth {
        refuse_overwrite(&[("--truth", path)], &[("the output", &args.output)])?;
        let mut truth = Output::create(path)?;
        for i in 0..w.planted {
            let (original, copy) = w.planted(i);
            let a = w.random(original);
            truth.array(&[a.min(copy), a.max(copy)])?;
        }
        truth.finish()?;
    }
    let seconds = started.elapsed().as_secs_f64();
    crate::note!(
        "{}",
        json!({
            "n": w.n,
            "planted": w.planted,
            "bytes": w.n * 8,
            "seconds": (seconds * 1000.0).round() / 1000.0,
            "gb_per_s": (w.n as f64 * 8.0 / seconds / 1e9 * 100.0).round() / 100.0,
        })
    );
    Ok(())
}

/// Settings of `neardup bench check-pairs`.
#[derive(clap::Args, Clone, Debug)]
pub struct CheckPairs {
    /// The fingerprints `find-all` read: raw little-endian u64.
    #[arg(short, long)]
    pub input: String,
    /// What `find-all` wrote: `[a,b]` per line.
    #[arg(long)]
    pub pairs: String,
    /// Pairs that must be found, `[a,b]` per line (`gen-fingerprints --truth`).
    #[arg(long)]
    pub truth: Option<String>,
    /// Fingerprints brute-forced against every fingerprint of the input.
    #[arg(long, default_value_t = 1000)]
    pub sample: usize,
    /// The distance `find-all` ran at.
    #[arg(short, long, default_value_t = 3)]
    pub distance: u32,
    /// The sample's seed.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
}

/// `[a,b]` lines of `path`.
fn read_pairs(path: &str) -> Result<Vec<(u64, u64)>, Failure> {
    let file = std::fs::File::open(path)
        .map_err(|e| Failure::input(anyhow!("cannot read '{path}': {e}")))?;
    let mut out = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| Failure::io(anyhow!("cannot read '{path}': {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let pair: Vec<u64> = serde_json::from_str(&line)
            .map_err(|e| Failure::input(anyhow!("{path}:{}: not an [a,b] pair: {e}", n + 1)))?;
        match pair[..] {
            [a, b] => out.push((a.min(b), a.max(b))),
            _ => {
                return Err(Failure::input(anyhow!(
                    "{path}:{}: not an [a,b] pair",
                    n + 1
                )))
            }
        }
    }
    Ok(out)
}

/// Runs `neardup bench check-pairs`; exit status 1 when a pair is missing or wrong.
pub fn check_pairs(args: &CheckPairs) -> Result<(), Failure> {
    let started = Instant::now();
    let file = U64File::open(&args.input)?;
    let values = file.values();
    let found = read_pairs(&args.pairs)?;
    let found_set: HashSet<(u64, u64)> = found.iter().copied().collect();
    let k = args.distance;
    let wrong = found
        .iter()
        .filter(|(a, b)| a == b || (a ^ b).count_ones() > k)
        .count();
    let (mut planted, mut missed) = (0usize, 0usize);
    if let Some(truth) = &args.truth {
        for p in read_pairs(truth)? {
            planted += 1;
            if p.0 != p.1 && (p.0 ^ p.1).count_ones() <= k && !found_set.contains(&p) {
                missed += 1;
            }
        }
    }
    // The sample: values at random positions, distinct.
    let mut sample: Vec<u64> = (0..args.sample as u64)
        .filter_map(|i| {
            let h = mix(args.seed ^ mix(i));
            let at = ((u128::from(h) * values.len() as u128) >> 64) as usize;
            values.get(at).copied()
        })
        .collect();
    sample.sort_unstable();
    sample.dedup();
    // Every fingerprint of the input against every sampled one.
    let near: Vec<Vec<u64>> = values
        .par_chunks(1 << 20)
        .map(|chunk| near_sample(chunk, &sample, k))
        .reduce(
            || vec![Vec::new(); sample.len()],
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(b) {
                    x.extend(y);
                }
                a
            },
        );
    let mut partners: BTreeMap<u64, HashSet<u64>> = BTreeMap::new();
    for &(a, b) in &found {
        partners.entry(a).or_default().insert(b);
        partners.entry(b).or_default().insert(a);
    }
    let (mut brute, mut sample_missed, mut sample_extra) = (0usize, 0usize, 0usize);
    for (s, near) in sample.iter().zip(near) {
        let want: HashSet<u64> = near.into_iter().filter(|v| v != s).collect();
        brute += want.len();
        let got = partners.get(s).cloned().unwrap_or_default();
        sample_missed += want.difference(&got).count();
        sample_extra += got.difference(&want).count();
    }
    let ok = wrong == 0 && missed == 0 && sample_missed == 0 && sample_extra == 0;
    let report = json!({
        "pairs": found.len(),
        "wrong": wrong,
        "planted": planted,
        "planted_missed": missed,
        "sample": sample.len(),
        "sample_pairs_brute_force": brute,
        "sample_missed": sample_missed,
        "sample_extra": sample_extra,
        "ok": ok,
        "seconds": (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
    });
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{report}").map_err(|e| Failure::io(anyhow!("standard output: {e}")))?;
    if ok {
        Ok(())
    } else {
        Err(Failure::io(anyhow!(
            "the pairs do not match the check: {report}"
        )))
    }
}

/// For each sampled value, the values of `chunk` within `k` bits of it.
fn near_sample(chunk: &[u64], sample: &[u64], k: u32) -> Vec<Vec<u64>> {
    let mut out = vec![Vec::new(); sample.len()];
    for (s, near) in sample.iter().zip(&mut out) {
        near.extend(within(chunk, *s, k));
    }
    out
}

/// The values of `chunk` within `k` bits of `s`: the brute force's kernel, a popcount
/// per value (with the CPU's instruction where it has one).
fn within(chunk: &[u64], s: u64, k: u32) -> impl Iterator<Item = u64> + '_ {
    #[cfg(target_arch = "x86_64")]
    if neardup::arch::cpu().popcnt() {
        // SAFETY: the CPU has POPCNT (checked just above).
        let hits = unsafe { within_popcnt(chunk, s, k) };
        return hits.into_iter();
    }
    chunk
        .iter()
        .copied()
        .filter(|&v| (v ^ s).count_ones() <= k)
        .collect::<Vec<u64>>()
        .into_iter()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn within_popcnt(chunk: &[u64], s: u64, k: u32) -> Vec<u64> {
    chunk
        .iter()
        .copied()
        .filter(|&v| (v ^ s).count_ones() <= k)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planted_copies_are_their_originals_a_few_bits_away() {
        let w = Workload {
            n: 10_000,
            planted: 500,
            max: 3,
            seed: 9,
        };
        let mut distances = [0usize; 4];
        for i in 0..w.planted {
            let (at, copy) = w.planted(i);
            assert!(at < w.n - w.planted);
            assert_eq!(w.value(w.n - w.planted + i), copy);
            let d = (w.random(at) ^ copy).count_ones();
            assert!((1..=3).contains(&d), "{d}");
            distances[d as usize] += 1;
        }
        // Every distance from 1 to 3 occurs.
        assert!(distances[1..].iter().all(|&c| c > 100), "{distances:?}");
    }
}
