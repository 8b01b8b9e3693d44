//! Buffer costs per backend available on this kernel: alloc + map + first
//! touch + close, a sync start/end pair, and pool acquire/release.
//! `cargo bench --bench buffer` (inside the VM: scripts/vm-run.sh, for the real heaps).

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use npu_zc::buffer::{alloc, Access, BufferPool, HeapSpec, SyncMode, Wait};

const SIZES: [(usize, &str); 4] = [(64 << 10, "64KiB"), (1 << 20, "1MiB"), (8 << 20, "8MiB"), (32 << 20, "32MiB")];

fn backends() -> Vec<(HeapSpec, &'static str)> {
    let mut out = vec![(HeapSpec::Memfd, "memfd")];
    if Path::new("/dev/dma_heap/system").exists() {
        out.push((HeapSpec::DmaHeap("system".into()), "system"));
    }
    if Path::new("/dev/udmabuf").exists() {
        out.push((HeapSpec::Udmabuf, "udmabuf"));
    }
    out
}

fn page_touch(bytes: &mut [u8]) {
    // First touch of every page: what makes the kernel back the memory.
    for b in bytes.iter_mut().step_by(4096) {
        *b = 1;
    }
}

fn alloc_map_touch_close(c: &mut Criterion) {
    let mut g = c.benchmark_group("alloc_map_touch_close");
    g.sample_size(20).measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(300));
    for (spec, name) in backends() {
        for (size, label) in SIZES {
            if spec == HeapSpec::Udmabuf && size > (64 << 20) {
                continue;
            }
            g.throughput(Throughput::Bytes(size as u64));
            g.bench_with_input(BenchmarkId::new(name, label), &size, |b, &size| {
                b.iter(|| {
                    let buf = alloc(size, &spec).unwrap();
                    let mut map = buf.map_all(Access::ReadWrite).unwrap();
                    page_touch(map.as_mut_slice().unwrap());
                    black_box(&map);
                })
            });
        }
    }
    // The physical reference: anonymous memory from the allocator, touched the same way.
    for (size, label) in SIZES {
        g.bench_with_input(BenchmarkId::new("vec (reference)", label), &size, |b, &size| {
            b.iter(|| {
                let mut v = vec![0u8; size];
                page_touch(&mut v);
                black_box(&v);
            })
        });
    }
    g.finish();
}

fn sync_start_end(c: &mut Criterion) {
    let mut g = c.benchmark_group("sync_start_end");
    g.sample_size(30).measurement_time(Duration::from_secs(1)).warm_up_time(Duration::from_millis(200));
    for (spec, name) in backends() {
        for (size, label) in SIZES {
            let buf = alloc(size, &spec).unwrap();
            let mut map = buf.map_all(Access::ReadWrite).unwrap();
            page_touch(map.as_mut_slice().unwrap());
            g.bench_function(BenchmarkId::new(name, label), |b| {
                b.iter(|| buf.cpu_access(SyncMode::ReadWrite).unwrap().end().unwrap())
            });
        }
    }
    g.finish();
}

fn pool_acquire_release(c: &mut Criterion) {
    let pool = BufferPool::new(4, 1 << 20, &HeapSpec::Memfd).unwrap();
    c.bench_function("pool_acquire_release", |b| {
        b.iter(|| {
            let i = pool.acquire(Wait::No).unwrap();
            pool.release(black_box(i)).unwrap();
        })
    });
}

criterion_group!(benches, alloc_map_touch_close, sync_start_end, pool_acquire_release);
criterion_main!(benches);
