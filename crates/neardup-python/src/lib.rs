//! The native part of the `neardup` Python package (`neardup._neardup`).
//!
//! Python code imports it through `neardup.simhash`, which adds `shingle` (a plain Python
//! generator) and the docs users read. Everything here turns Python values into `u64`s
//! with clear exceptions, then runs the core with the GIL released where the work can be
//! long.

mod convert;
mod simhash;

use pyo3::prelude::*;

/// Native part of neardup; import `neardup.simhash` instead.
#[pymodule(name = "_neardup")]
mod native {
    #[pymodule_export]
    use crate::simhash::{compute, find_all, num_differing_bits, unsigned_hash, Corpus};
}
