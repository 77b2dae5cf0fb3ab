//! # neardup
//!
//! Near-duplicate detection with 64-bit simhash fingerprints.
//!
//! A document's fingerprint is the bitwise majority vote of the hashes of its features
//! (shingles of tokens), so similar documents get fingerprints that differ in few bits.
//! Finding all fingerprints within `k` bits of each other uses the tables of Manku, Jain
//! and Das Sarma (WWW 2007): cut the 64 bits into `m > k` blocks; two fingerprints within
//! `k` bits agree on at least `m − k` blocks; so for each choice of `m − k` leading blocks
//! sort the fingerprints with those blocks first, and compare only neighbours that share
//! them ([`tables`], [`batch`]).
//!
//! ```
//! use neardup::batch::{self, Distinct, Matcher};
//! use neardup::fingerprint::compat::text_fingerprint;
//! use neardup::tables::Blocks;
//!
//! let docs = ["the cat sat on the mat", "the cat sat on the mat!", "dogs bark at night"];
//! let fps: Vec<u64> = docs.iter().map(|d| text_fingerprint(d)).collect();
//! let layout = batch::layout(Blocks::Auto, fps.len(), 3)?;
//! let mut pairs = Vec::new();
//! Matcher::new(layout).find_all(&Distinct::from_slice(&fps)?, |a, b| {
//!     pairs.push((a, b));
//!     Ok::<(), neardup::Error>(())
//! })?;
//! // Punctuation is not a feature: the first two documents share one fingerprint, which
//! // seomoz semantics (distinct values) do not report as a pair.
//! assert_eq!(fps[0], fps[1]);
//! assert!(pairs.is_empty());
//! # Ok::<(), neardup::Error>(())
//! ```
//!
//! The crate is pure and synchronous: no I/O, no global state. Parallelism (rayon) is the
//! default `rayon` feature; results do not depend on it.
#![warn(missing_docs)]

pub mod arch;
pub mod batch;
mod bmp;
mod classify;
pub mod corpus;
pub mod decide;
mod error;
pub mod fingerprint;
pub mod hamming;
mod hint;
pub mod jaccard;
mod par;
pub mod tables;

pub use error::{Error, Result};
pub use par::{lower_priority, thread_nice, LOWER_NICE};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
