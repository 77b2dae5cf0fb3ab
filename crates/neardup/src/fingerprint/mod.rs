//! Fingerprints: the bit-voting kernel, and the seomoz-compatible pipelines in [`compat`].
//!
//! A simhash fingerprint is the bitwise majority vote of a document's feature hashes:
//! similar documents share most features, so their votes, and their fingerprints, differ
//! in few bits.

pub mod compat;
mod kernel;

pub use kernel::simhash;
