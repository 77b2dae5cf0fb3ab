//! Fingerprint lists: the decimal lines `find-all`, `find-clusters` and the simhash-cpp
//! drop-ins read, and the JSON lines `index --fingerprints` reads. Each line against an
//! obvious oracle (std's parser on a trimmed run of ASCII digits), the whole input through
//! the parallel block reader (same values, or the first bad line's number).
#![no_main]

use libfuzzer_sys::fuzz_target;
use neardup_fuzz::{file, lines};
use neardup_io::fingerprints::{parse_fingerprint_line, parse_line, read_decimal, Source};
use neardup_io::NoProgress;

/// What a decimal line holds: nothing (blank), a value, or an error.
fn oracle(line: &[u8]) -> Result<Option<u64>, ()> {
    let t = line.trim_ascii();
    if t.is_empty() {
        return Ok(None);
    }
    if !t.iter().all(u8::is_ascii_digit) {
        return Err(());
    }
    std::str::from_utf8(t)
        .map_err(drop)?
        .parse::<u64>()
        .map(Some)
        .map_err(drop)
}

fuzz_target!(|data: &[u8]| {
    // Decimal lines.
    let mut want: Result<Vec<u64>, usize> = Ok(Vec::new());
    for (n, line) in lines(data).into_iter().enumerate() {
        let expected = oracle(line);
        assert_eq!(parse_line(line).map_err(drop), expected, "line {line:?}");
        match (&mut want, expected) {
            (Ok(values), Ok(v)) => values.extend(v),
            (Ok(_), Err(())) => want = Err(n + 1),
            (Err(_), _) => {}
        }
    }
    let path = file("fingerprints.txt", data);
    let got = read_decimal(Source::open(&path).expect("opens"), &NoProgress);
    match (got, want) {
        (Ok(values), Ok(expected)) => assert_eq!(values, expected),
        (Err(e), Err(line)) => {
            let message = e.to_string();
            assert!(
                message.starts_with(&format!("{path}:{line}: ")),
                "{message} should name line {line}"
            );
        }
        (got, want) => panic!(
            "read {:?}, expected {want:?}",
            got.map_err(|e| e.to_string())
        ),
    }

    // `neardup fingerprint` output lines: what is read back writes back the same.
    for line in lines(data) {
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        if let Ok(Some((id, fp))) = parse_fingerprint_line(line) {
            let again = serde_json::json!({"id": id, "fingerprint": fp.to_string()}).to_string();
            assert_eq!(parse_fingerprint_line(&again), Ok(Some((id, fp))));
        }
    }
});
