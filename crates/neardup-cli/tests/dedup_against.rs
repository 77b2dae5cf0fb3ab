//! `neardup dedup --against STORE` and `--save STORE`: deduplicating new documents
//! against a store that dedup saved is deduplicating the union, stored documents first,
//! byte for byte; and what cannot be done is refused before anything is written.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::corpus::corpus;
use common::neardup;
use serde_json::Value;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn write_jsonl(path: &Path, docs: &[Value]) {
    let lines: String = docs.iter().map(|d| format!("{d}\n")).collect();
    std::fs::write(path, lines).unwrap();
}

/// Runs `neardup dedup` with `args`, asserting success; its summary.
fn dedup(dir: &Path, args: &[&str]) -> Value {
    let stats = dir.join("stats.json");
    let stats_path = stats.to_str().unwrap();
    let all = [&["dedup", "-q", "--stats-json", stats_path][..], args].concat();
    let o = neardup(&all, b"");
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(&read(&stats)).unwrap()
}

/// Runs `neardup dedup` with `args`, asserting it fails with exit 2; its standard error.
fn refused(args: &[&str]) -> String {
    let o = neardup(&[&["dedup", "-q"][..], args].concat(), b"");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    err
}

/// An id as a store keeps it: a string, numbers written out.
fn id_text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// Each removed document's representative, by id, from a --clusters file: those of the
/// documents `only` names.
fn removed_for(clusters: &str, only: &dyn Fn(&str) -> bool) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in clusters.lines() {
        let c: Value = serde_json::from_str(line).unwrap();
        let rep = id_text(&c["representative"]);
        for m in c["members"].as_array().unwrap() {
            let id = id_text(&m["id"]);
            if id != rep && only(&id) {
                out.insert(id, rep.clone());
            }
        }
    }
    out
}

/// The oracle: `dedup UNION` (the old documents, then the new). Against it: `dedup OLD
/// --save S`, then `dedup NEW --against S` (in memory and spilled): the new documents
/// kept are the union's, byte for byte, and each removed one goes to the union's
/// representative. Then `dedup NEW --save S` stores exactly those, after which nothing of
/// the union is new to the store.
#[test]
fn against_a_saved_store_is_deduplicating_the_union() {
    for (seed, n, threshold) in [(11, 1400, "0.8"), (12, 1000, "0.6")] {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
        // Every document with an id of its own: `path:line` would differ between files.
        let docs: Vec<Value> = corpus(seed, n)
            .into_iter()
            .enumerate()
            .map(|(i, mut d)| {
                if d.get("id").is_none() {
                    d["id"] = Value::String(format!("n{i}"));
                }
                d
            })
            .collect();
        let (old, new) = docs.split_at(n * 3 / 5);
        write_jsonl(dir.path().join("old.jsonl").as_ref(), old);
        write_jsonl(dir.path().join("new.jsonl").as_ref(), new);
        write_jsonl(dir.path().join("union.jsonl").as_ref(), &docs);
        let t = ["--threshold", threshold];
        let (store, union, old_path, new_path) = (
            at("store"),
            at("union.jsonl"),
            at("old.jsonl"),
            at("new.jsonl"),
        );

        dedup(
            dir.path(),
            &[
                &[union.as_str()][..],
                &t,
                // A store keeps no texts: against one, pairs are decided on the
                // estimates, as --estimate decides the union's.
                &[
                    "--estimate",
                    "--deduplicated",
                    &at("union.kept"),
                    "--clusters",
                    &at("union.clusters"),
                ],
            ]
            .concat(),
        );
        let saved = dedup(
            dir.path(),
            &[
                &[old_path.as_str()][..],
                &t,
                &["--save", &store, "--deduplicated", &at("old.kept")],
            ]
            .concat(),
        );
        let old_kept = read(dir.path().join("old.kept").as_ref());
        assert_eq!(
            saved["settings"]["store"]["saved"].as_u64(),
            Some(old_kept.lines().count() as u64)
        );
        for (name, more) in [("memory", &[][..]), ("spilled", &["--memory", "1"][..])] {
            let s = dedup(
                dir.path(),
                &[
                    &[new_path.as_str()][..],
                    &t,
                    &[
                        "--against",
                        &store,
                        "--deduplicated",
                        &at(&format!("new.{name}.kept")),
                        "--clusters",
                        &at(&format!("new.{name}.clusters")),
                    ],
                    more,
                ]
                .concat(),
            );
            let new_kept = read(dir.path().join(format!("new.{name}.kept")).as_ref());
            let union_kept = read(dir.path().join("union.kept").as_ref());
            assert!(
                old_kept.clone() + &new_kept == union_kept,
                "seed {seed} {name}: the kept documents are not the union's"
            );
            let removed = s["settings"]["store"]["removed_for_stored"]
                .as_u64()
                .unwrap();
            assert!(
                removed > 20,
                "seed {seed}: only {removed} removed for stored ones"
            );
            // Each removed new document goes where the union's dedup puts it.
            let new_ids: std::collections::HashSet<String> =
                new.iter().map(|d| id_text(&d["id"])).collect();
            let is_new = |id: &str| new_ids.contains(id);
            let want = removed_for(&read(dir.path().join("union.clusters").as_ref()), &is_new);
            let got = removed_for(
                &read(dir.path().join(format!("new.{name}.clusters")).as_ref()),
                &is_new,
            );
            assert_eq!(got, want, "seed {seed} {name}");
        }

        // Saving what is kept stores the union's kept documents.
        let s = dedup(
            dir.path(),
            &[&[new_path.as_str()][..], &t, &["--save", &store]].concat(),
        );
        let new_kept = read(dir.path().join("new.memory.kept").as_ref());
        assert_eq!(
            s["settings"]["store"]["saved"].as_u64(),
            Some(new_kept.lines().count() as u64)
        );
        assert_eq!(s["settings"]["store"]["refused_by_store"].as_u64(), Some(0));
        // Now every document of the union is stored or a near-duplicate of a stored one.
        let s = dedup(
            dir.path(),
            &[&[union.as_str()][..], &t, &["--against", &store]].concat(),
        );
        assert_eq!(s["kept"].as_u64(), Some(0), "seed {seed}");
        assert_eq!(
            s["settings"]["store"]["stored_before"].as_u64(),
            Some((old_kept.lines().count() + new_kept.lines().count()) as u64)
        );
    }
}

#[test]
fn what_a_store_cannot_decide_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let text = |i: usize| {
        format!("document number {i} says something of its own about topic {i} at some length, {i} times")
    };
    let docs: Vec<Value> = (0..20)
        .map(|i| serde_json::json!({"id": format!("d{i}"), "text": text(i)}))
        .collect();
    write_jsonl(dir.path().join("docs.jsonl").as_ref(), &docs);
    let (store, input) = (at("store"), at("docs.jsonl"));
    dedup(dir.path(), &[input.as_str(), "--save", &store]);

    for (flags, says) in [
        (&["--distance", "10"][..], "--distance"),
        (&["--closure"][..], "--closure"),
        (&["--threshold", "0.7"][..], "give --threshold 0.8"),
        (&["--report", "r.html"][..], "--report"),
    ] {
        let err = refused(&[&[input.as_str(), "--against", &store][..], flags].concat());
        assert!(err.contains(says), "{flags:?}: {err}");
    }
    let err = refused(&[&input, "--against", &store, "--save", &at("other")]);
    assert!(err.contains("give one store"), "{err}");
    let err = refused(&[&input, "--against", &at("nowhere")]);
    assert!(err.contains("nowhere"), "{err}");

    // A kept document under an id the store holds: refused, the store unchanged.
    let clash = vec![
        serde_json::json!({"id": "d3", "text": "an unrelated text about gardens, rain and slow afternoons in the hills"}),
    ];
    write_jsonl(dir.path().join("clash.jsonl").as_ref(), &clash);
    let err = refused(&[&at("clash.jsonl"), "--save", &store]);
    assert!(
        err.contains("\"d3\"") && err.contains("Nothing was written"),
        "{err}"
    );
    // Two kept documents under one id, into a new store: refused, no store made.
    let twice = vec![
        serde_json::json!({"id": "x", "text": text(100)}),
        serde_json::json!({"id": "x", "text": text(200)}),
    ];
    write_jsonl(dir.path().join("twice.jsonl").as_ref(), &twice);
    let err = refused(&[&at("twice.jsonl"), "--save", &at("fresh")]);
    assert!(
        err.contains("documents 1 and 2") && err.contains("\"x\""),
        "{err}"
    );
    assert!(!dir.path().join("fresh").exists());
    // The same id on a removed copy is no clash: only the first is stored.
    let copies = vec![
        serde_json::json!({"id": "y", "text": text(300)}),
        serde_json::json!({"id": "y", "text": text(300)}),
    ];
    write_jsonl(dir.path().join("copies.jsonl").as_ref(), &copies);
    let s = dedup(dir.path(), &[&at("copies.jsonl"), "--save", &store]);
    assert_eq!(s["settings"]["store"]["saved"].as_u64(), Some(1));

    let s = dedup(dir.path(), &[&input, "--against", &store]);
    assert_eq!(s["settings"]["store"]["stored_before"].as_u64(), Some(21));
    assert_eq!(
        s["settings"]["store"]["removed_for_stored"].as_u64(),
        Some(20)
    );
}
