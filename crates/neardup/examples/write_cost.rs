//! What a service's single writes cost its band index as the middle level grows between
//! rebuilds of the main part: `main` random documents stored, then `writes` more inserted
//! one at a time (as `PUT`s are) with the level caps a service keeps at `at` documents,
//! and, every tenth of them, the CPU a write took since the last report: the writer's
//! thread (the copy of the top level) and the whole process (with the folds of full top
//! levels into the levels below, on threads of their own).
//!
//! ```bash
//! cargo run --release -p neardup --example write_cost -- 1000000 2900000 94000000
//! ```
//!
//! Arguments: main, writes, at (the size whose caps are kept; default main). The caps
//! are those of a main part of `at` documents, so a small main part shows what the
//! levels of a large one cost without building it. Not a test: figures for
//! docs/service.md.

use std::time::Instant;

use neardup::corpus::BandIndex;
use neardup::jaccard::{BandKeys, BANDS};

/// splitmix64.
fn mix(i: u64) -> u64 {
    let mut x = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn keys(id: u64) -> BandKeys {
    let mut k = [0u32; BANDS];
    for (band, key) in k.iter_mut().enumerate() {
        *key = mix(id * BANDS as u64 + band as u64) as u32;
    }
    k
}

/// CPU seconds of `who` (`libc::RUSAGE_SELF` or `libc::RUSAGE_THREAD`).
fn cpu(who: libc::c_int) -> f64 {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut u) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(u.ru_utime) + s(u.ru_stime)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let main: u64 = args.next().unwrap_or_else(|| "1000000".into()).parse()?;
    let writes: u64 = args.next().unwrap_or_else(|| "1000000".into()).parse()?;
    let at: usize = match args.next() {
        Some(a) => a.parse()?,
        None => main as usize,
    };
    let (top, mid) = BandIndex::level_caps(at);
    let stored: Vec<(u64, BandKeys)> = (0..main).map(|id| (id, keys(id))).collect();
    let mut ix = BandIndex::from_docs(stored)?.with_level_caps(top, mid);
    // A reader, as a service has: rebuilds then go beside the old main part.
    let _reader = ix.reader();
    println!("{{\"main\": {main}, \"at\": {at}, \"top_cap\": {top}, \"mid_cap\": {mid}}}");
    let every = (writes / 10).max(1);
    let (mut t0, mut w0, mut p0) = (
        Instant::now(),
        cpu(libc::RUSAGE_THREAD),
        cpu(libc::RUSAGE_SELF),
    );
    for i in 0..writes {
        let id = main + i;
        ix.insert(id, &keys(id))?;
        if (i + 1) % every == 0 {
            let (t, w, p) = (
                Instant::now(),
                cpu(libc::RUSAGE_THREAD),
                cpu(libc::RUSAGE_SELF),
            );
            let per = |x: f64| x / every as f64 * 1e6;
            println!(
                "{{\"written\": {}, \"wall_us\": {:.1}, \"writer_cpu_us\": {:.1}, \"process_cpu_us\": {:.1}}}",
                i + 1,
                per((t - t0).as_secs_f64()),
                per(w - w0),
                per(p - p0)
            );
            (t0, w0, p0) = (t, w, p);
        }
    }
    Ok(())
}
