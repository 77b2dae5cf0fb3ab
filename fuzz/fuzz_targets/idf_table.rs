//! Idf tables (`--idf FILE`, Python's `Idf.from_bytes`): any bytes are a table or an
//! error; a table writes back to bytes that read as the same table, and weighs texts.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use neardup::fingerprint::{Fingerprinter, Idf, Weighting};

const TEXT: &str = "the quick brown fox jumps over the lazy dog, the quick brown fox again";

fuzz_target!(|data: &[u8]| {
    let Ok(idf) = Idf::from_bytes(data) else {
        return;
    };
    let bytes = idf.to_bytes();
    let again = Idf::from_bytes(&bytes).expect("a table's own bytes read back");
    assert_eq!(again, idf);
    for feature in [0, 1, u64::MAX] {
        assert!(idf.idf(feature).is_finite());
    }
    let fp = Fingerprinter::builder()
        .weighting(Weighting::TfIdf(Arc::new(idf)))
        .build()
        .expect("tfidf with any table is a configuration");
    assert_eq!(fp.fingerprint(TEXT), fp.fingerprint(TEXT));
});
