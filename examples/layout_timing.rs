//! Times one layout conversion in a tight loop, beside memcpy of the same
//! bytes: the quickest way to compare kernel designs, and a small program to
//! run under `perf record` (criterion's `cargo bench --bench layout` is the
//! benchmark of record).
//!
//!     cargo run --release --example layout_timing -- BGR RGBx_BF16 320x240
//!     NPU_ZC_SIMD=avx2 perf record cargo run --release --example layout_timing
//!
//! Arguments: source format, destination format (normalised with ImageNet's
//! mean and std unless its elements are u8: RGBx, RGB...), WIDTHxHEIGHT (a 320x240 frame stays
//! in L2: the kernel's own cost), how many calls (best of them counts), and
//! threads (default 1; the memcpy beside it stays on one).

use std::hint::black_box;
use std::time::Instant;

use npu_zc::layout::{self, Destination, Format, Options, Source};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.to_string());
    let src_format: Format = arg(0, "BGR").parse()?;
    let dst_format: Format = arg(1, "RGBx_BF16").parse()?;
    let size = arg(2, "320x240");
    let (width, height) = size
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse::<usize>().ok()?, h.parse::<usize>().ok()?)))
        .ok_or_else(|| format!("the size is WIDTHxHEIGHT, e.g. 1920x1080, not {size:?}"))?;
    let calls: usize = arg(3, "2000").parse().map_err(|_| format!("calls is a number, not {:?}", arg(3, "")))?;

    let src: Vec<u8> = (0..layout::frame_nbytes(src_format, width, height, None)? as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut dst = vec![0u8; layout::frame_nbytes(dst_format, width, height, None)?];
    let normalised = !matches!(dst_format.element(), layout::Element::U8);
    let options = Options {
        mean: normalised.then_some([123.675, 116.28, 103.53]),
        scale: normalised.then_some([58.395, 57.12, 57.375]),
        threads: Some(arg(4, "1").parse().map_err(|_| format!("threads is a number, not {:?}", arg(4, "")))?),
        ..Options::default()
    };
    // memcpy of as many bytes as the conversion reads and writes.
    let half = (src.len() + dst.len()) / 2;
    let (from, mut to) = (vec![1u8; half], vec![0u8; half]);

    let (mut ours, mut copy) = (f64::MAX, f64::MAX);
    for _ in 0..calls {
        let start = Instant::now();
        let source = Source::new(src_format, &src, width, height, None)?;
        layout::convert(black_box(&source), Destination::new(dst_format, &mut dst, width, height, None)?, &options)?;
        ours = ours.min(start.elapsed().as_secs_f64());
        let start = Instant::now();
        to.copy_from_slice(black_box(&from));
        copy = copy.min(start.elapsed().as_secs_f64());
    }
    let pixels = (width * height) as f64;
    println!(
        "{src_format} -> {dst_format} {width}x{height} [{}]: {:.3} ns/pixel, memcpy {:.3} ns/pixel, {:.2}x memcpy",
        layout::describe(src_format, dst_format, &options)?,
        ours * 1e9 / pixels,
        copy * 1e9 / pixels,
        ours / copy
    );
    Ok(())
}
