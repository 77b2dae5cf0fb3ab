//! `neardup bench gen-docs`: a document corpus of any size, written fast from a seed, with
//! planted near-duplicates and their exact Jaccard similarity: the workload of the 100M
//! dedup and service runs (docs/dedup.md, docs/service.md), streamed into zstd shards so
//! that no 100 GB file lands on disk.
//!
//! Words follow a Zipf law over a vocabulary of made-up words, so that shingles repeat
//! across documents as they do in text. A planted document is a copy of an earlier
//! original with a share of its words replaced (0 to `--max-edit`, uniform), so its
//! similarity to the original spreads from 1 down past the usual thresholds; the truth
//! lists each planted pair with its exact Jaccard similarity under neardup's words.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::anyhow;
use neardup::jaccard;
use rayon::prelude::*;
use serde_json::json;

use crate::failure::Failure;

/// Settings of `neardup bench gen-docs`.
#[derive(clap::Args, Clone, Debug)]
pub struct GenDocs {
    /// Documents in all.
    #[arg(short, long)]
    pub n: u64,
    /// Bytes of text a document has, about.
    #[arg(long, default_value_t = 1000)]
    pub doc_bytes: usize,
    /// The share of documents that are near-duplicates of an earlier one.
    #[arg(long, default_value_t = 0.1)]
    pub planted: f64,
    /// A planted copy has up to this share of its words replaced.
    #[arg(long, default_value_t = 0.04)]
    pub max_edit: f64,
    /// The seed: the same seed writes the same corpus.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Where to write: a directory of shards `docs-NNNNN.jsonl.zst` (with --shards), or
    /// one file (`.zst` compressed).
    #[arg(short, long)]
    pub output: String,
    /// Shards, written in parallel (0: one file, --output).
    #[arg(long, default_value_t = 0)]
    pub shards: u32,
    /// Where to write the planted pairs: {"a", "b", "jaccard"} per line, a the original.
    #[arg(long)]
    pub truth: Option<String>,
    /// zstd level of the shards.
    #[arg(long, default_value_t = 1)]
    pub level: i32,
}

/// splitmix64's mix.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Words of the vocabulary.
const VOCABULARY: usize = 50_000;

/// The made-up words and a Zipf table over them.
struct Words {
    words: Vec<String>,
    /// Cumulative weights scaled to u32, for sampling by a binary search.
    cumulative: Vec<u32>,
}

impl Words {
    fn new(seed: u64) -> Words {
        const LETTERS: &[u8] = b"etaoinshrdlcumwfgypbvkjxqz";
        let words: Vec<String> = (0..VOCABULARY as u64)
            .map(|i| {
                let mut h = mix(seed ^ 0x776f_7264 ^ i);
                let len = 2 + (h % 9) as usize;
                (0..len)
                    .map(|_| {
                        h = mix(h);
                        // Frequent letters more often: the square biases to the front.
                        let r = (h % 676) as usize;
                        LETTERS[(r * r / 676) % 26] as char
                    })
                    .collect()
            })
            .collect();
        let weights: Vec<f64> = (1..=VOCABULARY).map(|r| 1.0 / r as f64).collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let cumulative = weights
            .iter()
            .map(|w| {
                acc += w / total;
                (acc * f64::from(u32::MAX)) as u32
            })
            .collect();
        Words { words, cumulative }
    }

    fn pick(&self, r: u64) -> &str {
        let x = r as u32;
        let i = self.cumulative.partition_point(|&c| c < x);
        &self.words[i.min(VOCABULARY - 1)]
    }
}

/// The corpus: document `i` is an original (text from the seed and `i`) or, by the seed, a
/// planted copy of an earlier original.
struct Corpus<'a> {
    words: &'a Words,
    args: &'a GenDocs,
}

impl Corpus<'_> {
    /// The original `i` is near-duplicated by a later document, or `i` is a copy: `Some`
    /// of the original's index and the share of words edited.
    fn planted(&self, i: u64) -> Option<(u64, f64)> {
        let h = mix(self.args.seed ^ 0x706c_616e_7465_6421 ^ mix(i));
        if i == 0 || (h >> 11) as f64 / (1u64 << 53) as f64 >= self.args.planted {
            return None;
        }
        // An earlier document that is itself no copy, near (as crawls revisit pages)
        // or anywhere.
        let mut g = mix(h);
        for _ in 0..8 {
            g = mix(g);
            let back = if g & 1 == 0 {
                1 + (g >> 1) % 1000
            } else {
                1 + (g >> 1) % i
            };
            let j = i.saturating_sub(back);
            if self.planted(j).is_none() {
                let edit = self.args.max_edit * ((mix(g) >> 11) as f64 / (1u64 << 53) as f64);
                return Some((j, edit));
            }
        }
        None
    }

    /// The words of original `i`.
    fn original(&self, i: u64) -> Vec<&str> {
        let mut out = Vec::with_capacity(self.args.doc_bytes / 5);
        let mut bytes = 0;
        let mut h = mix(self.args.seed ^ mix(i ^ 0x6f72_6967));
        while bytes < self.args.doc_bytes {
            h = mix(h);
            let w = self.words.pick(h);
            bytes += w.len() + 1;
            out.push(w);
        }
        out
    }

    /// The text of document `i`, and for a copy its original's index and text.
    fn text(&self, i: u64) -> (String, Option<(u64, String)>) {
        match self.planted(i) {
            None => (join(&self.original(i)), None),
            Some((j, edit)) => {
                let original = self.original(j);
                let mut words = original.clone();
                let mut h = mix(self.args.seed ^ mix(i ^ 0x6564_6974));
                let threshold = (edit * u32::MAX as f64) as u64;
                for w in words.iter_mut() {
                    h = mix(h);
                    if (h >> 32) < threshold {
                        *w = self.words.pick(mix(h));
                    }
                }
                (join(&words), Some((j, join(&original))))
            }
        }
    }
}

/// Words as a text: sentences of 8 to 23 words, a full stop and a capital each, and a
/// paragraph break now and then.
fn join(words: &[&str]) -> String {
    let mut out = String::with_capacity(words.iter().map(|w| w.len() + 1).sum::<usize>() + 16);
    let mut left = 0u64;
    let mut h = words.len() as u64;
    for (k, w) in words.iter().enumerate() {
        if left == 0 {
            if k > 0 {
                h = mix(h);
                out.push_str(if h.is_multiple_of(7) { ".\n\n" } else { ". " });
            }
            h = mix(h);
            left = 8 + h % 16;
            let mut chars = w.chars();
            if let Some(c) = chars.next() {
                out.push(c.to_ascii_uppercase());
                out.push_str(chars.as_str());
            }
        } else {
            out.push(' ');
            out.push_str(w);
        }
        left -= 1;
    }
    out.push('.');
    out
}

/// Runs `neardup bench gen-docs`.
pub fn gen_docs(args: &GenDocs) -> Result<(), Failure> {
    if !(0.0..=0.5).contains(&args.planted) || !(0.0..=1.0).contains(&args.max_edit) {
        return Err(Failure::input(anyhow!(
            "--planted must be in [0, 0.5] and --max-edit in [0, 1]"
        )));
    }
    let started = Instant::now();
    let words = Words::new(args.seed);
    let corpus = Corpus {
        words: &words,
        args,
    };
    let shards = u64::from(args.shards.max(1));
    let paths: Vec<String> = if args.shards == 0 {
        vec![args.output.clone()]
    } else {
        std::fs::create_dir_all(&args.output).map_err(|e| {
            Failure::input(anyhow!("cannot make the directory '{}': {e}", args.output))
        })?;
        (0..shards)
            .map(|s| {
                Path::new(&args.output)
                    .join(format!("docs-{s:05}.jsonl.zst"))
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    };
    let per = args.n.div_ceil(shards);
    let results: Vec<Result<(u64, Vec<String>), Failure>> = paths
        .par_iter()
        .enumerate()
        .map(|(s, path)| {
            let (from, to) = (s as u64 * per, ((s as u64 + 1) * per).min(args.n));
            write_shard(&corpus, path, from..to, args)
        })
        .collect();
    let mut bytes = 0;
    let mut truth = Vec::new();
    for r in results {
        let (b, t) = r?;
        bytes += b;
        truth.extend(t);
    }
    if let Some(path) = &args.truth {
        let mut out = std::fs::File::create(path)
            .map(std::io::BufWriter::new)
            .map_err(|e| Failure::input(anyhow!("cannot create '{path}': {e}")))?;
        for line in &truth {
            writeln!(out, "{line}")
                .map_err(|e| Failure::io(anyhow!("cannot write '{path}': {e}")))?;
        }
        out.flush()
            .map_err(|e| Failure::io(anyhow!("cannot write '{path}': {e}")))?;
    }
    let seconds = started.elapsed().as_secs_f64();
    crate::note!(
        "{}",
        json!({
            "documents": args.n,
            "planted": truth.len(),
            "text_bytes": bytes,
            "seconds": (seconds * 1000.0).round() / 1000.0,
            "documents_per_s": (args.n as f64 / seconds).round(),
        })
    );
    Ok(())
}

/// Writes documents `range` to `path` (zstd when it ends in `.zst`); the bytes of text,
/// and the truth lines of its planted documents.
fn write_shard(
    corpus: &Corpus<'_>,
    path: &str,
    range: std::ops::Range<u64>,
    args: &GenDocs,
) -> Result<(u64, Vec<String>), Failure> {
    let file = std::fs::File::create(path)
        .map_err(|e| Failure::input(anyhow!("cannot create '{path}': {e}")))?;
    let failed = |e: std::io::Error| Failure::io(anyhow!("cannot write '{path}': {e}"));
    let mut out: Box<dyn Write> = if path.ends_with(".zst") {
        let enc = zstd::Encoder::new(file, args.level).map_err(failed)?;
        Box::new(std::io::BufWriter::with_capacity(
            1 << 20,
            enc.auto_finish(),
        ))
    } else {
        Box::new(std::io::BufWriter::with_capacity(1 << 20, file))
    };
    let mut bytes = 0u64;
    let mut truth = Vec::new();
    let mut line = Vec::with_capacity(args.doc_bytes * 2);
    for i in range {
        let (text, copy_of) = corpus.text(i);
        bytes += text.len() as u64;
        line.clear();
        serde_json::to_writer(&mut line, &json!({"id": format!("doc-{i}"), "text": text}))
            .map_err(|e| Failure::io(anyhow!("{e}")))?;
        line.push(b'\n');
        out.write_all(&line).map_err(failed)?;
        if let Some((j, original)) = copy_of {
            let similarity = jaccard::exact(
                &jaccard::shingle_set(&original),
                &jaccard::shingle_set(&text),
            );
            truth.push(
                json!({"a": format!("doc-{j}"), "b": format!("doc-{i}"), "jaccard": similarity})
                    .to_string(),
            );
        }
    }
    out.flush().map_err(failed)?;
    drop(out);
    Ok((bytes, truth))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(n: u64) -> GenDocs {
        GenDocs {
            n,
            doc_bytes: 1000,
            planted: 0.1,
            max_edit: 0.04,
            seed: 3,
            output: String::new(),
            shards: 0,
            truth: None,
            level: 1,
        }
    }

    #[test]
    fn copies_are_near_their_originals_and_texts_are_of_the_size_asked() {
        let a = args(5000);
        let words = Words::new(a.seed);
        let corpus = Corpus {
            words: &words,
            args: &a,
        };
        let (mut copies, mut sims) = (0, Vec::new());
        for i in 0..a.n {
            let (text, copy) = corpus.text(i);
            assert!((900..1300).contains(&text.len()), "{}", text.len());
            // The same seed, the same text.
            assert_eq!(corpus.text(i).0, text);
            if let Some((j, original)) = copy {
                assert!(j < i && corpus.planted(j).is_none());
                copies += 1;
                sims.push(jaccard::exact(
                    &jaccard::shingle_set(&original),
                    &jaccard::shingle_set(&text),
                ));
            }
        }
        assert!((350..650).contains(&copies), "{copies}");
        sims.sort_by(f64::total_cmp);
        // From identical copies to pairs below the usual thresholds.
        assert!(sims[sims.len() - 1] == 1.0 && sims[0] < 0.75, "{sims:?}");
    }
}
