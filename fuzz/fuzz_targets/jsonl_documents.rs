//! JSON Lines documents (`--format jsonl`, and `.gz` / `.zst` around them): the reader
//! against an obvious oracle (serde_json's `Value` on each line, decoded lossily), under the
//! flags and field names the first byte picks. The reader's fast path (a visitor that keeps
//! only the id and text, `docs::fast_record`) is held to the `Value` path it replaces
//! (`docs::record`) line by line: the same lines accepted, with the same id and text.
//!
//! The body is also read gzipped in members of a few bytes each: the decoder hands out at
//! most a member at a time, so lines arrive cut across many reads, as a large file's lines
//! are cut across the reader's buffers.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use neardup_fuzz::{file, lines};
use neardup_io::docs::{self, Doc, ReadOptions};
use neardup_io::{Error, NoProgress};
use serde_json::Value;

/// `bytes` gzipped as members of `size` bytes each.
fn gzip_members(bytes: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in bytes.chunks(size) {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(piece).expect("writes to memory");
        out.extend(gz.finish().expect("writes to memory"));
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    // Field names: the defaults, one name for both (the text wins, as in a Value map
    // from which the text is taken first), short ones, and the empty name.
    let (text_field, id_field) = match (flags >> 4) & 3 {
        0 => ("text", "id"),
        1 => ("id", "id"),
        2 => ("t", "i"),
        _ => ("", "text"),
    };
    if body.is_empty() {
        return;
    }
    let (name, bytes, checked) = match flags & 3 {
        0 => ("in.jsonl", body.to_vec(), true),
        1 => ("in.jsonl.gz", body.to_vec(), false),
        2 => ("in.jsonl.zst", body.to_vec(), false),
        _ => (
            "in.jsonl.gz",
            gzip_members(body, usize::from(flags >> 6) + 1),
            true,
        ),
    };
    let path = file(name, &bytes);
    let mut args = ReadOptions::paths(vec![path.clone()]);
    args.skip_invalid = flags & 4 != 0;
    args.keep_records = flags & 8 != 0;
    args.text_field = text_field.into();
    args.id_field = id_field.into();
    let mut got: Vec<Doc> = Vec::new();
    let read = docs::read(&args, &NoProgress, |batch| {
        got.extend(batch);
        Ok::<(), Error>(())
    });
    if !checked {
        return;
    }

    let mut want: Vec<Doc> = Vec::new();
    let mut skipped = 0u64;
    let mut bad_line = None;
    let all = lines(body);
    for (n, &raw) in all.iter().enumerate() {
        // A newline or the end of the input ends the line, and one CR before either goes.
        let input_bytes = raw.len();
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let text = String::from_utf8_lossy(raw).into_owned();
        if text.trim().is_empty() {
            continue;
        }
        let fast = docs::fast_record(&text, &args).map(|(id, t)| (id, t.into_owned()));
        let dom = docs::record(&text, &args).ok();
        assert_eq!(
            fast, dom,
            "the fast path and the Value path differ on {text:?}"
        );
        let doc = match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(mut fields)) => match fields.remove(&args.text_field) {
                Some(Value::String(body)) => Some(Doc {
                    id: fields
                        .remove(&args.id_field)
                        .unwrap_or_else(|| Value::String(format!("{path}:{}", n + 1))),
                    text: body,
                    record: args.keep_records.then(|| text.clone()),
                    input_bytes,
                }),
                _ => None,
            },
            _ => None,
        };
        match doc {
            Some(doc) => want.push(doc),
            None if args.skip_invalid => skipped += 1,
            None => {
                bad_line = Some(n + 1);
                break;
            }
        }
    }
    match (read, bad_line) {
        (Ok(stats), None) => {
            assert_eq!(got, want);
            assert_eq!(stats.skipped, skipped);
            assert_eq!(stats.docs, want.len() as u64);
        }
        (Err(e), Some(line)) => {
            let message = e.to_string();
            assert!(
                message.starts_with(&format!("{path}:{line}: ")),
                "{message} should name line {line}"
            );
        }
        (read, bad) => panic!(
            "read {:?}, expected an error at line {bad:?}",
            read.map_err(|e| e.to_string())
        ),
    }
});
