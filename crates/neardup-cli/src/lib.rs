//! The pieces shared by the `neardup` binary and the drop-in `simhash-find-all` /
//! `simhash-find-clusters`: reading fingerprints, writing results, progress, and the
//! find-all / find-clusters job itself. All I/O of the project lives here, at the edge;
//! the `neardup` crate does the work.

pub mod bench;
pub mod dedup;
pub mod docs;
pub mod eval;
pub mod failure;
pub mod find;
pub mod fingerprint;
pub mod fpconfig;
pub mod index;
pub mod input;
pub mod memory;
pub mod output;
#[cfg(feature = "parquet")]
mod parquet_guard;
pub mod progress;
pub mod redis;
pub mod report;
mod rng;
pub mod serve;
pub mod truth;

pub use failure::Failure;
