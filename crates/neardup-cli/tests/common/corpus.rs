//! A corpus for the dedup tests, the same on every run.
// Each test crate uses what it needs of the shared module.
#![allow(dead_code)]

use serde_json::{json, Value};

/// splitmix64, for a corpus that is the same on every run.
pub fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Documents of every kind that matters to matching: originals, near-copies edited a
/// little or a lot (some near, some past the threshold, copies of copies so families
/// chain), exact copies (of originals and of edited copies), texts without words, texts
/// of fewer than five words, and unrelated texts; ids of mixed JSON types.
pub fn corpus(seed: u64, n: usize) -> Vec<Value> {
    let mut s = seed;
    let word = |s: &mut u64| format!("w{}", next(s) % 400);
    let mut texts: Vec<String> = Vec::new();
    for i in 0..n {
        let r = next(&mut s) % 100;
        let text = if texts.is_empty() || r < 40 {
            let len = 8 + (next(&mut s) % 60) as usize;
            (0..len).map(|_| word(&mut s)).collect::<Vec<_>>().join(" ")
        } else if r < 75 {
            // An edited copy of an earlier text: a share of its words replaced.
            let from = &texts[(next(&mut s) % texts.len() as u64) as usize];
            let rate = next(&mut s) % 12;
            from.split(' ')
                .map(|w| {
                    if next(&mut s) % 100 < rate {
                        word(&mut s)
                    } else {
                        w.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        } else if r < 88 {
            texts[(next(&mut s) % texts.len() as u64) as usize].clone()
        } else if r < 92 {
            ["", "...", " -- ", "?!"][(next(&mut s) % 4) as usize].to_string()
        } else {
            let len = 1 + (next(&mut s) % 4) as usize;
            (0..len).map(|_| word(&mut s)).collect::<Vec<_>>().join(" ")
        };
        texts.push(text);
        let _ = i;
    }
    texts
        .into_iter()
        .enumerate()
        .map(|(i, text)| match i % 3 {
            0 => json!({"id": format!("d{i}"), "text": text}),
            1 => json!({"id": i, "text": text}),
            _ => json!({"text": text}),
        })
        .collect()
}
