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
//! by the templates from coordinates [`plot`] computes. Every value is HTML-escaped on
//! the way out (texts from a corpus may hold markup), and the page's Content Security
//! Policy forbids scripts and network loads in any case.

pub mod dedup;
mod diff;
pub mod eval;
mod plot;
mod sources;

use anyhow::anyhow;
use minijinja::value::Serde;
use minijinja::{AutoEscape, Environment, UndefinedBehavior};
use serde::Serialize;

use crate::doc_args::DocArgs;
use crate::failure::Failure;
use crate::output::Output;

/// The templates, compiled into the binary.
const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("templates/base.html")),
    ("style.css", include_str!("templates/style.css")),
    ("plots.html", include_str!("templates/plots.html")),
    ("dedup.html", include_str!("templates/dedup.html")),
    ("eval.html", include_str!("templates/eval.html")),
];

/// `page` rendered with the template `name`.
fn render(name: &str, page: &impl Serialize) -> Result<String, minijinja::Error> {
    let mut env = Environment::new();
    // A misspelt field is an error, not an empty cell.
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    // Everything printed is escaped, the style sheet's and plots' text included.
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    for (name, source) in TEMPLATES {
        env.add_template(name, source)?;
    }
    env.get_template(name)?.render(Serde(page))
}

/// Renders `page` with the template `name` into `out` and finishes it.
fn write(mut out: Output, name: &str, page: &impl Serialize) -> Result<(), Failure> {
    let html = render(name, page)
        .map_err(|e| Failure::io(anyhow!("cannot make the report {}: {e:#}", out.name())))?;
    out.line(html.trim_end().as_bytes())?;
    out.finish()
}

/// The inputs a page names: as given on the command line, or standard input.
fn inputs(docs: &DocArgs) -> Vec<String> {
    let named: Vec<String> = docs.named().cloned().collect();
    if named.is_empty() {
        vec!["standard input".into()]
    } else {
        named
    }
}

/// `n` with thousands separated: 1234567 → "1,234,567".
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A line of a summary table: a key for tests and tools (`data-key`), a label, the
/// value as a number (`data-value`) and as shown.
#[derive(Clone, Debug, PartialEq, Serialize)]
struct Figure {
    key: String,
    label: String,
    value: String,
    shown: String,
}

impl Figure {
    fn count(key: &str, label: &str, n: u64) -> Figure {
        Figure {
            key: key.into(),
            label: label.into(),
            value: n.to_string(),
            shown: grouped(n),
        }
    }

    fn text(key: &str, label: &str, value: &str) -> Figure {
        Figure {
            key: key.into(),
            label: label.into(),
            value: value.into(),
            shown: value.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }

    #[test]
    fn every_template_parses() {
        let mut env = Environment::new();
        for (name, source) in TEMPLATES {
            assert!(env.add_template(name, source).is_ok(), "{name}");
        }
    }
}
