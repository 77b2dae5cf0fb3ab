//! The tables a fingerprinter may weigh its features with, read from their files: an idf
//! table (`neardup idf` writes it; `--weighting tfidf --idf FILE`) and a JSON object of
//! token weights (`--weighting custom --weights FILE`).

use std::collections::HashMap;

use neardup::fingerprint::Idf;

use crate::Error;

/// The idf table in the file at `path`.
pub fn read_idf(path: &str) -> Result<Idf, Error> {
    Idf::from_bytes(&read_file(path, "idf table")?).map_err(|error| Error::Idf {
        path: path.into(),
        error,
    })
}

/// The token weights in the file at `path`: a JSON object `{"token": weight, …}`. Whether
/// each weight is one the fingerprinter takes is the core's to say
/// (`neardup::Error::InvalidWeight`).
pub fn read_weights(path: &str) -> Result<HashMap<String, f32>, Error> {
    serde_json::from_slice(&read_file(path, "weights")?).map_err(|error| Error::Weights {
        path: path.into(),
        error,
    })
}

fn read_file(path: &str, what: &'static str) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|error| Error::Table {
        what,
        path: path.into(),
        error,
    })
}
