//! What every page shares: the templates, rendering, and the figures of a summary table.

use minijinja::value::Serde;
use minijinja::{AutoEscape, Environment, UndefinedBehavior};
use serde::Serialize;

use crate::Error;

/// The templates, compiled into the binary.
pub(super) const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("templates/base.html")),
    ("style.css", include_str!("templates/style.css")),
    ("plots.html", include_str!("templates/plots.html")),
    ("dedup.html", include_str!("templates/dedup.html")),
    ("eval.html", include_str!("templates/eval.html")),
];

/// `page` rendered with the template `name`, without its final newline.
pub(super) fn render(name: &str, page: &impl Serialize) -> Result<String, Error> {
    let mut env = Environment::new();
    // A misspelt field is an error, not an empty cell.
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    // Everything printed is escaped, the style sheet's and plots' text included.
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    for (name, source) in TEMPLATES {
        env.add_template(name, source)?;
    }
    let html = env.get_template(name)?.render(Serde(page))?;
    Ok(html.trim_end().to_string())
}

/// The inputs a page names: as given (paths), or standard input for none.
pub(super) fn inputs(named: &[String]) -> Vec<String> {
    if named.is_empty() {
        vec!["standard input".into()]
    } else {
        named.to_vec()
    }
}

/// `n` with thousands separated: 1234567 → "1,234,567".
pub(super) fn grouped(n: u64) -> String {
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
pub(super) struct Figure {
    pub(super) key: String,
    pub(super) label: String,
    pub(super) value: String,
    pub(super) shown: String,
}

impl Figure {
    pub(super) fn count(key: &str, label: &str, n: u64) -> Figure {
        Figure {
            key: key.into(),
            label: label.into(),
            value: n.to_string(),
            shown: grouped(n),
        }
    }

    pub(super) fn text(key: &str, label: &str, value: &str) -> Figure {
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
