//! Token weight maps (`--weighting custom --weights FILE`): the bytes before the first NUL
//! are the file, the rest a text to fingerprint with it. Any file is weights or an error
//! naming it; any weights fingerprint any text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use neardup_cli::fpconfig::{FingerprintArgs, WeightingArg};
use neardup_fuzz::file;

fuzz_target!(|data: &[u8]| {
    let (weights, text) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b"the quick brown fox jumps over the lazy dog"[..]),
    };
    let path = file("weights.json", weights);
    let args = FingerprintArgs {
        weighting: Some(WeightingArg::Custom),
        weights: Some(path.clone()),
        lambda: 0.5,
        ..FingerprintArgs::default()
    };
    let fp = match args.fingerprinter() {
        Ok(fp) => fp,
        Err(e) => {
            let message = e.to_string();
            assert!(message.contains(&path), "{message} should name the file");
            return;
        }
    };
    let text = String::from_utf8_lossy(text);
    assert_eq!(fp.fingerprint(&text), fp.fingerprint(&text));
});
