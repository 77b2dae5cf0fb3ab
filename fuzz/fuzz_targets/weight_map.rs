//! Token weight maps (`--weighting custom --weights FILE`): the bytes before the first NUL
//! are the file, the rest a text to fingerprint with it. Any file is weights or an error
//! naming it; any weights the core takes fingerprint any text, and the core refuses only
//! weights that are not finite and non-negative.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use neardup::fingerprint::{Config, Fingerprinter, Weighting};
use neardup_fuzz::file;
use neardup_io::weights::read_weights;

fuzz_target!(|data: &[u8]| {
    let (weights, text) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b"the quick brown fox jumps over the lazy dog"[..]),
    };
    let path = file("weights.json", weights);
    let weights = match read_weights(&path) {
        Ok(weights) => weights,
        Err(e) => {
            let message = e.to_string();
            assert!(message.contains(&path), "{message} should name the file");
            return;
        }
    };
    let all_valid = weights.values().all(|w| w.is_finite() && *w >= 0.0);
    // As `neardup --weighting custom --weights FILE` configures it.
    let config = Config {
        weighting: Weighting::Custom(Arc::new(weights)),
        ..Config::default()
    };
    let fp = match Fingerprinter::new(config) {
        Ok(fp) => fp,
        Err(e) => {
            assert!(
                !all_valid && matches!(e, neardup::Error::InvalidWeight { .. }),
                "valid weights refused: {e}"
            );
            return;
        }
    };
    let text = String::from_utf8_lossy(text);
    assert_eq!(fp.fingerprint(&text), fp.fingerprint(&text));
});
