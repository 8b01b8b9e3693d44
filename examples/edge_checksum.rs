//! edge_checksum: the smallest end-to-end use of the npu_zc Rust core, and
//! what a C++/Rust integrator on a board starts from.
//!
//! It allocates one buffer the way the pipeline does (`auto`: a dma-buf heap,
//! else udmabuf, else memfd), maps it, converts a synthetic 224x224 BGR frame
//! into it through the layout engine, in the NPU's packed RGBx_BF16 layout
//! with ImageNet normalisation, inside a CPU-access bracket, reads it back in
//! another bracket, checks it against a plain-Rust reference and prints an
//! FNV-1a checksum of the frame. The checksum depends only on the frame,
//! never on the machine or the SIMD path: x86_64 and aarch64 must print the
//! same one.
//!
//!   cargo run --release --example edge_checksum [-- HEAP [WIDTHxHEIGHT]]
//!
//! `NPU_ZC_SIMD=scalar` (or neon, avx2...) picks the layout engine's code path.
//!
//! HEAP: auto (default), system, system-uncached, cma, udmabuf, memfd or a
//! path under /dev/dma_heap/. Cross-built for a board by
//! scripts/build-aarch64.sh; see docs/aarch64.md.

use std::process::ExitCode;

use npu_zc::buffer::{alloc, Access, HeapSpec, SyncMode};
use npu_zc::layout::{self, Destination, Format, Options, Source};

/// ImageNet mean and scale, in the destination's channel order (R, G, B):
/// out = (x - mean) / scale, as OpenVINO's PrePostProcessor does.
const MEAN: [f32; 3] = [123.675, 116.28, 103.53];
const SCALE: [f32; 3] = [58.395, 57.12, 57.375];

/// RGBx_BF16: 4 channels (R, G, B, pad = 0) of 2 bytes each, per pixel.
const DST_PIXEL_BYTES: usize = 8;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("edge_checksum: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let heap = args.next().unwrap_or_else(|| "auto".into());
    let (width, height) = match args.next() {
        Some(s) => parse_size(&s)?,
        None => (224, 224),
    };
    if let Some(extra) = args.next() {
        return Err(format!("unexpected argument {extra:?}; usage: edge_checksum [HEAP [WIDTHxHEIGHT]]").into());
    }

    let frame_bytes = width * height * DST_PIXEL_BYTES;
    let buf = alloc(frame_bytes, &HeapSpec::parse(&heap)?)?;
    println!("arch:     {}", std::env::consts::ARCH);
    let what = match (buf.is_dmabuf(), heap.as_str()) {
        (true, _) => "a DMA-BUF: devices can import it",
        (false, "auto") => "not a DMA-BUF: this machine offers no usable dma-buf heap or udmabuf",
        (false, _) => "not a DMA-BUF",
    };
    println!("buffer:   {} ({what}), {} bytes", buf.kind(), buf.size());

    // Only the frame is checksummed: the buffer itself is rounded up to the
    // page size, which differs between boards (4K, 16K, 64K).
    let mut map = buf.map(0, frame_bytes, Access::ReadWrite)?;
    let bgr = synthetic_bgr(width, height);

    let options = Options { mean: Some(MEAN), scale: Some(SCALE), ..Options::default() };
    let path = layout::describe(Format::Bgr, Format::RgbxBf16, &options)?;

    // Writes by the CPU are bracketed, so that caches are right for the device.
    let access = buf.cpu_access(SyncMode::Write)?;
    layout::convert(
        &Source::new(Format::Bgr, &bgr, width, height, None)?,
        Destination::new(Format::RgbxBf16, map.as_mut_slice()?, width, height, None)?,
        &options,
    )?;
    access.end()?;

    let access = buf.cpu_access(SyncMode::Read)?;
    let frame = map.as_slice();
    let sum = fnv1a64(frame);
    let exact = frame == reference_rgbx_bf16(&bgr).as_slice();
    access.end()?;

    println!("frame:    {width}x{height} BGR u8 -> RGBx_BF16, {frame_bytes} bytes (layout engine: {path})");
    if !exact {
        return Err("the converted frame differs from the plain-Rust reference".into());
    }
    println!("checksum: fnv1a64 {sum:016x} (bit-exact with the reference)");
    Ok(())
}

fn parse_size(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("size {s:?} is not WIDTHxHEIGHT (for example 224x224)");
    let (w, h) = s.split_once('x').ok_or_else(bad)?;
    let (w, h): (usize, usize) = (w.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?);
    if w == 0 || h == 0 || w > 16384 || h > 16384 {
        return Err(format!("size {s:?}: width and height must be 1..=16384"));
    }
    Ok((w, h))
}

/// A deterministic frame with gradients and texture in every channel, so
/// that every byte of every pixel reaches the checksum.
fn synthetic_bgr(width: usize, height: usize) -> Vec<u8> {
    let mut frame = Vec::with_capacity(width * height * 3);
    for y in 0..height {
        for x in 0..width {
            frame.push((x * 255 / width) as u8); // B: horizontal ramp
            frame.push((y * 255 / height) as u8); // G: vertical ramp
            frame.push(((x * 7 + y * 13) ^ (x * y)) as u8); // R: texture
        }
    }
    frame
}

/// The definition, one pixel at a time: BGR u8 (H, W, 3) -> RGBx_BF16
/// (H, W, 4), `(x - mean) / scale` in f32, little-endian, pad channel 0.
fn reference_rgbx_bf16(bgr: &[u8]) -> Vec<u8> {
    let mut dst = vec![0u8; bgr.len() / 3 * DST_PIXEL_BYTES];
    for (px, out) in bgr.chunks_exact(3).zip(dst.chunks_exact_mut(DST_PIXEL_BYTES)) {
        let rgb = [px[2], px[1], px[0]];
        for c in 0..3 {
            let v = (f32::from(rgb[c]) - MEAN[c]) / SCALE[c];
            out[2 * c..2 * c + 2].copy_from_slice(&bf16_bits(v).to_le_bytes());
        }
        out[6..8].fill(0);
    }
    dst
}

/// f32 -> bfloat16 with round-to-nearest-even (the values here are finite).
fn bf16_bits(v: f32) -> u16 {
    let bits = v.to_bits();
    let round = 0x7fff + ((bits >> 16) & 1);
    ((bits + round) >> 16) as u16
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}
