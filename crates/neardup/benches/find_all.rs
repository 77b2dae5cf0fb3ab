//! Batch all-pairs on 1,000,000 random fingerprints with 10,000 planted near pairs
//! (distance 1..3), the workload of the peers' `allpairs` benchmark, at distance 3 with
//! 4, 5, 6 blocks and the planner's choice.
//!
//! `cargo bench -p neardup --bench find_all`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use neardup::batch::{Distinct, Matcher};
use neardup::tables::{Blocks, Layout};

/// splitmix64, as the peers' gen_data.py.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn workload(n: usize, planted: usize) -> Vec<u64> {
    let mut rng = SplitMix(3);
    let mut fps: Vec<u64> = (0..n).map(|_| rng.next()).collect();
    for i in 0..planted {
        let mut v = fps[i];
        for _ in 0..1 + rng.next() % 3 {
            v ^= 1 << (rng.next() % 64);
        }
        fps[n / 2 + i] = v;
    }
    fps
}

fn find_all(c: &mut Criterion) {
    let fps = workload(1_000_000, 10_000);
    let mut group = c.benchmark_group("find_all_1m_d3");
    group.sample_size(10);
    for blocks in [
        Blocks::Fixed(4),
        Blocks::Fixed(5),
        Blocks::Fixed(6),
        Blocks::Auto,
    ] {
        let layout = Layout::for_batch(blocks, fps.len(), 3).unwrap();
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
