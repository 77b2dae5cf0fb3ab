//! The stored format: fingerprints of fixed texts, computed by the independent Python
//! implementation in `tests/pins/make_pins.py`. A change to any of them is a change of the
//! format and must bump `fingerprint::VERSION` (and regenerate the pins).

use std::collections::HashMap;
use std::sync::Arc;

use neardup::fingerprint::{Fingerprinter, Tokenizer, Weighting, VERSION};
use serde_json::Value;

mod pins;

fn pins() -> Vec<Value> {
    pins::load("pins.json")
}

fn fingerprinter(case: &Value) -> Fingerprinter {
    let tok = case["tokenizer"].as_array().unwrap();
    let tokenizer = match tok[0].as_str().unwrap() {
        "words" => Tokenizer::UnicodeWords,
        "ascii" => Tokenizer::AsciiLetters,
        "char" => Tokenizer::CharNgrams(tok[1].as_u64().unwrap() as usize),
        t => panic!("tokenizer {t}"),
    };
    let w = case["weighting"].as_array().unwrap();
    let weighting = match w[0].as_str().unwrap() {
        "none" => Weighting::None,
        "tf" => Weighting::Tf,
        "custom" => {
            let map: HashMap<String, f32> = w[1]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_f64().unwrap() as f32))
                .collect();
            Weighting::Custom(Arc::new(map))
        }
        "lenpos" => Weighting::LenPos {
            lambda: w[1].as_f64().unwrap() as f32,
        },
        x => panic!("weighting {x}"),
    };
    Fingerprinter::builder()
        .tokenizer(tokenizer)
        .window(case["window"].as_u64().unwrap() as usize)
        .weighting(weighting)
        .build()
        .unwrap()
}

#[test]
fn fingerprints_are_pinned() {
    // pins.json was made for format version 2.
    assert_eq!(VERSION, 2);
    let pins = pins();
    assert!(pins.len() >= 10);
    for case in &pins {
        let fp = fingerprinter(case);
        let text = case["text"].as_str().unwrap();
        let expected: u64 = case["fingerprint"].as_str().unwrap().parse().unwrap();
        assert_eq!(fp.fingerprint(text), expected, "{}", case["name"]);
        let wide: Vec<u64> = case["wide"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().parse().unwrap())
            .collect();
        assert_eq!(fp.fingerprint_wide(text).to_vec(), wide, "{}", case["name"]);
    }
}

#[test]
fn default_config_is_the_first_pin() {
    let pins = pins();
    let text = pins[0]["text"].as_str().unwrap();
    let expected: u64 = pins[0]["fingerprint"].as_str().unwrap().parse().unwrap();
    assert_eq!(Fingerprinter::default().fingerprint(text), expected);
}
