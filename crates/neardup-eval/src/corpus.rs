//! A document corpus of any size, written fast from a seed, with planted near-duplicates
//! and their exact Jaccard similarity (`neardup bench gen-docs`): the workload of the 100M
//! dedup and service runs (docs/dedup.md, docs/service.md), streamed into zstd shards or
//! a pipe so that no 100 GB file lands on disk.
//!
//! Words follow a Zipf law over a vocabulary of made-up words, so that shingles repeat
//! across documents as they do in text. A planted document is a copy of an earlier
//! original with a share of its words replaced (0 to `--max-edit`, uniform), so its
//! similarity to the original spreads from 1 down past the usual thresholds; the truth
//! lists each planted pair with its exact Jaccard similarity under neardup's words.

use std::io::Write;
use std::path::Path;

use neardup::jaccard;
use rayon::prelude::*;
use serde_json::json;

use crate::splitmix::mix;
use crate::Error;

/// What corpus to write: documents `first..n` of the corpus of `seed`.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Documents in all.
    pub n: u64,
    /// Write documents from this one on (the same seed makes the same documents).
    pub first: u64,
    /// Bytes of text a document has, about.
    pub doc_bytes: usize,
    /// The share of documents that are near-duplicates of an earlier one, in [0, 0.5].
    pub planted: f64,
    /// A planted copy has up to this share of its words replaced, in [0, 1].
    pub max_edit: f64,
    /// The seed: the same seed writes the same corpus.
    pub seed: u64,
    /// zstd level of `.zst` files.
    pub level: i32,
}

/// What was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// Bytes of text (not of JSON).
    pub bytes: u64,
    /// Planted documents, one truth line each.
    pub planted: u64,
}

/// Words of the vocabulary.
const VOCABULARY: usize = 50_000;

/// The made-up words and a Zipf table over them.
struct Words {
    words: Vec<String>,
    /// Cumulative weights scaled to u32, for sampling by a binary search.
    cumulative: Vec<u32>,
    /// Per value of a draw's top [`GUIDE_BITS`] bits, the range of `cumulative` its
    /// binary search can end in: the search then takes a few steps, not sixteen.
    guide: Vec<(u32, u32)>,
}

/// Top bits of a draw that pick its range of the cumulative table.
const GUIDE_BITS: u32 = 16;

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
            .collect::<Vec<u32>>();
        // Draws with top bits `t` lie in [t << s, (t + 1) << s): their search ends between
        // the searches of those two ends.
        let shift = 32 - GUIDE_BITS;
        let guide = (0..1u64 << GUIDE_BITS)
            .map(|t| {
                let lo = (t << shift) as u32;
                let hi = (((t + 1) << shift) - 1) as u32;
                let from = cumulative.partition_point(|&c| c < lo);
                let to = cumulative.partition_point(|&c| c < hi);
                (from as u32, (to + 1).min(cumulative.len()) as u32)
            })
            .collect();
        Words {
            words,
            cumulative,
            guide,
        }
    }

    fn pick(&self, r: u64) -> &str {
        let x = r as u32;
        let (from, to) = self.guide[(x >> (32 - GUIDE_BITS)) as usize];
        let (from, to) = (from as usize, to as usize);
        let i = from + self.cumulative[from..to].partition_point(|&c| c < x);
        &self.words[i.min(VOCABULARY - 1)]
    }
}

/// The corpus: document `i` is an original (text from the seed and `i`) or, by the seed, a
/// planted copy of an earlier original.
struct Corpus<'a> {
    words: &'a Words,
    args: &'a Settings,
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

/// Writes the corpus to `output`: one file (zstd when it ends in `.zst`), or with `shards`
/// above 0 a directory of that many shards `docs-NNNNN.jsonl.zst`, written in parallel.
/// With `truth`, the planted pairs go there: `{"a", "b", "jaccard"}` per line, `a` the
/// original.
pub fn write_files(
    args: &Settings,
    output: &str,
    shards: u32,
    truth: Option<&str>,
) -> Result<Written, Error> {
    let words = Words::new(args.seed);
    let corpus = Corpus {
        words: &words,
        args,
    };
    let paths: Vec<String> = if shards == 0 {
        vec![output.to_string()]
    } else {
        std::fs::create_dir_all(output).map_err(|error| Error::Directory {
            path: output.into(),
            error,
        })?;
        (0..shards)
            .map(|s| {
                Path::new(output)
                    .join(format!("docs-{s:05}.jsonl.zst"))
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    };
    let shards = u64::from(shards.max(1));
    let first = args.first.min(args.n);
    let per = (args.n - first).div_ceil(shards);
    let results: Vec<Result<(u64, Vec<String>), Error>> = paths
        .par_iter()
        .enumerate()
        .map(|(s, path)| {
            let from = (first + s as u64 * per).min(args.n);
            let to = (first + (s as u64 + 1) * per).min(args.n);
            write_shard(&corpus, path, from..to, args)
        })
        .collect();
    let mut bytes = 0;
    let mut lines = Vec::new();
    for r in results {
        let (b, t) = r?;
        bytes += b;
        lines.extend(t);
    }
    if let Some(path) = truth {
        let mut out = create(path)?;
        for line in &lines {
            writeln!(out, "{line}").map_err(write_error(path))?;
        }
        out.flush().map_err(write_error(path))?;
    }
    Ok(Written {
        bytes,
        planted: lines.len() as u64,
    })
}

/// `path` created, buffered.
fn create(path: &str) -> Result<std::io::BufWriter<std::fs::File>, Error> {
    std::fs::File::create(path)
        .map(|f| std::io::BufWriter::with_capacity(1 << 20, f))
        .map_err(|error| Error::Create {
            path: path.into(),
            error,
        })
}

/// A failed write to `path`.
fn write_error(path: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |error| Error::Write {
        path: path.into(),
        error,
    }
}

/// Writes documents `range` to `path` (zstd when it ends in `.zst`); the bytes of text,
/// and the truth lines of its planted documents.
fn write_shard(
    corpus: &Corpus<'_>,
    path: &str,
    range: std::ops::Range<u64>,
    args: &Settings,
) -> Result<(u64, Vec<String>), Error> {
    let file = std::fs::File::create(path).map_err(|error| Error::Create {
        path: path.into(),
        error,
    })?;
    let failed = write_error(path);
    let mut out: Box<dyn Write> = if path.ends_with(".zst") {
        let enc = zstd::Encoder::new(file, args.level).map_err(&failed)?;
        Box::new(std::io::BufWriter::with_capacity(
            1 << 20,
            enc.auto_finish(),
        ))
    } else {
        Box::new(std::io::BufWriter::with_capacity(1 << 20, file))
    };
    let mut bytes = 0u64;
    let mut truth = Vec::new();
    let mut lines = Vec::with_capacity(args.doc_bytes * 2 * CHUNK as usize);
    let mut at = range.start;
    while at < range.end {
        let to = (at + CHUNK).min(range.end);
        lines.clear();
        bytes += render(corpus, at..to, &mut lines, &mut truth);
        out.write_all(&lines).map_err(&failed)?;
        at = to;
    }
    out.flush().map_err(&failed)?;
    drop(out);
    Ok((bytes, truth))
}

/// Documents rendered at a time by one thread.
const CHUNK: u64 = 1024;

/// Appends the JSON lines of documents `range` to `out` and the truth lines of its planted
/// documents to `truth`; the bytes of text.
fn render(
    corpus: &Corpus<'_>,
    range: std::ops::Range<u64>,
    out: &mut Vec<u8>,
    truth: &mut Vec<String>,
) -> u64 {
    let mut bytes = 0u64;
    for i in range {
        let (text, copy_of) = corpus.text(i);
        bytes += text.len() as u64;
        // As serde_json writes {"id": …, "text": …}: its keys in order, the text escaped.
        out.extend_from_slice(b"{\"id\":\"doc-");
        out.extend_from_slice(i.to_string().as_bytes());
        out.extend_from_slice(b"\",\"text\":");
        // Writing a string into a vector cannot fail.
        let _ = serde_json::to_writer(&mut *out, &text);
        out.extend_from_slice(b"}\n");
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
    bytes
}

/// Writes the whole corpus to standard output, in order, as it is made (so that a reader
/// can take it from a pipe and no corpus lands on disk): windows of chunks made on every
/// core, written as each window is done; the truth, if asked for, written as it comes.
pub fn write_stdout(args: &Settings, truth_path: Option<&str>) -> Result<Written, Error> {
    let words = Words::new(args.seed);
    let corpus = &Corpus {
        words: &words,
        args,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    let failed = |error: std::io::Error| Error::Stdout { error };
    let mut truth = truth_path.map(create).transpose()?;
    let window = CHUNK * 4 * rayon::current_num_threads() as u64;
    let (mut bytes, mut planted) = (0u64, 0u64);
    let mut at = args.first;
    while at < args.n {
        let end = (at + window).min(args.n);
        let starts: Vec<u64> = (at..end).step_by(CHUNK as usize).collect();
        let chunks: Vec<(Vec<u8>, u64, Vec<String>)> = starts
            .par_iter()
            .map(|&from| {
                let mut lines = Vec::with_capacity(args.doc_bytes * 2 * CHUNK as usize);
                let mut found = Vec::new();
                let b = render(
                    corpus,
                    from..(from + CHUNK).min(end),
                    &mut lines,
                    &mut found,
                );
                (lines, b, found)
            })
            .collect();
        for (lines, b, found) in chunks {
            out.write_all(&lines).map_err(failed)?;
            bytes += b;
            planted += found.len() as u64;
            if let (Some(t), Some(path)) = (truth.as_mut(), truth_path) {
                for line in found {
                    writeln!(t, "{line}").map_err(write_error(path))?;
                }
            }
        }
        at = end;
    }
    out.flush().map_err(failed)?;
    if let (Some(t), Some(path)) = (truth.as_mut(), truth_path) {
        t.flush().map_err(write_error(path))?;
    }
    Ok(Written { bytes, planted })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(n: u64) -> Settings {
        Settings {
            n,
            first: 0,
            doc_bytes: 1000,
            planted: 0.1,
            max_edit: 0.04,
            seed: 3,
            level: 1,
        }
    }

    /// The guided pick is the binary search over the whole table, for draws at every
    /// guide bucket's edges and at random.
    #[test]
    fn guided_picks_are_the_plain_search() {
        let words = Words::new(5);
        let plain = |x: u32| {
            let i = words.cumulative.partition_point(|&c| c < x);
            words.words[i.min(VOCABULARY - 1)].as_str()
        };
        let mut draws: Vec<u64> = (0..1u64 << GUIDE_BITS)
            .flat_map(|t| {
                let lo = t << (32 - GUIDE_BITS);
                [lo, lo + (1 << (32 - GUIDE_BITS)) - 1]
            })
            .collect();
        draws.extend((0..200_000u64).map(mix));
        draws.extend(words.cumulative.iter().flat_map(|&c| {
            let c = u64::from(c);
            [c.saturating_sub(1), c, c + 1]
        }));
        for r in draws {
            let x = r as u32;
            assert_eq!(words.pick(u64::from(x)), plain(x), "draw {x}");
        }
    }

    /// Rendered lines are what serde_json writes of {"id", "text"}.
    #[test]
    fn rendered_lines_are_json() {
        let a = args(300);
        let words = Words::new(a.seed);
        let corpus = Corpus {
            words: &words,
            args: &a,
        };
        let (mut out, mut truth) = (Vec::new(), Vec::new());
        render(&corpus, 0..300, &mut out, &mut truth);
        let lines: Vec<&[u8]> = out
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), 300);
        for (i, line) in lines.iter().enumerate() {
            let want = serde_json::to_vec(
                &json!({"id": format!("doc-{i}"), "text": corpus.text(i as u64).0}),
            )
            .unwrap();
            assert_eq!(*line, &want[..]);
        }
        assert!(!truth.is_empty());
    }

    /// Shards are the one file cut in order, compressed; the truth is the same.
    #[test]
    fn shards_are_the_file_cut_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
        let a = Settings {
            first: 37,
            doc_bytes: 300,
            ..args(700)
        };
        let one = write_files(&a, &path("one.jsonl"), 0, Some(&path("t1"))).unwrap();
        let cut = write_files(&a, &path("shards"), 3, Some(&path("t3"))).unwrap();
        assert_eq!(one, cut);
        assert!(one.planted > 0);
        let mut joined = Vec::new();
        for s in 0..3 {
            let shard = std::fs::read(path(&format!("shards/docs-{s:05}.jsonl.zst"))).unwrap();
            joined.extend(zstd::decode_all(&shard[..]).unwrap());
        }
        let whole = std::fs::read(path("one.jsonl")).unwrap();
        assert_eq!(joined, whole);
        assert_eq!(whole.split(|&b| b == b'\n').count() - 1, 700 - 37);
        assert_eq!(
            std::fs::read(path("t1")).unwrap(),
            std::fs::read(path("t3")).unwrap()
        );
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
