//! Signing speed: the Jaccard sketch and band keys (`sketch`), the default 64-bit
//! fingerprint (`fingerprint`), the 256-bit one (`wide`), or both as a stored signature
//! has them (`signature`) of every text of a JSON-lines corpus, texts in memory.
//! `shared` measures a proposal (docs/dedup.md): the sketch, and four simhash lanes voted
//! from the sketch's own shingle hashes in place of the 256-bit fingerprint.
//!
//! ```bash
//! cargo run --release -p neardup --example sketch_speed -- sketch corpus.jsonl 3
//! ```
//!
//! Arguments: what to sign, the corpus (one `{"text": ...}` object a line), the passes.
//! Prints the MB/s of the best pass and a checksum of every output, so two builds can be
//! compared for speed and for identical results. Not a test: figures for the signing
//! kernels.

use std::time::Instant;

use neardup::fingerprint::Fingerprinter;
use neardup::jaccard::{Banding, Sketch, Threshold};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_else(|| "sketch".into());
    let path = args
        .next()
        .ok_or("usage: sketch_speed sketch|fingerprint CORPUS [PASSES]")?;
    let passes: usize = args.next().unwrap_or_else(|| "3".into()).parse()?;
    let mut texts = Vec::new();
    for line in std::fs::read_to_string(&path)?.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        if let Some(t) = v.get("text").and_then(|t| t.as_str()) {
            texts.push(t.to_owned());
        }
    }
    let bytes: usize = texts.iter().map(String::len).sum();
    let banding = Banding::for_threshold(Threshold::default());
    let fp = Fingerprinter::builder().build()?;
    let mut best = f64::INFINITY;
    let mut sum = 0u64;
    for _ in 0..passes {
        let t = Instant::now();
        sum = 0;
        for text in &texts {
            let h = match what.as_str() {
                "sketch" => {
                    let (s, keys) = Sketch::of_text_with_bands(text, banding);
                    let b = s.to_bytes();
                    let mut h = xxhash_rust::xxh3::xxh3_64(&b);
                    for k in keys {
                        h = h.rotate_left(7) ^ u64::from(k);
                    }
                    h
                }
                "fingerprint" => fp.fingerprint(text),
                "signature" => {
                    let (s, keys) = Sketch::of_text_with_bands(text, banding);
                    let wide = fp.fingerprint_wide(text);
                    let h = xxhash_rust::xxh3::xxh3_64(&s.to_bytes()) ^ u64::from(keys[0]);
                    wide.iter().fold(h, |h, &l| h.rotate_left(9) ^ l)
                }
                "shared" => {
                    let mut hashes = Vec::with_capacity(text.len() / 5);
                    neardup::jaccard::shingle_hashes(text, |h| hashes.push(h));
                    let (s, keys) = Sketch::with_bands(hashes.iter().copied(), banding);
                    let mut h = xxhash_rust::xxh3::xxh3_64(&s.to_bytes()) ^ u64::from(keys[0]);
                    h = h.rotate_left(9) ^ neardup::fingerprint::simhash(&hashes);
                    let mut mixed = Vec::with_capacity(hashes.len());
                    for lane in 1..4u64 {
                        let c = lane.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                        mixed.clear();
                        mixed.extend(hashes.iter().map(|&x| {
                            let z = (x ^ c ^ ((x ^ c) >> 33)).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
                            z ^ (z >> 33)
                        }));
                        h = h.rotate_left(9) ^ neardup::fingerprint::simhash(&mixed);
                    }
                    h
                }
                "wide" => fp
                    .fingerprint_wide(text)
                    .iter()
                    .fold(0u64, |h, &l| h.rotate_left(9) ^ l),
                _ => return Err(format!("unknown kind {what}").into()),
            };
            sum = sum.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(h);
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "{what}: {} texts, {:.1} MB, best {:.3} s, {:.1} MB/s, checksum {sum:016x}",
        texts.len(),
        bytes as f64 / 1e6,
        best,
        bytes as f64 / 1e6 / best
    );
    Ok(())
}
