//! Batch all-pairs on 1,000,000 random fingerprints with 10,000 planted near pairs
//! (distance 1..3), the workload of the peers' `allpairs` benchmark, at distance 3 with
//! 4, 5, 6 blocks and the planner's choice.
//!
//! `cargo bench -p neardup-cli --bench find_all`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use neardup::batch::{self, Distinct, Matcher};
use neardup::tables::Blocks;

// The allocator of the `neardup` binary, whose all-pairs this measures (memory.rs).
#[global_allocator]
static ALLOCATOR: neardup_cli::memory::Allocator = neardup_cli::memory::Allocator;

fn find_all(c: &mut Criterion) {
    let (fps, _) = neardup_cli::bench::generate(1_000_000, 10_000);
    let mut group = c.benchmark_group("find_all_1m_d3");
    group.sample_size(10);
    for blocks in [
        Blocks::Fixed(4),
        Blocks::Fixed(5),
        Blocks::Fixed(6),
        Blocks::Auto,
    ] {
        let layout = batch::layout(blocks, fps.len(), 3).unwrap();
        let matcher = Matcher::new(layout);
        group.bench_with_input(BenchmarkId::from_parameter(blocks), &fps, |b, fps| {
            b.iter(|| {
                let set = Distinct::from_slice(fps).unwrap();
                let mut pairs = 0usize;
                matcher
                    .find_all(&set, |_, _| {
                        pairs += 1;
                        Ok::<(), ()>(())
                    })
                    .unwrap();
                pairs
            })
        });
    }
    group.finish();
}

criterion_group!(benches, find_all);
criterion_main!(benches);
