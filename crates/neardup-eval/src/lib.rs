//! # neardup-eval
//!
//! Judging what neardup finds, by a person or against a known answer:
//!
//! - [`report`]: self-contained HTML pages for a person to review: what `neardup dedup`
//!   removed (made from bounded samples, so its cost does not grow with the corpus), and
//!   the tables and plots of `neardup eval`;
//! - [`corpus`]: a document corpus of any size made from a seed, with planted
//!   near-duplicates and their exact Jaccard similarity (`neardup bench gen-docs`, the
//!   workload of the 100M dedup and service runs);
//! - [`truth`]: scoring a dedup against such a truth, pair by pair (`neardup eval
//!   --truth`).
//!
//! The command line (`neardup-cli`) keeps the flags and the exit statuses: it hands this
//! crate plain settings and data, and turns its [`Error`] into its own.

pub mod corpus;
mod error;
pub mod report;
pub mod splitmix;
pub mod truth;

pub use error::Error;
