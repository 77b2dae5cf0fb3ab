//! The stored sketch format: sketches and band keys of fixed texts, computed by the
//! independent Python implementation in `tests/pins/make_sketch_pins.py`. A change to any
//! of them is a change of the format and must bump `jaccard::SKETCH_VERSION` (and
//! regenerate the pins).

use neardup::jaccard::{self, Banding, Sketch, Threshold, SKETCH_VERSION};
use serde_json::Value;

mod pins;

fn pins() -> Vec<Value> {
    pins::load("sketch_pins.json")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn sketches_are_pinned() {
    // sketch_pins.json was made for sketch format version 2.
    assert_eq!(SKETCH_VERSION, 2);
    let pins = pins();
    assert!(pins.len() >= 20);
    for pin in &pins {
        let name = pin["name"].as_str().unwrap();
        let text = pin["text"].as_str().unwrap();
        assert_eq!(
            jaccard::shingle_set(text).len() as u64,
            pin["shingles"].as_u64().unwrap(),
            "{name}"
        );
        for case in pin["cases"].as_array().unwrap() {
            let t = Threshold::new(case["threshold"].as_f64().unwrap()).unwrap();
            let banding = Banding::for_threshold(t);
            assert_eq!(
                banding.rows() as u64,
                case["rows"].as_u64().unwrap(),
                "{name}"
            );
            let (sketch, keys) = Sketch::of_text_with_bands(text, banding);
            let t = t.get();
            assert_eq!(hex(&sketch.to_bytes()), case["sketch"], "{name} at {t}");
            let want: Vec<u64> = case["keys"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k.as_u64().unwrap())
                .collect();
            let got: Vec<u64> = keys.iter().map(|&k| u64::from(k)).collect();
            assert_eq!(got, want, "{name} at {t}");
            assert_eq!(Sketch::of_text(text), sketch, "{name}");
        }
    }
}
