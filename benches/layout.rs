//! Layout conversions at 224x224, 640x640, 1920x1080 and 3840x2160, one
//! thread, next to memcpy of the same bytes (a conversion reading R and
//! writing W bytes is compared with copying (R + W) / 2 bytes, which also
//! moves R + W). Throughput is in bytes moved per second.
//!
//!     cargo bench --bench layout                  # everything (about 2 minutes)
//!     cargo bench --bench layout -- 1920x1080     # one size
//!     NPU_ZC_SIMD=scalar cargo bench --bench layout   # the portable path

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use npu_zc::layout::{self, Destination, ElementType, Format, Options, Quantization, Source};

const SIZES: [(usize, usize); 4] = [(224, 224), (640, 640), (1920, 1080), (3840, 2160)];
const IMAGENET_MEAN: [f32; 3] = [123.675, 116.28, 103.53];
const IMAGENET_STD: [f32; 3] = [58.395, 57.12, 57.375];

fn noise(n: usize) -> Vec<u8> {
    (0..n as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}

fn conversions(c: &mut Criterion) {
    let cases: [(Format, Format, bool); 9] = [
        (Format::Bgr, Format::Rgbx, false),
        (Format::Bgr, Format::RgbxBf16, true),
        (Format::Bgr, Format::RgbxFp16, true),
        (Format::Bgr, Format::RgbpFloat, true),
        (Format::Bgr, Format::RgbpFp16, true),
        (Format::Rgba, Format::RgbxBf16, true),
        (Format::Gray, Format::RgbxBf16, true),
        (Format::Nv12, Format::Rgbx, false),
        (Format::Nv12, Format::RgbxBf16, true),
    ];
    for (width, height) in SIZES {
        let mut group = c.benchmark_group(format!("{width}x{height}"));
        group.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1));
        for (src_format, dst_format, normalised) in cases {
            let src = noise(layout::frame_nbytes(src_format, width, height, None).unwrap());
            let mut dst = vec![0u8; layout::frame_nbytes(dst_format, width, height, None).unwrap()];
            let options = Options {
                mean: normalised.then_some(IMAGENET_MEAN),
                scale: normalised.then_some(IMAGENET_STD),
                threads: Some(1),
                ..Options::default()
            };
            group.throughput(Throughput::Bytes((src.len() + dst.len()) as u64));
            let name = format!("{src_format}->{dst_format}{}", if normalised { " norm" } else { "" });
            group.bench_function(
                BenchmarkId::new(name, layout::describe(src_format, dst_format, &options).unwrap()),
                |b| {
                    b.iter(|| {
                        let source = Source::new(src_format, &src, width, height, None).unwrap();
                        let destination = Destination::new(dst_format, &mut dst, width, height, None).unwrap();
                        layout::convert(black_box(&source), destination, &options).unwrap();
                    })
                },
            );
            // The physical limit for the same bytes moved.
            let half = (src.len() + dst.len()) / 2;
            let (from, mut to) = (noise(half), vec![0u8; half]);
            group
                .bench_function(BenchmarkId::new("memcpy", format!("same bytes as {src_format}->{dst_format}")), |b| {
                    b.iter(|| to.copy_from_slice(black_box(&from)))
                });
        }
        group.finish();
    }
}

fn output_side(c: &mut Criterion) {
    let mut group = c.benchmark_group("output");
    group.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1));
    let n = 1920 * 1080 * 3;
    let floats: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 100.0).collect();
    let mut bytes = vec![0u8; n * 2];
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function("f32->bf16 6.2M", |b| {
        b.iter(|| layout::from_float32(black_box(&floats), &mut bytes, ElementType::Bf16, None).unwrap())
    });
    group.bench_function("f32->f16 6.2M", |b| {
        b.iter(|| layout::from_float32(black_box(&floats), &mut bytes, ElementType::F16, None).unwrap())
    });
    let mut back = vec![0f32; n];
    group.bench_function("bf16->f32 6.2M", |b| {
        b.iter(|| layout::to_float32(black_box(&bytes), ElementType::Bf16, &mut back, None).unwrap())
    });
    let q: Vec<i8> = noise(n).into_iter().map(|b| b as i8).collect();
    group.bench_function("dequantize i8 6.2M", |b| {
        b.iter(|| layout::dequantize(black_box(&q), &mut back, &Quantization::per_tensor(0.05, 3), None).unwrap())
    });
    let mut q_out = vec![0i8; n];
    group.bench_function("quantize i8 6.2M", |b| {
        b.iter(|| layout::quantize(black_box(&floats), &mut q_out, &Quantization::per_tensor(0.05, 3), None).unwrap())
    });
    let scores: Vec<u8> = floats[..1000].iter().flat_map(|x| x.to_ne_bytes()).collect();
    group.throughput(Throughput::Elements(1000));
    group.bench_function("top-5 of 1000 f32", |b| {
        b.iter(|| layout::topk(black_box(&scores), ElementType::F32, 1000, 5).unwrap())
    });
    group.finish();
}

criterion_group!(benches, conversions, output_side);
criterion_main!(benches);
