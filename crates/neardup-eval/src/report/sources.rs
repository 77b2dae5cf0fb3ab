//! Counts per source, when document ids look like paths (`py/3.11/json/decoder.py`,
//! `npm/left-pad/README.md`, `https://example.org/a/b`): a source is an id's first
//! directory, or its first two, so a template repeated across one source shows up as that
//! source losing most of its documents.

use std::collections::HashMap;

use serde::Serialize;

/// Distinct sources counted per level; documents of sources beyond them are counted
/// together, so memory stays bounded whatever the ids.
const MAX_SOURCES: usize = 4096;
/// Rows shown per table; the other sources are summed in one row.
const ROWS: usize = 25;

/// What a source holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Count {
    documents: u64,
    removed: u64,
}

/// One level of grouping: the first directory, or the first two.
#[derive(Debug, Default)]
struct Level {
    counts: HashMap<String, Count>,
    /// Documents of sources past [`MAX_SOURCES`].
    overflow: Count,
}

impl Level {
    fn add(&mut self, source: &str, removed: bool) {
        let full = self.counts.len() >= MAX_SOURCES;
        let count = match self.counts.get_mut(source) {
            Some(c) => c,
            None if full => &mut self.overflow,
            None => self.counts.entry(source.to_string()).or_default(),
        };
        count.documents += 1;
        count.removed += u64::from(removed);
    }
}

/// Counts per source at both levels, and of documents whose ids have no directory.
#[derive(Debug, Default)]
pub struct Sources {
    levels: [Level; 2],
    without: Count,
}

/// The directories of an id, at most two: `None` for an id without any.
pub fn source_of(id: &str) -> Option<(&str, &str)> {
    // A URL's source is its host and path, not its scheme.
    let path = id.split_once("://").map_or(id, |(_, rest)| rest);
    let path = path.trim_start_matches('/');
    let dirs = path.rfind('/').map(|end| &path[..end])?;
    if dirs.is_empty() {
        return None;
    }
    let first_end = dirs.find('/').unwrap_or(dirs.len());
    let second_end = match dirs.get(first_end + 1..) {
        Some(rest) => first_end + 1 + rest.find('/').unwrap_or(rest.len()),
        None => first_end,
    };
    let (first, second) = (&dirs[..first_end], &dirs[..second_end]);
    Some((first, second))
}

impl Sources {
    /// Counts one document.
    pub fn add(&mut self, id: Option<&str>, removed: bool) {
        match id.and_then(source_of) {
            Some((first, two)) => {
                self.levels[0].add(first, removed);
                self.levels[1].add(two, removed);
            }
            None => {
                self.without.documents += 1;
                self.without.removed += u64::from(removed);
            }
        }
    }

    /// The tables worth showing: by first directory when ids name two or more, and by two
    /// directories when that splits them further.
    pub fn tables(&self) -> Vec<Table> {
        let groups = |l: &Level| l.counts.len() + usize::from(l.overflow.documents > 0);
        let (one, two) = (groups(&self.levels[0]), groups(&self.levels[1]));
        let mut out = Vec::new();
        if one >= 2 {
            out.push(self.table(0, "first directory"));
        }
        if two > one && two >= 2 {
            out.push(self.table(1, "first two directories"));
        }
        out
    }

    fn table(&self, level: usize, title: &str) -> Table {
        let l = &self.levels[level];
        let mut all: Vec<(&String, &Count)> = l.counts.iter().collect();
        // Most removed first; then by size; then by name, so equal counts keep an order.
        all.sort_by(|a, b| {
            (b.1.removed, b.1.documents)
                .cmp(&(a.1.removed, a.1.documents))
                .then_with(|| a.0.cmp(b.0))
        });
        let mut rows: Vec<Row> = all
            .iter()
            .take(ROWS)
            .map(|(name, c)| Row::new(name, **c, false))
            .collect();
        let mut rest = l.overflow;
        let mut others = usize::from(l.overflow.documents > 0);
        for (_, c) in all.iter().skip(ROWS) {
            rest.documents += c.documents;
            rest.removed += c.removed;
            others += 1;
        }
        if rest.documents > 0 {
            let name = if l.overflow.documents > 0 {
                format!("{others}+ other sources")
            } else {
                format!("{others} other sources")
            };
            rows.push(Row::new(&name, rest, true));
        }
        if self.without.documents > 0 {
            rows.push(Row::new("(ids without a directory)", self.without, true));
        }
        Table {
            title: format!("By {title}"),
            sources: l.counts.len(),
            bounded: l.overflow.documents > 0,
            rows,
        }
    }
}

/// A table of sources.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Table {
    pub title: String,
    /// Distinct sources counted.
    pub sources: usize,
    /// Whether there were more than could be counted apart ([`MAX_SOURCES`]).
    pub bounded: bool,
    pub rows: Vec<Row>,
}

/// A source's counts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub source: String,
    pub documents: u64,
    pub removed: u64,
    pub kept: u64,
    /// The counts as shown (thousands grouped).
    pub shown: [String; 3],
    /// Removed of documents, in percent with one decimal.
    pub removed_percent: String,
    /// A row summing several sources (or ids without any), not one source.
    pub summary: bool,
}

impl Row {
    fn new(source: &str, c: Count, summary: bool) -> Row {
        Row {
            source: source.into(),
            documents: c.documents,
            removed: c.removed,
            kept: c.documents - c.removed,
            shown: [c.documents, c.documents - c.removed, c.removed].map(super::page::grouped),
            removed_percent: format!(
                "{:.1}",
                100.0 * c.removed as f64 / c.documents.max(1) as f64
            ),
            summary,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_the_first_directories() {
        assert_eq!(
            source_of("py/3.11.7/python3.11/json/decoder.py"),
            Some(("py", "py/3.11.7"))
        );
        assert_eq!(source_of("npm/README.md"), Some(("npm", "npm")));
        assert_eq!(source_of("kjv/Gen1"), Some(("kjv", "kjv")));
        assert_eq!(
            source_of("https://example.org/blog/post/1"),
            Some(("example.org", "example.org/blog"))
        );
        assert_eq!(source_of("/data/a/b.txt"), Some(("data", "data/a")));
        assert_eq!(source_of("Genesis 1"), None);
        assert_eq!(source_of("doc.txt"), None);
        assert_eq!(source_of("/doc.txt"), None);
    }

    #[test]
    fn counts_add_up_per_level() {
        let mut s = Sources::default();
        let docs = [
            ("py/3.10/a.py", true),
            ("py/3.10/b.py", false),
            ("py/3.11/a.py", true),
            ("npm/x/README.md", false),
            ("plain id", true),
        ];
        for (id, removed) in docs {
            s.add(Some(id), removed);
        }
        s.add(None, false);
        let tables = s.tables();
        assert_eq!(tables.len(), 2);
        let first: Vec<(&str, u64, u64)> = tables[0]
            .rows
            .iter()
            .map(|r| (r.source.as_str(), r.documents, r.removed))
            .collect();
        assert_eq!(
            first,
            [
                ("py", 3, 2),
                ("npm", 1, 0),
                ("(ids without a directory)", 2, 1)
            ]
        );
        let second: Vec<&str> = tables[1].rows.iter().map(|r| r.source.as_str()).collect();
        assert_eq!(
            second,
            ["py/3.10", "py/3.11", "npm/x", "(ids without a directory)"]
        );
        assert_eq!(tables[0].rows[0].removed_percent, "66.7");
    }

    #[test]
    fn one_source_or_none_makes_no_table() {
        let mut s = Sources::default();
        for i in 0..10 {
            s.add(Some(&format!("doc/{i}")), i % 2 == 0);
        }
        assert!(s.tables().is_empty());
    }

    #[test]
    fn memory_is_bounded_and_the_rest_summed() {
        let mut s = Sources::default();
        let n = MAX_SOURCES + 500;
        for i in 0..n {
            s.add(Some(&format!("s{i}/doc")), i < 10);
        }
        assert_eq!(s.levels[0].counts.len(), MAX_SOURCES);
        let t = &s.tables()[0];
        assert_eq!(t.rows.len(), ROWS + 1);
        let total: u64 = t.rows.iter().map(|r| r.documents).sum();
        assert_eq!(total, n as u64, "every document is in some row");
        let removed: u64 = t.rows.iter().map(|r| r.removed).sum();
        assert_eq!(removed, 10);
        assert!(t.rows[ROWS].summary);
        assert!(
            t.rows[ROWS].source.ends_with("+ other sources"),
            "{}",
            t.rows[ROWS].source
        );
    }
}
