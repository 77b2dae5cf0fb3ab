//! `fingerprint::compat` against every reference vector of the seomoz implementations.

mod common;

use common::*;
use neardup::fingerprint::compat;
use neardup::Error;

#[test]
fn compute_matches_reference() {
    let cases = vectors("compute.json");
    for case in array(&cases) {
        let hashes: Vec<u64> = array(&case["hashes"]).iter().map(dec).collect();
        let got = compat::compute(&hashes);
        assert_eq!(got, dec(&case["expected"]), "{}", case["name"]);
        assert_eq!(got, hex(&case["expected_hex"]), "{}", case["name"]);
    }
    assert!(array(&cases).len() >= 20);
}

#[test]
fn unsigned_hash_matches_reference() {
    for case in array(&vectors("unsigned_hash.json")) {
        let bytes = bytes_hex(&case["bytes_hex"]);
        assert_eq!(
            compat::unsigned_hash(&bytes),
            dec(&case["unsigned_hash"]),
            "{}",
            case["bytes_hex"]
        );
        assert_eq!(
            format!("{:016x}", compat::unsigned_hash(&bytes)),
            case["md5_hex"].as_str().unwrap()[..16]
        );
    }
}

#[test]
fn shingle_matches_reference() {
    for case in array(&vectors("shingle.json")) {
        let tokens: Vec<String> = array(&case["tokens"])
            .iter()
            .map(|t| t.to_string())
            .collect();
        let window = case["window"].as_i64().unwrap();
        if let Some(err) = case.get("expected_error") {
            // simhash-py raises "ValueError: Window size must be positive" for window <= 0;
            // a usize window can only be 0.
            assert!(window <= 0);
            let got = compat::shingle(&tokens, window.max(0) as usize).err();
            assert_eq!(got, Some(Error::InvalidWindow));
            assert!(err
                .as_str()
                .unwrap()
                .ends_with(&Error::InvalidWindow.to_string()));
            continue;
        }
        let got: Vec<Vec<String>> = compat::shingle(&tokens, window as usize)
            .unwrap()
            .map(|w| w.to_vec())
            .collect();
        let expected: Vec<Vec<String>> = array(&case["expected"])
            .iter()
            .map(|w| array(w).iter().map(|t| t.to_string()).collect())
            .collect();
        assert_eq!(got, expected, "window {window}");
    }
}

#[test]
fn num_differing_bits_matches_reference() {
    for case in array(&vectors("num_differing_bits.json")) {
        assert_eq!(
            u64::from(compat::num_differing_bits(dec(&case["a"]), dec(&case["b"]))),
            case["expected"].as_u64().unwrap()
        );
    }
}

#[test]
fn text_pipeline_matches_reference() {
    for case in array(&vectors("pipeline.json")) {
        let name = &case["name"];
        let text = case["text"].as_str().unwrap();
        let c4 = &case["char4"];
        let lower = text.to_lowercase();
        let tokens = compat::split_non_word(&lower);
        assert_eq!(tokens, strs(&c4["tokens"]), "{name}");
        assert_eq!(tokens.concat(), c4["joined"].as_str().unwrap(), "{name}");
        let hashes = compat::text_hashes(text);
        let expected: Vec<u64> = array(&c4["hashes"]).iter().map(dec).collect();
        assert_eq!(hashes, expected, "{name}");
        for (shingle, hash) in strs(&c4["shingles"]).iter().zip(&hashes) {
            assert_eq!(compat::unsigned_hash(shingle.as_bytes()), *hash, "{name}");
        }
        assert_eq!(
            compat::text_fingerprint(text),
            dec(&c4["simhash"]),
            "{name}"
        );
        assert_eq!(
            compat::text_fingerprint(text),
            hex(&c4["simhash_hex"]),
            "{name}"
        );

        // The word 4-gram variant: shingle the same tokens, join each with a space.
        let w4 = &case["word4_variant"];
        let shingles: Vec<String> = compat::shingle(&tokens, 4)
            .unwrap()
            .map(|w| w.join(" "))
            .collect();
        assert_eq!(shingles, strs(&w4["shingles"]), "{name}");
        let hashes: Vec<u64> = shingles
            .iter()
            .map(|s| compat::unsigned_hash(s.as_bytes()))
            .collect();
        let expected: Vec<u64> = array(&w4["hashes"]).iter().map(dec).collect();
        assert_eq!(hashes, expected, "{name}");
        assert_eq!(compat::compute(&hashes), dec(&w4["simhash"]), "{name}");
    }
}

#[test]
fn jenkins_matches_reference() {
    let legacy = vectors("legacy_jenkins_cyclic.json");
    for case in array(&legacy["jenkins64"]) {
        let bytes = bytes_hex(&case["bytes_hex"]);
        for (seed, expected) in case["jenkins64"].as_object().unwrap() {
            let seed: u64 = seed.parse().unwrap();
            assert_eq!(
                compat::jenkins64(&bytes, seed),
                hex(expected),
                "{} seed {seed}",
                case["bytes_hex"]
            );
        }
    }
}

#[test]
fn legacy_cpp_fingerprint_matches_reference() {
    let legacy = vectors("legacy_jenkins_cyclic.json");
    for case in array(&legacy["hash_text_jenkins_strspn"]) {
        let name = &case["name"];
        let text = case["text"].as_str().unwrap().as_bytes();
        let tokens: Vec<&[u8]> = compat::legacy_cpp_tokens(text).collect();
        let expected: Vec<&[u8]> = strs(&case["tokens"]).iter().map(|t| t.as_bytes()).collect();
        assert_eq!(tokens, expected, "{name}");
        let hashes: Vec<u64> = tokens.iter().map(|t| compat::jenkins64(t, 0)).collect();
        let expected: Vec<u64> = array(&case["token_jenkins64_hex"])
            .iter()
            .map(hex)
            .collect();
        assert_eq!(hashes, expected, "{name}");
        let cyclic: Vec<u64> = compat::cyclic3(hashes).collect();
        let expected: Vec<u64> = array(&case["cyclic3_hex"]).iter().map(hex).collect();
        assert_eq!(cyclic, expected, "{name}");
        assert_eq!(
            compat::legacy_cpp_fingerprint(text),
            hex(&case["hash_text_hex"]),
            "{name}"
        );
    }
    // simhash-cpp's own test.
    let jabberwocky = array(&legacy["hash_text_jenkins_strspn"])
        .iter()
        .find(|c| {
            c["name"]
                .as_str()
                .unwrap()
                .starts_with("jabberwocky (simhash-cpp")
        })
        .unwrap();
    assert_eq!(
        compat::legacy_cpp_fingerprint(jabberwocky["text"].as_str().unwrap().as_bytes()),
        0x0413_79a5_87c6_6880
    );
}

#[test]
fn legacy_cpp_tokens_stop_at_nul() {
    let tokens: Vec<&[u8]> = compat::legacy_cpp_tokens(b"ab1cd\0ef").collect();
    assert_eq!(tokens, vec![&b"ab"[..], &b"cd"[..]]);
}

#[test]
fn old_simhash_py_matches_reference() {
    let legacy = vectors("legacy_jenkins_cyclic.json");
    for case in array(&legacy["old_simhash_py_PyHash"]) {
        let text = case["text"].as_str().unwrap();
        assert_eq!(compat::split_non_word(text), strs(&case["re_split_tokens"]));
        assert_eq!(
            compat::legacy_py_hash(text),
            hex(&case["PyHash_hex"]),
            "{}",
            case["name"]
        );
    }
    for case in array(&legacy["old_simhash_py_PyHashFp"]) {
        let values: Vec<i64> = array(&case["values_int64"])
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(
            compat::legacy_py_hash_fp(&values),
            hex(&case["PyHashFp_hex"])
        );
    }
}
