//! # neardup-io
//!
//! Reading what neardup works on, and writing what it finds, in the formats of the field:
//! documents from JSON Lines, text files (one document each, or one per line), directories,
//! Parquet, gzip or zstd around any of them, or standard input ([`docs`]); 64-bit
//! fingerprints from decimal lists (simhash-cpp's format), little-endian files or
//! `neardup fingerprint`'s JSON lines ([`fingerprints`]); the weight tables a fingerprinter
//! may use ([`weights`]); and the result records: `[a,b]` arrays, clusters and pairs
//! lines ([`records`]).
//!
//! The one idea: inputs are large and the work on them parallel, so readers hand out
//! documents in input order, a batch at a time, and read plain files where they lie
//! (mapped into memory, cut at newlines in parallel), while memory stays bounded. Errors
//! name the file and the line (`docs.jsonl:7: not valid JSON: …`); [`Error::is_input`]
//! tells a bad input from a read that failed on the way. How far a read has come goes to
//! a [`Progress`] the caller implements (the `neardup` command line draws a bar).
//!
//! The core crate (`neardup`) does no I/O; the command line, the Python module and
//! `neardup.ray` read and write through this crate, so they read a line and write a
//! record alike, byte for byte.
//!
//! ```
//! use neardup_io::docs::{self, ReadOptions};
//! use neardup_io::records::{self, Member};
//! use neardup_io::{Error, NoProgress};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("docs.jsonl");
//! std::fs::write(
//!     &path,
//!     "{\"id\": \"a\", \"text\": \"the cat sat\"}\n{\"id\": 7, \"text\": \"the cat sat!\"}\n",
//! )?;
//! let options = ReadOptions::paths(vec![path.to_string_lossy().into_owned()]);
//!
//! let mut ids = Vec::new();
//! let stats = docs::read(&options, &NoProgress, |batch| {
//!     ids.extend(batch.into_iter().map(|doc| doc.id.to_string()));
//!     Ok::<(), Error>(())
//! })?;
//! assert_eq!(stats.docs, 2);
//! assert_eq!(ids, [r#""a""#, "7"]); // the ids as JSON
//!
//! // The two as a cluster, as `neardup dedup --clusters` writes it.
//! let mut line = String::new();
//! let members = [(ids[0].as_str(), 1.0, 0), (ids[1].as_str(), 0.8504, 12)]
//!     .map(|(id, similarity, distance)| Member { id, similarity, distance });
//! records::cluster_line(&mut line, 0, &ids[0], members.into_iter());
//! assert_eq!(
//!     line,
//!     r#"{"cluster":0,"size":2,"representative":"a","members":[{"id":"a","similarity":1,"distance":0},{"id":7,"similarity":0.85,"distance":12}]}"#
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod docs;
mod error;
pub mod fingerprints;
mod mapped;
mod panic;
#[cfg(feature = "parquet")]
mod parquet_guard;
mod progress;
pub mod records;
pub mod weights;

pub use error::Error;
pub use progress::{NoProgress, Progress};
