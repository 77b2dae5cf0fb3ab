//! Reading the reference vectors in `tests/vectors` (copied from the seomoz references'
//! outputs; see its README).
#![allow(dead_code)]

use serde_json::Value;

pub fn vectors(name: &str) -> Value {
    let path = format!("{}/tests/vectors/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub fn vector_lines(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/vectors/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}: {e}")))
        .collect()
}

/// A u64 written as a decimal string.
pub fn dec(v: &Value) -> u64 {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .parse()
        .unwrap_or_else(|e| panic!("{v}: {e}"))
}

/// A u64 written as 16 hex digits.
pub fn hex(v: &Value) -> u64 {
    u64::from_str_radix(
        v.as_str().unwrap_or_else(|| panic!("not a string: {v}")),
        16,
    )
    .unwrap_or_else(|e| panic!("{v}: {e}"))
}

pub fn bytes_hex(v: &Value) -> Vec<u8> {
    let s = v.as_str().unwrap_or_else(|| panic!("not a string: {v}"));
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_else(|e| panic!("{s}: {e}")))
        .collect()
}

pub fn array(v: &Value) -> &Vec<Value> {
    v.as_array().unwrap_or_else(|| panic!("not an array: {v}"))
}

pub fn strs(v: &Value) -> Vec<&str> {
    array(v)
        .iter()
        .map(|x| x.as_str().unwrap_or_else(|| panic!("{x}")))
        .collect()
}
