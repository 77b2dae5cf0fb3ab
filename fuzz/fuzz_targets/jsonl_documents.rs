//! JSON Lines documents (`--format jsonl`, and `.gz` / `.zst` around them): the reader
//! against an obvious oracle (serde_json on each line, decoded lossily), under the flags
//! the first byte picks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use neardup_cli::docs::{self, Doc, DocArgs};
use neardup_cli::progress::Progress;
use neardup_fuzz::{file, lines};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    let name = match flags & 3 {
        1 => "in.jsonl.gz",
        2 => "in.jsonl.zst",
        _ => "in.jsonl",
    };
    let path = file(name, body);
    let mut args = DocArgs::paths(vec![path.clone()]);
    args.skip_invalid = flags & 4 != 0;
    args.keep_records = flags & 8 != 0;
    let mut got: Vec<Doc> = Vec::new();
    let read = docs::read(&args, &Progress::hidden(), |batch| {
        got.extend(batch);
        Ok(())
    });
    if name != "in.jsonl" {
        return;
    }

    let mut want: Vec<Doc> = Vec::new();
    let mut skipped = 0u64;
    let mut bad_line = None;
    let all = lines(body);
    for (n, &raw) in all.iter().enumerate() {
        // A newline ends the line, and a CR before it goes too.
        let ended = n + 1 < all.len() || body.ends_with(b"\n");
        let raw = if ended {
            raw.strip_suffix(b"\r").unwrap_or(raw)
        } else {
            raw
        };
        let text = String::from_utf8_lossy(raw).into_owned();
        if text.trim().is_empty() {
            continue;
        }
        let doc = match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(mut fields)) => match fields.remove(&args.text_field) {
                Some(Value::String(body)) => Some(Doc {
                    id: fields
                        .remove(&args.id_field)
                        .unwrap_or_else(|| Value::String(format!("{path}:{}", n + 1))),
                    text: body,
                    record: args.keep_records.then(|| text.clone()),
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
