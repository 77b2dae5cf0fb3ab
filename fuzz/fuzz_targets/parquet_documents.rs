//! Parquet input: any bytes named `.parquet` are read as documents or refused with an
//! error naming the file; skipping invalid rows never loses a valid one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use neardup_fuzz::file;
use neardup_io::docs::{self, Doc, ReadOptions};
use neardup_io::{Error, NoProgress};

fn read(path: &str, skip_invalid: bool) -> Result<Vec<Doc>, String> {
    let mut args = ReadOptions::paths(vec![path.to_string()]);
    args.skip_invalid = skip_invalid;
    let mut got = Vec::new();
    docs::read(&args, &NoProgress, |batch| {
        got.extend(batch);
        Ok::<(), Error>(())
    })
    .map(|_| got)
    .map_err(|e| e.to_string())
}

fuzz_target!(|data: &[u8]| {
    let path = file("in.parquet", data);
    let strict = read(&path, false);
    if let Err(message) = &strict {
        assert!(message.starts_with(&path), "{message} should name the file");
    }
    let lenient = read(&path, true);
    if let Ok(docs) = strict {
        assert_eq!(lenient, Ok(docs));
    }
});
