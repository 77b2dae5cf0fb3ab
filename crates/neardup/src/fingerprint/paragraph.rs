//! Paragraphs: where a document's parts begin and end, for partial-duplicate checks.

use std::ops::Range;

/// A paragraph of a document: its byte span in the document, and its fingerprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Paragraph {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// Fingerprint of `text[start..end]`.
    pub fingerprint: u64,
}

/// HTML elements that end a paragraph (opening or closing tag).
const BLOCK_TAGS: &[&str] = &[
    "p",
    "br",
    "div",
    "li",
    "ul",
    "ol",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "table",
    "section",
    "article",
    "blockquote",
    "hr",
    "header",
    "footer",
];

/// Length of the block tag starting at `s[0] == '<'`, if it is one.
fn block_tag(s: &[u8]) -> Option<usize> {
    let mut i = 1;
    if s.get(i) == Some(&b'/') {
        i += 1;
    }
    let name_len = s[i..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    let name = &s[i..i + name_len];
    let known = BLOCK_TAGS
        .iter()
        .any(|t| t.as_bytes().eq_ignore_ascii_case(name));
    let after = s.get(i + name_len).copied();
    if !known || !matches!(after, Some(b'>' | b'/' | b' ' | b'\t' | b'\n' | b'\r')) {
        return None;
    }
    let close = s[i + name_len..].iter().position(|&b| b == b'>')?;
    Some(i + name_len + close + 1)
}

/// Byte ranges that separate paragraphs: runs of two or more line breaks with only white
/// space between them, and block tags.
fn separators(text: &str) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\n' => {
                // A blank line: another newline after only white space.
                let mut j = i + 1;
                let mut newlines = 1;
                let mut end = i + 1;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    if b[j] == b'\n' {
                        newlines += 1;
                        end = j + 1;
                    }
                    j += 1;
                }
                if newlines >= 2 {
                    out.push(i..end);
                    i = end;
                    continue;
                }
                i += 1;
            }
            b'<' => match block_tag(&b[i..]) {
                Some(len) => {
                    out.push(i..i + len);
                    i += len;
                }
                None => i += 1,
            },
            _ => i += 1,
        }
    }
    out
}

/// Paragraph spans of `text`, trimmed of white space; one shorter than `min` bytes is
/// merged into the next, the last into the one before.
pub(crate) fn spans(text: &str, min: usize) -> Vec<Range<usize>> {
    let mut raw = Vec::new();
    let mut start = 0;
    let end = text.len()..text.len();
    for sep in separators(text).into_iter().chain(std::iter::once(end)) {
        let piece = &text[start..sep.start];
        let lead = piece.len() - piece.trim_start().len();
        let trimmed = piece.trim();
        if !trimmed.is_empty() {
            raw.push(start + lead..start + lead + trimmed.len());
        }
        start = sep.end;
    }
    let mut out: Vec<Range<usize>> = Vec::with_capacity(raw.len());
    let mut pending: Option<Range<usize>> = None;
    for r in raw {
        let r = match pending.take() {
            Some(p) => p.start..r.end,
            None => r,
        };
        if r.len() < min {
            pending = Some(r);
        } else {
            out.push(r);
        }
    }
    if let Some(p) = pending {
        match out.last_mut() {
            Some(last) => last.end = p.end,
            None => out.push(p),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str, min: usize) -> Vec<&str> {
        spans(text, min).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn splits_on_blank_lines_and_block_tags() {
        let text = "  First para\nstill first.\n\n \t\nSecond.<p>Third</P><br/>Fourth<b>bold</b>\n";
        assert_eq!(
            texts(text, 0),
            vec![
                "First para\nstill first.",
                "Second.",
                "Third",
                "Fourth<b>bold</b>"
            ]
        );
        assert!(texts("", 0).is_empty());
        assert!(texts(" \n\n <p> ", 0).is_empty());
        assert_eq!(texts("<pre>x</pre>", 0), vec!["<pre>x</pre>"]);
        assert_eq!(texts("a<p", 0), vec!["a<p"], "an unclosed tag is text");
    }

    #[test]
    fn merges_short_paragraphs_forward() {
        let text = "Hi.\n\nA longer paragraph here.\n\nOk\n\nAnother long paragraph.\n\nEnd";
        assert_eq!(
            texts(text, 10),
            vec![
                "Hi.\n\nA longer paragraph here.",
                "Ok\n\nAnother long paragraph.\n\nEnd"
            ]
        );
        assert_eq!(texts("a\n\nb", 10), vec!["a\n\nb"]);
    }
}
