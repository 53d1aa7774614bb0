//! Criterion micro-benchmarks: each chunker over the test fixtures.
//!
//! `cargo bench -p weft-bench` — throughput per fixture, in bytes/s.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use weft_chunking::{Chunker, ChunkingConfig};

fn chunking(c: &mut Criterion) {
    let chunker = Chunker::new(ChunkingConfig::default()).expect("default config is valid");
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../crates/chunking/tests/fixtures"
    );
    let mut group = c.benchmark_group("chunk");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    for name in &names {
        let Ok(text) = std::fs::read_to_string(format!("{dir}/{name}")) else {
            continue;
        };
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(name.as_str(), |b| {
            b.iter(|| chunker.chunk_text("bench", name, black_box(&text)))
        });
    }
    group.finish();
}

criterion_group!(benches, chunking);
criterion_main!(benches);
