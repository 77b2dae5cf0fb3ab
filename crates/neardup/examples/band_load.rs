//! What an offline load spends on its band index: `n` random documents' band keys
//! written in batches into a [`BandIndex`] rebuilt in place (as `neardup load` writes
//! it), each batch's candidates looked up first (as the load's look-ahead does), with
//! the time of each part.
//!
//! ```bash
//! cargo run --release -p neardup --example band_load -- 10000000 50000
//! ```
//!
//! Arguments: n, the batch, then `serving` for the middle level a service's index keeps
//! (rebuilt beside the old main part, on this thread) instead of a load's, and `single`
//! for the lookups one at a time instead of a batch's at once
//! ([`BandIndex::lookup_many`]). Not a test:
//! figures for docs/service.md.

use std::time::Instant;

use neardup::corpus::BandIndex;
use neardup::jaccard::BandKeys;

/// splitmix64.
fn mix(i: u64) -> u64 {
    let mut x = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn keys(doc: u64) -> BandKeys {
    std::array::from_fn(|band| mix(doc << 5 | band as u64) as u32)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().unwrap_or_else(|| "10000000".into()).parse()?;
    let batch: u64 = args.next().unwrap_or_else(|| "50000".into()).parse()?;
    let rest: Vec<String> = args.collect();
    let serving = rest.iter().any(|a| a == "serving");
    let single = rest.iter().any(|a| a == "single");
    let mut index = if serving {
        BandIndex::new().background_rebuilds(false)
    } else {
        BandIndex::new().rebuilds_in_place(true)
    };
    let (mut lookups, mut inserts, mut found) = (0.0, 0.0, 0usize);
    let started = Instant::now();
    let mut next = 0;
    while next < n {
        let docs: Vec<(u64, BandKeys)> = (next..(next + batch).min(n))
            .map(|i| (i, keys(i)))
            .collect();
        let t = Instant::now();
        if single {
            for (_, k) in &docs {
                found += index.candidates(k).len();
            }
        } else {
            let keys: Vec<BandKeys> = docs.iter().map(|&(_, k)| k).collect();
            found += index
                .lookup_many(&keys)
                .iter()
                .map(|c| c.ids.len())
                .sum::<usize>();
        }
        lookups += t.elapsed().as_secs_f64();
        let t = Instant::now();
        index.insert_bulk(&docs)?;
        inserts += t.elapsed().as_secs_f64();
        next += batch;
    }
    let t = Instant::now();
    index.compact();
    let compact = t.elapsed().as_secs_f64();
    println!(
        "{{\"n\": {n}, \"batch\": {batch}, \"lookups_s\": {lookups:.2}, \"inserts_s\": {inserts:.2}, \
         \"compact_s\": {compact:.2}, \"seconds\": {:.2}, \"candidates\": {found}}}",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
