//! The multi-script words against their reference, `cjkwords.py` of the natural CJK
//! corpus (tests/words/make_vectors.py writes these files from it): the table of
//! spaceless characters, and the words of hand-picked and random texts.

use neardup::fingerprint::SEED;
use neardup::jaccard::{is_spaceless, word_hashes};
use serde_json::Value;
use xxhash_rust::xxh3::xxh3_64_with_seed;

fn read(name: &str) -> String {
    let path = format!("{}/tests/words/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn spaceless_characters_are_the_reference_table() {
    let table: Vec<(u32, u32)> = serde_json::from_str(&read("spaceless.json")).unwrap();
    assert!(table.len() > 50);
    let mut r = 0;
    for cp in 0..=0x10_FFFFu32 {
        while r < table.len() && table[r].1 < cp {
            r += 1;
        }
        let want = r < table.len() && table[r].0 <= cp;
        if let Some(c) = char::from_u32(cp) {
            assert_eq!(is_spaceless(c), want, "U+{cp:04X}");
        }
    }
}

#[test]
fn words_are_the_reference_words() {
    let mut texts = 0;
    let mut spaceless = 0;
    for line in read("words.jsonl").lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let text = v["text"].as_str().unwrap();
        let words: Vec<&str> = v["words"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        let want: Vec<u64> = words
            .iter()
            .map(|w| xxh3_64_with_seed(w.as_bytes(), SEED))
            .collect();
        let mut got = Vec::new();
        word_hashes(text, |h| got.push(h));
        assert_eq!(got, want, "{text:?}: {words:?}");
        texts += 1;
        spaceless += words
            .iter()
            .filter(|w| w.chars().count() == 1 && w.chars().all(is_spaceless))
            .count();
    }
    // The vectors exercise the spaceless scripts, not only `\w` runs.
    assert!(
        texts > 2000 && spaceless > 10_000,
        "{texts} texts, {spaceless}"
    );
}
