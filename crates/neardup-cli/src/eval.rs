//! `neardup eval`: how well fingerprints find near-duplicates, measured.
//!
//! Real documents are edited into near-duplicate variants at controlled true Jaccard
//! levels; all documents (the corpus and the variants) are fingerprinted with each
//! configuration under test; and every pair within `k` bits is scored against the truth,
//! for `k` = 0 to `--max-k`.
//!
//! - **Truth.** Jaccard of word 5-shingles of lowercased `\w+` words, as the peer
//!   harness defines it. A variant is made by applying random small edits (insert, delete
//!   or substitute a word, move a sentence, add a header or footer line, change case or
//!   white space) to an original until one more edit would take its Jaccard with the
//!   original below the target level; so each level yields variants just above it.
//! - **Recall** at a band of Jaccard: the share of (original, variant) pairs in the band
//!   found within `k` bits.
//! - **Precision**: the share of reported pairs that are related: two documents of one
//!   family (an original and its variants), or any pair whose true Jaccard is at least
//!   0.5. Everything else is an unrelated pair wrongly reported.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use anyhow::anyhow;
use neardup::fingerprint::{Fingerprinter, IdfBuilder, Normalize, Tokenizer, Weighting};
use neardup::jaccard::{exact, shingle_set};
use neardup_eval::report::eval as eval_report;
use neardup_io::docs;
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::doc_args::DocArgs;
use crate::failure::Failure;
use crate::output::{reads_of, refuse_overwrite, Output};
use crate::progress::Progress;
use neardup_eval::splitmix::SplitMix64;

/// Settings of `neardup eval`.
#[derive(clap::Args, Clone, Debug)]
pub struct EvalCmd {
    #[command(flatten)]
    docs: DocArgs,
    /// Originals to make variants of (sampled from the input).
    #[arg(long, default_value_t = 800)]
    originals: usize,
    /// Target Jaccard levels: each original gets one variant per level.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.95,0.9,0.85,0.8,0.7,0.6"
    )]
    levels: Vec<f64>,
    /// Seed of the edits.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Largest distance scored.
    #[arg(long, default_value_t = 8)]
    max_k: u32,
    /// Which configurations: the grid of tokenizers, windows and weightings, or the
    /// default one only.
    #[arg(long, value_enum, default_value = "grid")]
    configs: ConfigSet,
    /// Also write the collection and its truth in the peer harness's dedup format
    /// (dedup.jsonl, dedup_truth.jsonl, manifest.json) to this directory.
    #[arg(long, value_name = "DIR")]
    export: Option<String>,
    /// Print a Markdown table of each configuration at its best k instead of JSON lines.
    #[arg(long)]
    markdown: bool,
    /// Score `neardup dedup` on the input against this truth file instead of making
    /// variants: JSON lines {"a", "b", "jaccard"}, every pair with a word 5-shingle
    /// Jaccard of at least 0.5 (pair precision and recall, wrongly removed, missed).
    #[arg(long, value_name = "FILE")]
    truth: Option<String>,
    /// With --truth: the thresholds to score at.
    #[arg(long, value_delimiter = ',', default_value = "0.6,0.7,0.8,0.9")]
    thresholds: Vec<f64>,
    /// With --truth: score `neardup dedup --estimate` (every pair decided on its
    /// sketches' estimate) instead of dedup's default, which decides the pairs near the
    /// threshold on their texts.
    #[arg(long, requires = "truth")]
    estimate: bool,
    /// Where to write the results ('-' for standard output).
    #[arg(short, long, default_value = "-")]
    output: String,
    /// Also write the results as an HTML page, precision and recall plotted against the
    /// threshold (--truth) or the distance (docs/report.md).
    #[arg(long, value_name = "FILE")]
    report: Option<String>,
}

/// The configurations to evaluate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ConfigSet {
    /// Tokenizers × windows × weightings.
    Grid,
    /// The default configuration only.
    Default,
}

const HEADERS: &[&str] = &[
    "Home | About | Archive | Contact | Search",
    "Skip to main content  Menu  Home  Library  Sign in",
    "Breaking: read the latest stories from our newsroom",
];
const FOOTERS: &[&str] = &[
    "Copyright 2025 Example Media. All rights reserved. Privacy Policy | Terms of Use",
    "Share this: Facebook Twitter Email Print",
    "Posted in Reading | 3 Comments | Permalink",
];
const FILLERS: &[&str] = &[
    "very", "indeed", "really", "also", "then", "truly", "quite", "now",
];

/// One random small edit of `text`.
fn edit(rng: &mut SplitMix64, text: &str) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    let n = words.len();
    let rebuild = |w: Vec<String>| w.join(" ");
    match rng.index(9) {
        // Insert a filler or a word of the text.
        0 | 1 => {
            let mut w: Vec<String> = words.iter().map(|s| s.to_string()).collect();
            let new = if rng.index(2) == 0 {
                rng.pick(FILLERS).to_string()
            } else {
                rng.pick(&words).to_string()
            };
            w.insert(rng.index(n + 1), new);
            rebuild(w)
        }
        // Delete a word.
        2 | 3 if n > 1 => {
            let mut w: Vec<String> = words.iter().map(|s| s.to_string()).collect();
            w.remove(rng.index(n));
            rebuild(w)
        }
        // Substitute a word with another of the text.
        4 | 5 => {
            let mut w: Vec<String> = words.iter().map(|s| s.to_string()).collect();
            let i = rng.index(n);
            w[i] = rng.pick(&words).to_string();
            rebuild(w)
        }
        // Move a sentence.
        6 => {
            let mut sentences: Vec<String> = text
                .split_inclusive(['.', '!', '?'])
                .map(|s| s.to_string())
                .collect();
            if sentences.len() < 2 {
                return text.to_string();
            }
            let s = sentences.remove(rng.index(sentences.len()));
            let at = rng.index(sentences.len() + 1);
            sentences.insert(at, s);
            sentences.concat()
        }
        // Boilerplate around the text.
        7 => {
            if rng.index(2) == 0 {
                format!("{}\n\n{text}", rng.pick(HEADERS))
            } else {
                format!("{text}\n\n{}", rng.pick(FOOTERS))
            }
        }
        // Case and white space: no change to the words.
        _ => {
            let mut w: Vec<String> = words.iter().map(|s| s.to_string()).collect();
            let i = rng.index(n);
            w[i] = match rng.index(3) {
                0 => w[i].to_uppercase(),
                1 => w[i].to_lowercase(),
                _ => format!("{}\n", w[i]),
            };
            rebuild(w)
        }
    }
}

/// A variant of `original` whose Jaccard with it is at least `level`, as low as small edits
/// get it.
fn variant(rng: &mut SplitMix64, original: &str, level: f64) -> (String, f64) {
    let base = shingle_set(original);
    let mut current = original.to_string();
    let mut current_j = 1.0;
    for _ in 0..20_000 {
        let next = edit(rng, &current);
        let j = exact(&base, &shingle_set(&next));
        if j < level {
            break;
        }
        current = next;
        current_j = j;
    }
    (current, current_j)
}

/// A document of the collection.
struct Doc {
    id: String,
    text: String,
    /// The original it comes from (itself for a corpus document).
    family: usize,
    /// Jaccard with its original, for variants.
    jaccard: Option<f64>,
}

/// Bands of Jaccard recall is reported for: [lo, hi).
const BANDS: &[(f64, f64, &str)] = &[
    (0.9, 1.01, "0.9-1"),
    (0.8, 0.9, "0.8-0.9"),
    (0.7, 0.8, "0.7-0.8"),
    (0.5, 0.7, "0.5-0.7"),
];

/// The configurations under test; tf-idf tables are counted on `corpus` with each
/// configuration's own features.
fn configs(set: ConfigSet, corpus: &[&str]) -> Vec<(String, Fingerprinter)> {
    let idf_for = |builder: neardup::fingerprint::FingerprinterBuilder| {
        let plain = builder.weighting(Weighting::None).build().ok()?;
        let sets: Vec<Vec<u64>> = corpus.par_iter().map(|t| plain.feature_set(t)).collect();
        let mut idf = IdfBuilder::new();
        for s in &sets {
            idf.add(s);
        }
        Some(Weighting::TfIdf(Arc::new(idf.build(1))))
    };
    let mut out = Vec::new();
    let mut add = |name: String, b: neardup::fingerprint::FingerprinterBuilder| {
        if let Ok(fp) = b.build() {
            out.push((name, fp));
        }
    };
    if set == ConfigSet::Default {
        add("default".into(), Fingerprinter::builder());
        return out;
    }
    // Every setting explicit, so the grid does not move when the defaults do.
    let base = |t: Tokenizer, w: usize| {
        Fingerprinter::builder()
            .normalize(Normalize::default())
            .tokenizer(t)
            .window(w)
            .weighting(Weighting::None)
    };
    let words = |w: usize| base(Tokenizer::UnicodeWords, w);
    let chars = |n: usize| base(Tokenizer::CharNgrams(n), 1);
    for w in 1..=5 {
        add(format!("words w{w} none"), words(w));
        add(format!("words w{w} tf"), words(w).weighting(Weighting::Tf));
        if let Some(idf) = idf_for(words(w)) {
            add(format!("words w{w} tfidf"), words(w).weighting(idf));
        }
    }
    add(
        "words w1 lenpos".into(),
        words(1).weighting(Weighting::LenPos { lambda: 0.5 }),
    );
    for w in 1..=3 {
        add(format!("ascii w{w} none"), base(Tokenizer::AsciiLetters, w));
    }
    for n in [3, 4, 5, 6] {
        add(format!("char:{n} w1 none"), chars(n));
        add(format!("char:{n} w1 tf"), chars(n).weighting(Weighting::Tf));
        if let Some(idf) = idf_for(chars(n)) {
            add(format!("char:{n} w1 tfidf"), chars(n).weighting(idf));
        }
    }
    out
}

/// Scores of one configuration at one k.
struct Score {
    predicted: u64,
    wrong: u64,
    found_by_band: Vec<u64>,
}

/// Runs `neardup eval`.
pub fn run(cmd: &EvalCmd) -> Result<(), Failure> {
    if cmd.report.as_deref() == Some("-") && cmd.output == "-" {
        return Err(Failure::input(anyhow!(
            "only one output can be standard output ('-'): give --output or --report a file"
        )));
    }
    let mut reads = reads_of(&cmd.docs, None);
    reads.extend(cmd.truth.as_deref().map(|t| ("the truth file", t)));
    let exported: Vec<String> = cmd
        .export
        .iter()
        .flat_map(|d| {
            ["dedup.jsonl", "dedup_truth.jsonl", "manifest.json"].map(|f| format!("{d}/{f}"))
        })
        .collect();
    let mut writes = vec![("output", cmd.output.as_str())];
    writes.extend(cmd.report.as_deref().map(|r| ("the report", r)));
    writes.extend(exported.iter().map(|p| ("an --export file", p.as_str())));
    refuse_overwrite(&writes, &reads)?;
    let mut out = Output::create(&cmd.output)?;
    let report = cmd.report.as_deref().map(Output::create).transpose()?;
    if let Some(truth) = &cmd.truth {
        let t = crate::truth::run(
            &cmd.docs,
            truth,
            &cmd.thresholds,
            cmd.estimate,
            cmd.markdown,
            &mut out,
        )?;
        out.finish()?;
        if let Some(report) = report {
            let inputs: Vec<String> = cmd.docs.named().cloned().collect();
            report.page(eval_report::truth_page(
                &t.rows,
                t.documents,
                &inputs,
                truth,
            ))?;
        }
        return Ok(());
    }
    if cmd.levels.iter().any(|l| !(0.0..=1.0).contains(l)) {
        return Err(Failure::input(anyhow!("--levels must lie between 0 and 1")));
    }
    let mut corpus: Vec<(String, String)> = Vec::new();
    docs::read::<Failure>(&cmd.docs.options(), &Progress::hidden(), |batch| {
        corpus.extend(batch.into_iter().map(|d| {
            let id = match d.id {
                Value::String(s) => s,
                other => other.to_string(),
            };
            (id, d.text)
        }));
        Ok(())
    })?;
    if corpus.len() < 2 {
        return Err(Failure::input(anyhow!("eval needs at least two documents")));
    }
    // Originals: a sample of documents long enough to have shingles.
    let mut rng = SplitMix64(cmd.seed);
    let mut candidates: Vec<usize> = (0..corpus.len())
        .filter(|&i| shingle_set(&corpus[i].1).len() >= 20)
        .collect();
    for i in (1..candidates.len()).rev() {
        let j = rng.index(i + 1);
        candidates.swap(i, j);
    }
    candidates.truncate(cmd.originals);
    let jobs: Vec<(usize, f64, u64)> = candidates
        .iter()
        .flat_map(|&o| cmd.levels.iter().map(move |&l| (o, l)))
        .map(|(o, l)| (o, l, rng.next_u64()))
        .collect();
    let variants: Vec<(usize, f64, String, f64)> = jobs
        .par_iter()
        .map(|&(o, level, seed)| {
            let (text, j) = variant(&mut SplitMix64(seed), &corpus[o].1, level);
            (o, level, text, j)
        })
        .collect();
    let mut docs: Vec<Doc> = corpus
        .iter()
        .enumerate()
        .map(|(i, (id, text))| Doc {
            id: id.clone(),
            text: text.clone(),
            family: i,
            jaccard: None,
        })
        .collect();
    let mut copies: HashMap<usize, usize> = HashMap::new();
    for (o, level, text, j) in variants {
        let k = copies.entry(o).or_default();
        *k += 1;
        docs.push(Doc {
            id: format!("{}#v{}@{level}", corpus[o].0, k),
            text,
            family: o,
            jaccard: Some(j),
        });
    }
    let sets: Vec<Vec<u64>> = docs.par_iter().map(|d| shingle_set(&d.text)).collect();
    if let Some(dir) = &cmd.export {
        export(dir, &docs, &sets)?;
    }
    // Truth: (original index, variant index) with the variant's Jaccard.
    let truth: Vec<(usize, usize, f64)> = docs
        .iter()
        .enumerate()
        .filter_map(|(i, d)| d.jaccard.map(|j| (d.family, i, j)))
        .collect();
    let band_of = |j: f64| BANDS.iter().position(|&(lo, hi, _)| j >= lo && j < hi);
    let mut band_total = vec![0u64; BANDS.len()];
    for &(_, _, j) in &truth {
        if let Some(b) = band_of(j) {
            band_total[b] += 1;
        }
    }
    let originals: Vec<&str> = corpus.iter().map(|(_, t)| t.as_str()).collect();
    // Pairs outside any family: the unrelated ones, nearly (natural near-duplicates are few).
    let mut family_sizes: HashMap<usize, u64> = HashMap::new();
    for d in &docs {
        *family_sizes.entry(d.family).or_default() += 1;
    }
    let n = docs.len() as u64;
    let unrelated = n * (n - 1) / 2 - family_sizes.values().map(|s| s * (s - 1) / 2).sum::<u64>();
    let mut rows = Vec::new();
    for (name, fp) in configs(cmd.configs, &originals) {
        let texts: Vec<&str> = docs.iter().map(|d| d.text.as_str()).collect();
        let fps = fp.fingerprint_many(&texts);
        let scores = score(&docs, &sets, &fps, &truth, cmd.max_k, &band_of);
        for (k, s) in scores.iter().enumerate() {
            let found_hi = s.found_by_band[0] as f64;
            let recall_hi = found_hi / band_total[0].max(1) as f64;
            let precision = if s.predicted == 0 {
                1.0
            } else {
                1.0 - s.wrong as f64 / s.predicted as f64
            };
            let f1 = if precision + recall_hi > 0.0 {
                2.0 * precision * recall_hi / (precision + recall_hi)
            } else {
                0.0
            };
            let by_band: serde_json::Map<String, Value> = BANDS
                .iter()
                .enumerate()
                .map(|(b, &(_, _, label))| {
                    let r = s.found_by_band[b] as f64 / band_total[b].max(1) as f64;
                    (label.to_string(), json!(round4(r)))
                })
                .collect();
            rows.push(json!({
                "config": name,
                "k": k,
                "precision": round4(precision),
                "recall_hi": round4(recall_hi),
                "f1": round4(f1),
                "recall_by_band": by_band,
                "reported": s.predicted,
                "wrong": s.wrong,
                "unrelated_pairs": unrelated,
                "false_positive_rate": s.wrong as f64 / unrelated.max(1) as f64,
            }));
        }
    }
    if cmd.markdown {
        for line in markdown(&rows, &band_total, docs.len(), corpus.len()) {
            out.line(line.as_bytes())?;
        }
    } else {
        for r in &rows {
            out.line(r.to_string().as_bytes())?;
        }
    }
    out.finish()?;
    if let Some(report) = report {
        let inputs: Vec<String> = cmd.docs.named().cloned().collect();
        report.page(eval_report::grid_page(&rows, docs.len(), &inputs))?;
    }
    Ok(())
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// Scores at each k: pairs within k bits, which are wrong, and which truth pairs were
/// found, by band.
fn score(
    docs: &[Doc],
    sets: &[Vec<u64>],
    fps: &[u64],
    truth: &[(usize, usize, f64)],
    max_k: u32,
    band_of: &dyn Fn(f64) -> Option<usize>,
) -> Vec<Score> {
    let n = docs.len();
    // Every pair within max_k bits, with its distance (brute force: exact and, for tens of
    // thousands of documents, quick).
    let close: Vec<(usize, usize, u32)> = (0..n)
        .into_par_iter()
        .flat_map_iter(|i| {
            (i + 1..n).filter_map(move |j| {
                let d = (fps[i] ^ fps[j]).count_ones();
                (d <= max_k).then_some((i, j, d))
            })
        })
        .collect();
    let related: Vec<bool> = close
        .par_iter()
        .map(|&(i, j, _)| docs[i].family == docs[j].family || exact(&sets[i], &sets[j]) >= 0.5)
        .collect();
    let dist: HashMap<(usize, usize), u32> = close.iter().map(|&(i, j, d)| ((i, j), d)).collect();
    (0..=max_k)
        .map(|k| {
            let mut s = Score {
                predicted: 0,
                wrong: 0,
                found_by_band: vec![0; BANDS.len()],
            };
            for (&(_, _, d), &ok) in close.iter().zip(&related) {
                if d <= k {
                    s.predicted += 1;
                    s.wrong += u64::from(!ok);
                }
            }
            for &(o, v, j) in truth {
                let key = (o.min(v), o.max(v));
                let found = fps[o] == fps[v] || dist.get(&key).is_some_and(|&d| d <= k);
                if let (true, Some(b)) = (found, band_of(j)) {
                    s.found_by_band[b] += 1;
                }
            }
            s
        })
        .collect()
}

/// A Markdown table: each configuration at k = 3, 6 and 8, and at the k with the best F1
/// on the 0.9–1 band.
fn markdown(rows: &[Value], totals: &[u64], docs: usize, corpus: usize) -> Vec<String> {
    let unrelated = rows
        .first()
        .map_or(0, |r| r["unrelated_pairs"].as_u64().unwrap_or(0));
    let mut out = vec![
        format!(
            "{docs} documents: {corpus} from the corpus and {} variants ({} with Jaccard 0.9-1, {} 0.8-0.9, {} 0.7-0.8, {} 0.5-0.7); {unrelated} unrelated pairs.",
            docs - corpus, totals[0], totals[1], totals[2], totals[3]
        ),
        String::new(),
        "P: precision; R: recall of copies with Jaccard 0.9-1; R.8: recall of those with 0.8-0.9; wrong: unrelated pairs reported.".into(),
        String::new(),
        "| configuration | P k=3 | R k=3 | P k=6 | R k=6 | R.8 k=6 | wrong k=6 | P k=8 | R k=8 | R.8 k=8 | wrong k=8 | best k | F1 there |".into(),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|".into(),
    ];
    let mut by_config: Vec<(&str, Vec<&Value>)> = Vec::new();
    for r in rows {
        let name = r["config"].as_str().unwrap_or("");
        match by_config.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(r),
            None => by_config.push((name, vec![r])),
        }
    }
    let num =
        |r: Option<&&Value>, key: &str| r.map_or(f64::NAN, |r| r[key].as_f64().unwrap_or(f64::NAN));
    let band = |r: Option<&&Value>| {
        r.map_or(f64::NAN, |r| {
            r["recall_by_band"]["0.8-0.9"].as_f64().unwrap_or(f64::NAN)
        })
    };
    let wrong = |r: Option<&&Value>| r.map_or(0, |r| r["wrong"].as_u64().unwrap_or(0));
    for (name, rs) in by_config {
        let at = |k: u64| rs.iter().find(|r| r["k"] == k);
        let f1 = |r: &Value| r["f1"].as_f64().unwrap_or(0.0);
        let Some(best) = rs.iter().copied().max_by(|a, b| f1(a).total_cmp(&f1(b))) else {
            continue;
        };
        let (k3, k6, k8) = (at(3), at(6), at(8));
        out.push(format!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {:.3} | {:.3} | {:.3} | {} | {} | {:.3} |",
            num(k3, "precision"),
            num(k3, "recall_hi"),
            num(k6, "precision"),
            num(k6, "recall_hi"),
            band(k6),
            wrong(k6),
            num(k8, "precision"),
            num(k8, "recall_hi"),
            band(k8),
            wrong(k8),
            best["k"],
            f1(best),
        ));
    }
    out
}

/// The collection and its truth in the peer harness's dedup format.
fn export(dir: &str, docs: &[Doc], sets: &[Vec<u64>]) -> Result<(), Failure> {
    let err = |e: std::io::Error| Failure::io(anyhow!("cannot write to {dir}: {e}"));
    std::fs::create_dir_all(dir).map_err(err)?;
    let mut lines = String::new();
    for d in docs {
        lines.push_str(&json!({"id": d.id, "text": d.text}).to_string());
        lines.push('\n');
    }
    std::fs::write(format!("{dir}/dedup.jsonl"), &lines).map_err(err)?;
    // Planted pairs (original, variant), siblings (two variants of one original), and
    // natural pairs (any other pair with Jaccard >= 0.5, found through shared shingles).
    let mut truth: Vec<(String, String, String, f64)> = Vec::new();
    let mut families: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, d) in docs.iter().enumerate() {
        if let Some(j) = d.jaccard {
            truth.push((docs[d.family].id.clone(), d.id.clone(), "mixed".into(), j));
            families.entry(d.family).or_default().push(i);
        }
    }
    let mut known: HashSet<(usize, usize)> = HashSet::new();
    for (&o, vs) in &families {
        for &v in vs {
            known.insert((o.min(v), o.max(v)));
        }
        for (x, &a) in vs.iter().enumerate() {
            for &b in &vs[x + 1..] {
                known.insert((a.min(b), a.max(b)));
                truth.push((
                    docs[a].id.clone(),
                    docs[b].id.clone(),
                    "sibling".into(),
                    exact(&sets[a], &sets[b]),
                ));
            }
        }
    }
    let mut index: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, s) in sets.iter().enumerate() {
        for &h in s {
            index.entry(h).or_default().push(i);
        }
    }
    let mut candidates: HashSet<(usize, usize)> = HashSet::new();
    for postings in index.values() {
        if postings.len() > 200 {
            continue; // a shingle that common says nothing; pairs sharing rarer ones are found anyway
        }
        for (x, &a) in postings.iter().enumerate() {
            for &b in &postings[x + 1..] {
                candidates.insert((a, b));
            }
        }
    }
    for (a, b) in candidates {
        if known.contains(&(a, b)) {
            continue;
        }
        let j = exact(&sets[a], &sets[b]);
        if j >= 0.5 {
            truth.push((docs[a].id.clone(), docs[b].id.clone(), "natural".into(), j));
        }
    }
    let mut rows: Vec<String> = truth
        .into_iter()
        .map(|(a, b, kind, j)| {
            let (a, b) = if a < b { (a, b) } else { (b, a) };
            json!({"a": a, "b": b, "kind": kind, "jaccard": round4(j)}).to_string()
        })
        .collect();
    rows.sort();
    std::fs::write(format!("{dir}/dedup_truth.jsonl"), rows.join("\n") + "\n").map_err(err)?;
    let mb = docs.iter().map(|d| d.text.len()).sum::<usize>() as f64 / 1e6;
    let manifest = json!({
        "dedup": {"docs": docs.len(), "mb": (mb * 1000.0).round() / 1000.0},
        "files": {"dedup": "dedup.jsonl", "dedup_truth": "dedup_truth.jsonl"},
    });
    std::fs::write(format!("{dir}/manifest.json"), manifest.to_string()).map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "It was the best of times, it was the worst of times. It was the age of \
        wisdom, it was the age of foolishness. It was the epoch of belief, it was the epoch of \
        incredulity. It was the season of Light, it was the season of Darkness. It was the \
        spring of hope, it was the winter of despair.";

    #[test]
    fn exact_of_word_shingles() {
        let a = shingle_set(TEXT);
        assert_eq!(exact(&a, &a), 1.0);
        // Case and punctuation are not part of the truth's words.
        assert_eq!(
            exact(&a, &shingle_set(&TEXT.to_uppercase().replace(',', ";"))),
            1.0
        );
        let b = shingle_set("completely different words that share nothing at all with it");
        assert_eq!(exact(&a, &b), 0.0);
    }

    #[test]
    fn variants_land_just_above_their_level() {
        let base = shingle_set(TEXT);
        for (seed, level) in [(1, 0.95), (2, 0.8), (3, 0.6)] {
            let (text, j) = variant(&mut SplitMix64(seed), TEXT, level);
            assert!(j >= level, "{j} < {level}");
            assert!((exact(&base, &shingle_set(&text)) - j).abs() < 1e-12);
            // A word edit takes about 10% of this short text's shingles: only the lower
            // levels leave room for one.
            if level <= 0.8 {
                assert!(j < 1.0, "no word edit at level {level}");
            }
        }
    }
}
