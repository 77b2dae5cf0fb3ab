//! The native part of the `neardup` Python package (`neardup._neardup`).
//!
//! Python code imports it through `neardup` (neardup's own API, from the `own` submodule)
//! and `neardup.simhash`, which adds `shingle` (a plain Python generator) and the docs
//! users read; the legacy fingerprints (`legacy`) are re-exported there too. Everything here turns Python values into `u64`s
//! with clear exceptions, then runs the core with the GIL released where the work can be
//! long.

mod convert;
mod corpus;
mod documents;
mod fingerprinter;
mod layout;
mod legacy;
mod own;
mod ray;
mod simhash;
mod store;
mod text;

use pyo3::prelude::*;

/// Native part of neardup; import `neardup` and `neardup.simhash` instead.
#[pymodule(name = "_neardup")]
mod native {
    #[pymodule_export]
    use crate::simhash::{compute, find_all, num_differing_bits, unsigned_hash, Corpus};

    #[pymodule_export]
    use crate::legacy::{
        cyclic3, hash, hash_fp, jenkins64, legacy_cpp_fingerprint, legacy_cpp_tokens,
    };

    use pyo3::prelude::*;

    /// neardup's own API, re-exported by the `neardup` package (a submodule, as its
    /// `find_all` and `Corpus` are not simhash-py's).
    #[pymodule]
    mod own {
        #[pymodule_export]
        use crate::corpus::Corpus;
        #[pymodule_export]
        use crate::documents::DocumentStore;
        #[pymodule_export]
        use crate::fingerprinter::{fingerprint, fingerprint_many, Fingerprinter, Idf};
        #[pymodule_export]
        use crate::layout::{Layout, Table};
        #[pymodule_export]
        use crate::own::{clusters, dedup, find_all};
        #[pymodule_export]
        use crate::store::{FingerprintStore, Reader};
    }

    /// The Rust half of `neardup.ray` (batch dedup as a Ray job); import `neardup.ray`.
    #[pymodule]
    mod ray {
        #[pymodule_export]
        use crate::ray::{
            assign, bucket_pairs, cluster_lines, measure, pick_jsonl, sign_jsonl, sign_texts,
            stored_matches,
        };
    }
}
