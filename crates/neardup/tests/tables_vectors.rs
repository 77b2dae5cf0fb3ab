//! Table layouts and permutations against every entry of the seomoz reference vectors.

mod common;

use common::*;
use neardup::tables::{num_tables, Layout};

#[test]
fn permutations_match_reference() {
    let entries = vector_lines("permutations.jsonl");
    assert!(entries.len() >= 15);
    for entry in &entries {
        let blocks = entry["blocks"].as_u64().unwrap() as usize;
        let distance = entry["distance"].as_u64().unwrap() as u32;
        let layout = Layout::new(blocks, distance).unwrap();
        let tables = array(&entry["tables"]);
        assert_eq!(layout.tables().len(), tables.len(), "{blocks}/{distance}");
        assert_eq!(
            num_tables(blocks, distance),
            entry["num_tables"].as_u64().unwrap() as u128
        );
        for (i, (ours, theirs)) in layout.tables().iter().zip(tables).enumerate() {
            let at = format!("blocks {blocks} distance {distance} table {i}");
            assert_eq!(ours.search_mask(), hex(&theirs["search_mask"]), "{at}");
            let bit_map: Vec<u32> = array(&theirs["bit_map"])
                .iter()
                .map(|b| b.as_u64().unwrap() as u32)
                .collect();
            assert_eq!(ours.bit_map().to_vec(), bit_map, "{at}");
            for pair in array(&theirs["apply"]) {
                let (x, y) = (hex(&pair[0]), hex(&pair[1]));
                assert_eq!(ours.permute(x), y, "{at}: permute {x:016x}");
                assert_eq!(ours.unpermute(y), x, "{at}: unpermute {y:016x}");
            }
        }
    }
}

#[test]
fn documented_example() {
    // COMPAT.md: m = 2, k = 1, first table maps 0x0123456789abcdef to 0x89abcdef01234567.
    let layout = Layout::new(2, 1).unwrap();
    assert_eq!(
        layout.tables()[0].permute(0x0123_4567_89ab_cdef),
        0x89ab_cdef_0123_4567
    );
}
