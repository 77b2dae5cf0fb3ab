//! The result records, written one per line: the arrays of `find-all` and `find-clusters`
//! (simhash-cpp's format), and the clusters and pairs of `neardup dedup`, which
//! `neardup.ray` writes too, byte for byte the same.
//!
//! Lines are appended to a buffer the caller owns (or written to its writer), without
//! their newline: the caller decides where they go.

use std::fmt::{self, Write as _};
use std::io::{self, Write};

/// Writes `[v0,v1,…]` and a newline: a JSON array, as simhash-cpp's binaries print them
/// (they put a space after each comma; the JSON is the same).
pub fn write_array(out: &mut impl Write, values: &[u64]) -> io::Result<()> {
    let mut num = itoa::Buffer::new();
    out.write_all(b"[")?;
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        out.write_all(num.format(*v).as_bytes())?;
    }
    out.write_all(b"]\n")
}

/// An estimated similarity in JSON: three decimals are all the estimate holds, in the
/// shortest form (1.000 → 1, 0.850 → 0.85), still a JSON number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Similarity(pub f32);

impl fmt::Display for Similarity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = format!("{:.3}", self.0);
        let s = s.trim_end_matches('0').trim_end_matches('.');
        f.write_str(if s.is_empty() { "0" } else { s })
    }
}

/// A member of a cluster, as its line names it: its id as JSON text, and how near the
/// representative it is.
#[derive(Clone, Copy, Debug)]
pub struct Member<'a> {
    /// The id, as JSON (`"a"`, `7`).
    pub id: &'a str,
    /// Estimated Jaccard similarity to the representative.
    pub similarity: f32,
    /// Bits apart from the representative (256-bit fingerprints).
    pub distance: u32,
}

/// Appends the clusters line of cluster `number`: `{"cluster", "size", "representative",
/// "members": [{"id", "similarity", "distance"}, …]}`, ids as JSON text, the
/// representative among its members.
pub fn cluster_line<'a>(
    line: &mut String,
    number: u64,
    representative: &str,
    members: impl ExactSizeIterator<Item = Member<'a>>,
) {
    // Writing to a `String` cannot fail.
    let _ = write!(
        line,
        r#"{{"cluster":{number},"size":{},"representative":{representative},"members":["#,
        members.len(),
    );
    for (i, m) in members.enumerate() {
        if i > 0 {
            line.push(',');
        }
        // Into the line itself: no string per member.
        let _ = write!(
            line,
            r#"{{"id":{},"similarity":{},"distance":{}}}"#,
            m.id,
            Similarity(m.similarity),
            m.distance
        );
    }
    line.push_str("]}");
}

/// Appends the pairs line of documents `a` and `b` (ids as JSON text): `{"a", "b",
/// "similarity", "distance"}`.
pub fn pair_line(line: &mut String, a: &str, b: &str, similarity: f32, distance: u32) {
    let _ = write!(
        line,
        r#"{{"a":{a},"b":{b},"similarity":{},"distance":{distance}}}"#,
        Similarity(similarity),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn similarities_are_short_json_numbers() {
        for (s, text) in [
            (1.0, "1"),
            (0.85, "0.85"),
            (0.8504, "0.85"),
            (0.8496, "0.85"),
            (0.0, "0"),
            (0.0004, "0"),
            (0.125, "0.125"),
        ] {
            assert_eq!(Similarity(s).to_string(), text, "{s}");
        }
    }

    #[test]
    fn lines() {
        let mut out = Vec::new();
        write_array(&mut out, &[3, u64::MAX]).unwrap();
        write_array(&mut out, &[]).unwrap();
        assert_eq!(out, b"[3,18446744073709551615]\n[]\n");

        let mut line = String::new();
        let members =
            [("\"a\"", 1.0, 0), ("7", 0.8126, 12)].map(|(id, similarity, distance)| Member {
                id,
                similarity,
                distance,
            });
        cluster_line(&mut line, 4, "\"a\"", members.into_iter());
        assert_eq!(
            line,
            r#"{"cluster":4,"size":2,"representative":"a","members":[{"id":"a","similarity":1,"distance":0},{"id":7,"similarity":0.813,"distance":12}]}"#
        );
        line.clear();
        pair_line(&mut line, "\"a\"", "7", 0.9, 3);
        assert_eq!(line, r#"{"a":"a","b":7,"similarity":0.9,"distance":3}"#);
    }
}
