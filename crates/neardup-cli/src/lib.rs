//! The commands of the `neardup` binary and of the drop-in `simhash-find-all` /
//! `simhash-find-clusters`: their flags, outputs, progress and exit statuses, and the
//! find-all / find-clusters job itself. Inputs are read through `neardup-io`; the
//! `neardup` crate does the work; `neardup-eval` makes the HTML reports, the synthetic
//! corpus of `bench gen-docs` and the scores of `eval --truth`, and `neardup-store` /
//! `neardup-server` hold the stores and the service. Here their errors become exit
//! statuses ([`Failure`]).

pub mod bench;
pub mod dedup;
pub mod doc_args;
pub mod documents;
pub mod eval;
pub mod failure;
pub mod find;
pub mod fingerprint;
pub mod fpconfig;
pub mod gen_docs;
pub mod index;
pub mod lines;
pub mod load;
pub mod maintain;
pub mod memory;
pub mod output;
pub mod progress;
pub mod redis;
pub mod scale;
pub mod serve;
pub mod truth;

pub use failure::Failure;
