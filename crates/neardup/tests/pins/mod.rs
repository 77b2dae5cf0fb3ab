//! The pin files of `tests/pins/`, read by the pin tests.

use serde_json::Value;

/// The JSON array in `tests/pins/<name>`.
pub fn load(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/pins/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(pins)) => pins,
        other => panic!("{path}: not a JSON array: {other:?}"),
    }
}
