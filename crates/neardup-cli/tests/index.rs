//! `neardup index` end to end: a data directory made, filled, queried, emptied, reopened,
//! and every bad input.

mod common;

use std::process::Output;

use common::neardup;
use serde_json::Value;

fn ok(o: Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn json_lines(s: &str) -> Vec<Value> {
    s.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn create_insert_query_remove_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("data");
    let d = d.to_str().unwrap();
    ok(neardup(&["index", "create", d], b""));
    // Fingerprints from `neardup fingerprint`-style lines, ids of any JSON type.
    let fps = "{\"id\":\"a\",\"fingerprint\":\"1023\"}\n{\"id\":7,\"fingerprint\":1022}\n{\"id\":\"far\",\"fingerprint\":\"18446744073709551615\"}\n";
    ok(neardup(
        &["index", "insert", d, "--fingerprints"],
        fps.as_bytes(),
    ));
    let q = "{\"id\":\"q1\",\"fingerprint\":\"1021\"}\n{\"id\":\"q2\",\"fingerprint\":\"0\"}\n";
    let out = json_lines(&ok(neardup(
        &["index", "query", d, "--fingerprints"],
        q.as_bytes(),
    )));
    assert_eq!(out[0]["id"], "q1");
    // 1021 is 1 bit from 1023 ("a") and 2 from 1022 ("7"): nearest first.
    assert_eq!(
        out[0]["matches"],
        serde_json::json!([{"id":"a","distance":1},{"id":"7","distance":2}])
    );
    assert_eq!(out[1]["matches"], serde_json::json!([]));

    // Documents go through the fingerprinter; a replaced id keeps one entry.
    let docs = "{\"id\":\"doc\",\"text\":\"the quick brown fox jumps over the lazy dog\"}\n";
    ok(neardup(&["index", "insert", d], docs.as_bytes()));
    ok(neardup(&["index", "insert", d], docs.as_bytes()));
    let out = json_lines(&ok(neardup(&["index", "query", d], docs.as_bytes())));
    assert_eq!(
        out[0]["matches"],
        serde_json::json!([{"id":"doc","distance":0}])
    );
    let stats: Value = serde_json::from_str(&ok(neardup(&["index", "stats", d], b""))).unwrap();
    assert_eq!(stats["documents"], 4);
    assert!(stats["memory_bytes"].as_u64().is_some_and(|b| b > 0));
    assert_eq!(stats["distance"], 3);

    // Removal by id; unknown ids are counted, not errors.
    let o = neardup(&["index", "remove", d], b"a\nnot-there\n");
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 of 2 ids removed"));
    ok(o);
    let out = json_lines(&ok(neardup(
        &["index", "query", d, "--fingerprints"],
        q.as_bytes(),
    )));
    assert_eq!(
        out[0]["matches"],
        serde_json::json!([{"id":"7","distance":2}])
    );

    // A ttl of 0 expires at once: it never matches, and sweep deletes it.
    let late = "{\"id\":\"gone\",\"fingerprint\":\"4096\"}\n";
    ok(neardup(
        &["index", "insert", d, "--fingerprints", "--ttl", "0"],
        late.as_bytes(),
    ));
    let out = json_lines(&ok(neardup(
        &["index", "query", d, "--fingerprints"],
        late.as_bytes(),
    )));
    assert_eq!(out[0]["matches"], serde_json::json!([]));
    let o = neardup(&["index", "sweep", d], b"");
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 expired"));
    ok(o);
    let stats: Value = serde_json::from_str(&ok(neardup(&["index", "stats", d], b""))).unwrap();
    assert_eq!(stats["documents"], 3);
}

#[test]
fn bad_directories_and_inputs_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = neardup(&["index", "query", d], b"");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a neardup data directory"));
    ok(neardup(&["index", "create", d], b""));
    let o = neardup(&["index", "create", d], b"");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("already a neardup data directory"));
    let o = neardup(
        &["index", "insert", d, "--fingerprints"],
        b"{\"id\":1,\"fingerprint\":\"x\"}\n",
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("<stdin>:1: no \"fingerprint\""));
    let o = neardup(
        &["index", "insert", d, "--fingerprints"],
        b"{\"fingerprint\":\"1\"}\n",
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("<stdin>:1: no \"id\""));
    // Nothing of the failed inserts was stored.
    let stats: Value = serde_json::from_str(&ok(neardup(&["index", "stats", d], b""))).unwrap();
    assert_eq!(stats["documents"], 0);
    // A damaged database file.
    std::fs::write(dir.path().join("neardup.redb"), b"garbage").unwrap();
    let o = neardup(&["index", "stats", d], b"");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("neardup.redb"));
}

/// A bulk load of raw little-endian u64 fingerprints (`*.u64`): ids are positions counted
/// across the files, and queries (of either kind) answer as brute force.
#[test]
fn raw_u64_files_load_with_positions_as_ids() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("data");
    let d = d.to_str().unwrap();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut fps: Vec<u64> = (0..400)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })
        .collect();
    // Near copies: each of the first 50 again with one to three bits flipped.
    for i in 0..50 {
        let f = fps[i] ^ (1 << (i % 64)) ^ (1 << ((i * 7) % 64)) ^ (1 << ((i * 13) % 64));
        fps.push(f);
    }
    let (a, b) = fps.split_at(200);
    let files = [dir.path().join("a.u64"), dir.path().join("b.u64")];
    for (path, part) in files.iter().zip([a, b]) {
        let bytes: Vec<u8> = part.iter().flat_map(|f| f.to_le_bytes()).collect();
        std::fs::write(path, bytes).unwrap();
    }
    ok(neardup(&["index", "create", d, "--distance", "3"], b""));
    ok(neardup(
        &[
            "index",
            "insert",
            d,
            "--fingerprints",
            files[0].to_str().unwrap(),
            files[1].to_str().unwrap(),
        ],
        b"",
    ));
    let stats: Value = serde_json::from_str(&ok(neardup(&["index", "stats", d], b""))).unwrap();
    assert_eq!(stats["documents"], fps.len());
    let queries: String = fps
        .iter()
        .step_by(7)
        .enumerate()
        .map(|(i, f)| format!("{{\"id\":\"q{i}\",\"fingerprint\":\"{f}\"}}\n"))
        .collect();
    let out = json_lines(&ok(neardup(
        &["index", "query", d, "--fingerprints"],
        queries.as_bytes(),
    )));
    for (answer, &q) in out.iter().zip(fps.iter().step_by(7)) {
        let mut want: Vec<(u32, usize)> = fps
            .iter()
            .enumerate()
            .map(|(i, f)| ((f ^ q).count_ones(), i))
            .filter(|&(dist, _)| dist <= 3)
            .collect();
        want.sort_by_key(|&(dist, i)| (dist, i.to_string()));
        let want: Vec<Value> = want
            .into_iter()
            .map(|(dist, i)| serde_json::json!({"id": i.to_string(), "distance": dist}))
            .collect();
        assert_eq!(answer["matches"], Value::Array(want), "{answer}");
    }
}
