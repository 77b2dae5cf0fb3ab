//! Single- against two-level tables for batch all-pairs on `n` random fingerprints with
//! planted near-duplicates: the time of each layout, its pairs, and what the planner
//! models for it.
//!
//! ```bash
//! cargo run --release -p neardup --example levels -- 10000000 3 4 5 6 4x4 5x4
//! ```
//!
//! Arguments: n, the distance, then layouts (`5` single-level, `4x4` two-level). One
//! planted pair per 10,000 fingerprints, 1 to `k` bits apart. Not a test: figures for
//! calibrating the planner and for docs/benchmarks.md.

use std::time::Instant;

use neardup::batch::{planner, Distinct, Matcher};
use neardup::tables::{Layout, Levels};

/// splitmix64.
fn mix(i: u64) -> u64 {
    let mut x = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().unwrap_or_else(|| "1000000".into()).parse()?;
    let k: u32 = args.next().unwrap_or_else(|| "3".into()).parse()?;
    let layouts: Vec<Levels> = args.map(|a| a.parse()).collect::<Result<_, _>>()?;
    if std::env::var_os("PLAN_ONLY").is_some() {
        // The planner's view alone, without a set: for sizes too large to build here.
        let best = planner::plan(n, k)?;
        println!(
            "{{\"n\": {n}, \"k\": {k}, \"planned\": \"{}\"}}",
            best.layout
        );
        for levels in layouts {
            let layout = match levels {
                Levels::One(m) => Layout::new(m, k)?,
                Levels::Two(a, b) => Layout::two_level(a, b, k)?,
                Levels::Auto => neardup::batch::layout(Levels::Auto, n, k)?,
            };
            let p = planner::price(n, &layout).map_or(f64::NAN, |p| p.cost / 1e6);
            println!("{{\"layout\": \"{layout}\", \"modelled_ms\": {p:.0}}}");
        }
        return Ok(());
    }
    let mut fps: Vec<u64> = (0..n as u64).map(mix).collect();
    let planted = n / 10_000;
    for i in 0..planted {
        let r = mix(1 << 40 | i as u64);
        let mut x = fps[i * 7];
        for j in 0..=(r % u64::from(k.max(1))) {
            x ^= 1 << ((r >> (8 * j + 8)) & 63);
        }
        fps[n - 1 - i] = x;
    }
    let started = Instant::now();
    let set = Distinct::from_vec(fps)?;
    let sort_ms = started.elapsed().as_secs_f64() * 1e3;
    let best = planner::plan(n, k)?;
    println!(
        "{{\"n\": {n}, \"k\": {k}, \"sort_ms\": {sort_ms:.1}, \"planned\": \"{}\"}}",
        best.layout
    );
    for levels in layouts {
        let layout = match levels {
            Levels::One(m) => Layout::new(m, k)?,
            Levels::Two(a, b) => Layout::two_level(a, b, k)?,
            Levels::Auto => neardup::batch::layout(Levels::Auto, n, k)?,
        };
        let modelled = planner::price(n, &layout).map_or(f64::NAN, |p| p.cost / 1e6);
        let started = Instant::now();
        let mut pairs = 0u64;
        Matcher::new(layout.clone())
            .find_all(&set, |_, _| {
                pairs += 1;
                Ok::<(), ()>(())
            })
            .ok();
        let ms = started.elapsed().as_secs_f64() * 1e3;
        println!(
            "{{\"layout\": \"{layout}\", \"tables\": {}, \"ms\": {ms:.1}, \"modelled_ms\": {modelled:.1}, \"pairs\": {pairs}}}",
            layout.table_count()
        );
    }
    Ok(())
}
