//! HTML reports: one self-contained page (inline CSS and SVG, no script, nothing loaded
//! from the network) that shows what a run did, for a person to review.
//!
//! - [`dedup`]: `neardup dedup --report`: the summary, histograms of cluster sizes and of
//!   the similarity of removed documents, counts per source, and the removed documents
//!   beside their kept ones with the word differences marked. It is made from bounded
//!   samples, chosen after matching and filled in during the second pass over the input,
//!   so its size and cost do not grow with the corpus.
//! - [`eval`]: `neardup eval --report`: the evaluation's tables, and precision and recall
//!   plotted against the threshold (or the distance).
//!
//! Pages are [minijinja] templates (`templates/`) over plain data; plots are SVG drawn
//! by the templates from coordinates `plot` computes. Every value is HTML-escaped on
//! the way out (texts from a corpus may hold markup), and the page's Content Security
//! Policy forbids scripts and network loads in any case.

pub mod dedup;
mod diff;
pub mod eval;
mod page;
mod plot;
mod sources;
