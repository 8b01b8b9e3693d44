//! `convert`: one fused pass from a source frame to a destination layout,
//! channel reorder, normalisation, type conversion and padding together,
//! split by rows across threads for large frames.

use std::sync::Arc;

use super::colour::{Colour, Rounding};
use super::error::{bail, Result};
use super::format::{frame_geometry, Channel, Element, Format};
use super::frame::{Destination, RowsMut, Source, SourcePixels};
use super::kernels;
#[cfg(target_arch = "x86_64")]
use super::kernels::x86::tables::Permutes;
use super::parallel;
use super::plan::{build_luts, Encoder, Nv12Plan, Plan, Rearrange, YuvOut};
use super::recent::Recent;
use super::resize::{self, Resize, Transform};
use crate::simd::SimdLevel;
use crate::simd::{f32_to_bf16, f32_to_f16};

/// How to convert. `mean` and `scale` are in the destination's channel order
/// (R, G, B for RGBx, B, G, R for BGRx); each value becomes `(x - mean) / scale`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub mean: Option<[f32; 3]>,
    pub scale: Option<[f32; 3]>,
    /// The fourth channel of packed layouts: a byte for RGBx/BGRx, a float otherwise.
    pub pad: f32,
    /// At most this many threads (1: the calling thread only); None: all cores.
    pub threads: Option<usize>,
    /// The code path; None: the best this CPU has (or `NPU_ZC_SIMD`).
    pub simd: Option<SimdLevel>,
    /// The source region, destination rectangle, fit and interpolation; the
    /// default reads the whole source into the whole destination.
    pub resize: Resize,
    /// The colour standard of a YUV source (ignored for the others); the
    /// default, BT.601 limited range, is OpenCV's.
    pub colour: Colour,
    /// The scale and zero point of an int8 destination (RGBx_I8, RGB_I8):
    /// each normalised value `x` becomes `clamp(round(x / scale) + zero_point,
    /// -128, 127)`, rounded half to even (ONNX QuantizeLinear, OpenVINO's
    /// FakeQuantize to int8). Required for those, refused for the others.
    pub quant: Option<(f32, i32)>,
    /// How a YUV source is rounded: exact (the default), or the fast 16-bit
    /// arithmetic (`colour::Fast`), which applies to NV12, NV21 and I420
    /// into u8 RGBx/BGRx/RGB/BGR pixels without resizing and is refused
    /// elsewhere.
    pub rounding: Rounding,
}

/// Frames smaller than this many output bytes per thread stay on one thread:
/// below it, waking threads costs more than it saves.
const MIN_BYTES_PER_THREAD: usize = 256 * 1024;
/// Bands per thread (of at least `MIN_BYTES_PER_BAND` output bytes): more
/// bands than threads let threads that start early take the work of one
/// that wakes late, instead of the call waiting for it.
const BANDS_PER_THREAD: usize = 4;
const MIN_BYTES_PER_BAND: usize = 64 * 1024;

/// Converts `src` into `dst`, resizing when the source region and the
/// destination rectangle differ in size (see [`Resize`]). Returns where it
/// read and wrote and how destination coordinates map back to the source.
/// Every argument is checked before anything is written, so an error leaves
/// `dst` untouched.
pub fn convert(src: &Source<'_>, dst: Destination<'_>, options: &Options) -> Result<Transform> {
    let threads = match options.threads {
        Some(0) => bail!("threads must be at least 1 (or None for every core)"),
        Some(n) => n,
        None => parallel::default_threads(),
    };
    let (src_size, dst_size) = ((src.width, src.height), (dst.width, dst.height));
    let transform = resize::place(src.format(), src_size, dst_size, &options.resize)?;
    if !resize::is_plain(&transform, src_size, dst_size) {
        let plan = Plan::cached(src.format(), dst.format, options, true)?;
        let level = SimdLevel::resolve(options.simd)?;
        let r = &options.resize;
        resize::run(src, dst, &plan, &transform, r.fill, r.interpolation, level, threads)?;
        return Ok(transform);
    }
    let plan = Plan::cached(src.format(), dst.format, options, false)?;

    run_in_bands(&plan, src, dst, threads);
    Ok(transform)
}

/// Runs `plan` over the frame on at most `threads` threads, the calling one
/// included. The frame is cut into bands (`BANDS_PER_THREAD` a thread); each
/// thread starts on its own run of them and then takes what is left of the
/// others (`parallel::for_each`), so a helper that starts late (a sleeping
/// core) delays the call by at most one band.
fn run_in_bands(plan: &Plan, src: &Source<'_>, dst: Destination<'_>, threads: usize) {
    let out_bytes = dst.planes.iter().map(|p| p.count() * p.row_bytes()).sum::<usize>();
    let threads = threads.min(out_bytes / MIN_BYTES_PER_THREAD).max(1);
    let wanted =
        if threads == 1 { 1 } else { (threads * BANDS_PER_THREAD).min(out_bytes / MIN_BYTES_PER_BAND).max(threads) };
    parallel::for_each(split_into_bands(src, dst, wanted), threads, |mut band| plan.run(band.src, &mut band.dst));
}

/// What makes two plans the same (floats by their bits).
#[derive(Clone, Copy, PartialEq, Eq)]
struct PlanKey {
    src: Format,
    dst: Format,
    mean: Option<[u32; 3]>,
    scale: Option<[u32; 3]>,
    pad: u32,
    level: SimdLevel,
    resampled: bool,
    colour: Colour,
    quant: Option<(u32, i32)>,
    rounding: Rounding,
}

impl Plan {
    /// The plan for these arguments, from a small cache of recent ones: a
    /// pipeline converts every frame with the same arguments, and building a
    /// plan (tables, the exactness check) costs microseconds.
    /// `resampled`: the encoder reads resampled rows, so NV12 is always
    /// decoded into rows first (never straight into the destination).
    pub(crate) fn cached(src: Format, dst: Format, options: &Options, resampled: bool) -> Result<Arc<Plan>> {
        static RECENT: Recent<PlanKey, Plan, 8> = Recent::new();
        let level = SimdLevel::resolve(options.simd)?;
        let bits = |v: Option<[f32; 3]>| v.map(|v| v.map(f32::to_bits));
        let key = PlanKey {
            src,
            dst,
            mean: bits(options.mean),
            scale: bits(options.scale),
            pad: options.pad.to_bits(),
            level,
            resampled,
            colour: options.colour,
            quant: options.quant.map(|(s, z)| (s.to_bits(), z)),
            rounding: options.rounding,
        };
        RECENT.get_or_build(key, || Plan::build(src, dst, options, level, resampled))
    }

    #[cfg(test)]
    pub(crate) fn new(src: Format, dst: Format, options: &Options, level: SimdLevel) -> Result<Plan> {
        Self::build(src, dst, options, level, false)
    }

    fn build(src: Format, dst: Format, options: &Options, level: SimdLevel, resampled: bool) -> Result<Plan> {
        if !src.is_source() {
            bail!("{src} is not a source format: convert reads {}", super::frame::names(Format::sources()));
        }
        if !dst.is_destination() {
            bail!("{dst} is not a destination format: convert writes {}", super::frame::names(Format::destinations()));
        }
        let element = dst.element();
        let mean = checked_channels("mean", options.mean, 0.0)?;
        let scale = checked_channels("scale", options.scale, 1.0)?;
        if let Some(k) = scale.iter().position(|&s| s == 0.0) {
            bail!("scale[{k}] is 0: normalisation divides by scale, so every scale must be non-zero");
        }
        let identity = mean == [0.0; 3] && scale == [1.0; 3];
        let fast = options.rounding == Rounding::Fast;
        if fast {
            checked_fast(src, dst, identity, resampled)?;
        }
        let quant = checked_quant(dst, options.quant)?;
        let pad = pad_bits(dst, options.pad)?;
        // Float kernels compute the pad slot like the others (see `mean`).
        let pad_value = if element == Element::U8 { 0.0 } else { options.pad };

        let dst_order = dst.channel_order();
        let position = |order: &[Channel], c: Channel| order.iter().position(|&o| o == c).unwrap();
        let (src_channels, map) = match src {
            Format::Gray => (1, [0; 3]),
            // The YUV formats are decoded to R, G, B, pad bytes first.
            f if f.is_yuv() => (4, dst_order.map_to_rgb()),
            _ => (src.channels(), [0, 1, 2].map(|k| position(src.channel_order(), dst_order[k]))),
        };

        let luts = build_luts(element, mean, scale, quant);
        let mut plan = Plan {
            src_channels,
            map,
            mean: [mean[0], mean[1], mean[2], -pad_value],
            scale: [scale[0], scale[1], scale[2], 1.0],
            inv_scale: [1.0 / scale[0], 1.0 / scale[1], 1.0 / scale[2], 1.0],
            bias: [0, 1, 2, 3].map(|k| if k < 3 { -mean[k] / scale[k] } else { pad_value }),
            luts,
            pad,
            quant,
            #[cfg(target_arch = "x86_64")]
            permutes: Permutes::new(src_channels, map),
            encoder: kernels::scalar_encoder(element, dst.is_planar(), src_channels, dst.channels()),
            nv12: None,
            rearrange: None,
            description: "scalar/lut".into(),
        };
        if src.is_yuv() {
            // u8 destinations without normalisation are decoded into directly,
            // 4-byte (RGBx, BGRx) or 3-byte (RGB, BGR) pixels.
            let direct = !resampled && element == Element::U8 && identity && !dst.is_planar();
            let bytes = if direct { dst.channels() } else { 4 };
            let (mut decode, mut name) = yuv_decoder(src, level, bytes);
            let mut pair = kernels::nv12_pair_decoder(level, bytes);
            // The fast rounding where the level has it (checked_fast: a direct 8-bit 4:2:0 decode).
            if let Some((fast_pair, fast_name)) = kernels::nv12_fast_pair_decoder(level, bytes).filter(|_| fast) {
                decode = kernels::scalar::nv12_row_fast;
                pair = fast_pair;
                name = if src == Format::I420 { fast_name.replacen("nv12", "i420", 1) } else { fast_name.into() };
            }
            plan.rearrange = match src {
                Format::Yuyv | Format::Uyvy => Some(Rearrange::Split(kernels::splitter(level).0)),
                // I420 rows are interleaved only where a resize decodes them one at a time.
                Format::I420 if resampled => Some(Rearrange::Interleave(kernels::interleaver(level, 1).0)),
                Format::I010 => Some(Rearrange::Interleave(kernels::interleaver(level, 2).0)),
                _ => None,
            };
            plan.description = if direct { name.clone() } else { format!("{name} + scalar/lut") };
            plan.nv12 = Some(Nv12Plan {
                decode,
                pair,
                packed: match src {
                    Format::Yuyv | Format::Uyvy => {
                        kernels::yuv422_decoder(level, bytes, src == Format::Yuyv).map(|k| k.0)
                    }
                    _ => None,
                },
                direct,
                out: YuvOut {
                    pos: if direct {
                        [0, 1, 2].map(|k| position(dst_order, [Channel::R, Channel::G, Channel::B][k]))
                    } else {
                        [0, 1, 2]
                    },
                    pad: if direct { pad as u8 } else { 0 },
                    bytes,
                    k: if src.is_10bit() { options.colour.coefficients10() } else { options.colour.coefficients() },
                }
                .chroma_order(src),
            });
            if direct {
                return Ok(plan);
            }
        }
        let scalar_encoder = plan.encoder;
        // The SIMD kernels write planes or 4-channel pixels; 3-channel pixels
        // use the tables, but for a plain byte reorder (or a dropped pad) of u8.
        let candidates = if element == Element::I8 {
            kernels::int8_encoders(level, src_channels, dst.channels())
        } else if dst.is_planar() || dst.has_pad() {
            kernels::simd_encoders(level, element, dst.is_planar(), src_channels, identity)
        } else if element == Element::U8 && identity && src_channels >= 3 && level != SimdLevel::Scalar {
            kernels::byte_reorder(level, src_channels, map).into_iter().collect()
        } else {
            Vec::new()
        };
        for candidate in candidates {
            if plan.reproduces(scalar_encoder, candidate.encoder, element) {
                plan.encoder = candidate.encoder;
                plan.description = match &plan.nv12 {
                    Some(_) => format!("{} + {}", yuv_decoder(src, level, 4).1, candidate.name),
                    None => candidate.name.to_string(),
                };
                break;
            }
        }
        Ok(plan)
    }

    /// Whether `candidate` writes exactly what the scalar reference writes for
    /// every u8 value in every channel: the input domain is finite, so this
    /// check is a proof, and fast arithmetic (a reciprocal, a hardware bf16
    /// conversion) is used only where it is exact for these parameters.
    fn reproduces(&self, reference: Encoder, candidate: Encoder, element: Element) -> bool {
        // 256 values, then more pixels so that vector loops cover all 256.
        const PIXELS: usize = 256 + 64;
        let c = self.src_channels;
        let src: Vec<u8> = (0..PIXELS * c).map(|i| (i / c) as u8).collect();
        let run = |encoder: Encoder| {
            let size = element.size();
            let mut out = vec![0u8; PIXELS * 4 * size]; // room for the widest layout
            match encoder {
                // SAFETY: the encoders of a plan are for this CPU (see `run_row`).
                Encoder::Packed(f) => unsafe { f(self, &src, &mut out) },
                Encoder::Planar(f) => {
                    let (p0, rest) = out.split_at_mut(PIXELS * size);
                    let (p1, rest) = rest.split_at_mut(PIXELS * size);
                    // SAFETY: as above.
                    unsafe { f(self, &src, p0, p1, &mut rest[..PIXELS * size]) }
                }
            }
            out
        };
        run(reference) == run(candidate)
    }
}

trait RgbPositions {
    fn map_to_rgb(&self) -> [usize; 3];
}

impl RgbPositions for &[Channel] {
    /// For each channel of this order, its index in an R, G, B pixel.
    fn map_to_rgb(&self) -> [usize; 3] {
        [0, 1, 2].map(|k| match self[k] {
            Channel::R => 0,
            Channel::G => 1,
            Channel::B => 2,
        })
    }
}

fn checked_channels(name: &str, values: Option<[f32; 3]>, default: f32) -> Result<[f32; 3]> {
    let values = values.unwrap_or([default; 3]);
    if let Some(k) = values.iter().position(|v| !v.is_finite()) {
        bail!("{name}[{k}] is {}: normalisation needs finite numbers", values[k]);
    }
    Ok(values)
}

/// The int8 destinations' scale and zero point, checked.
fn checked_quant(dst: Format, quant: Option<(f32, i32)>) -> Result<Option<(f32, i32)>> {
    match (dst.element(), quant) {
        (Element::I8, None) => bail!(
            "{dst} holds int8 values quantised with the model input's scale and zero point: \
             pass them (quant_scale=, zero_point=)"
        ),
        (Element::I8, Some((s, z))) => {
            if !(s.is_finite() && s > 0.0) {
                bail!("the quantisation scale must be a positive finite number, not {s}");
            }
            if !(-128..=127).contains(&z) {
                bail!("the zero point of an int8 destination must be in -128..=127, not {z}");
            }
            Ok(Some((s, z)))
        }
        (_, Some(_)) => {
            bail!("a quantisation scale and zero point are for the int8 destinations (RGBx_I8, RGB_I8), not {dst}")
        }
        (_, None) => Ok(None),
    }
}

fn pad_bits(dst: Format, pad: f32) -> Result<u32> {
    if !dst.has_pad() {
        if pad != 0.0 {
            bail!("{dst} has no pad channel, so a pad value ({pad}) has nowhere to go: leave pad at 0");
        }
        return Ok(0);
    }
    Ok(match dst.element() {
        Element::U8 => {
            if !(0.0..=255.0).contains(&pad) || pad.fract() != 0.0 {
                bail!("pad {pad} does not fit the pad byte of {dst}: use an integer from 0 to 255");
            }
            pad as u32
        }
        Element::I8 => {
            if !(-128.0..=127.0).contains(&pad) || pad.fract() != 0.0 {
                bail!("pad {pad} does not fit the pad byte of {dst}: use an integer from -128 to 127");
            }
            pad as i8 as u8 as u32
        }
        Element::Bf16 => f32_to_bf16(pad) as u32,
        Element::F16 => f32_to_f16(pad) as u32,
        Element::F32 => pad.to_bits(),
    })
}

/// The fast rounding applies to the 8-bit 4:2:0 sources decoded straight
/// into u8 pixels; anywhere else it is refused rather than ignored.
fn checked_fast(src: Format, dst: Format, identity: bool, resampled: bool) -> Result<()> {
    if !matches!(src, Format::Nv12 | Format::Nv21 | Format::I420) {
        bail!("rounding=\"fast\" applies to NV12, NV21 and I420 sources, not {src}: use rounding=\"exact\"");
    }
    if dst.element() != Element::U8 || dst.is_planar() || !identity {
        bail!(
            "rounding=\"fast\" applies to u8 RGBx, BGRx, RGB and BGR destinations without mean or scale, not {dst}: use rounding=\"exact\""
        );
    }
    if resampled {
        bail!("rounding=\"fast\" applies to conversions without resizing: a resize decodes exactly; use rounding=\"exact\"");
    }
    Ok(())
}

/// The NV12 decoder of this level and, for the camera formats, the
/// rearrangement before it: e.g. "avx2/yuv422-split + avx2/nv12".
fn yuv_decoder(src: Format, level: SimdLevel, bytes: usize) -> (super::plan::Nv12Row, String) {
    let (decode, name) = match src {
        Format::P010 => kernels::yuv10_decoder(level, bytes, false),
        Format::I010 => kernels::yuv10_decoder(level, bytes, true),
        _ => kernels::nv12_decoder(level, bytes),
    };
    if let Some((_, packed)) = kernels::yuv422_decoder(level, bytes, src == Format::Yuyv)
        .filter(|_| matches!(src, Format::Yuyv | Format::Uyvy))
    {
        return (decode, packed.to_string());
    }
    if src == Format::I420 {
        // The NV12 decoder reads I420's U and V rows where they lie (`plan::Chroma`).
        return (decode, name.replacen("nv12", "i420", 1));
    }
    let before = match src {
        Format::Yuyv | Format::Uyvy => Some(kernels::splitter(level).1),
        Format::I010 => Some(kernels::interleaver(level, 2).1),
        _ => None,
    };
    (decode, before.map_or(name.to_string(), |b| format!("{b} + {name}")))
}

/// A horizontal slice of the frame, converted by one thread.
struct Band<'a> {
    src: SourcePixels<'a>,
    dst: Vec<RowsMut<'a>>,
}

/// Up to `wanted` bands of about equal height (even, for NV12's shared chroma rows).
fn split_into_bands<'a>(src: &Source<'a>, dst: Destination<'a>, wanted: usize) -> Vec<Band<'a>> {
    let height = src.height;
    let step = match src.pixels {
        SourcePixels::Nv12 { .. } | SourcePixels::I420 { .. } => 2,
        SourcePixels::P010 { .. } | SourcePixels::I010 { .. } => 2,
        SourcePixels::Packed { .. } | SourcePixels::Yuv422 { .. } => 1,
    };
    let rows_per_band = height.div_ceil(wanted).next_multiple_of(step).max(step);
    let mut bands = Vec::with_capacity(wanted);
    let mut planes = dst.planes;
    let mut start = 0;
    while start < height {
        let n = rows_per_band.min(height - start);
        let mut band_planes = Vec::with_capacity(planes.len());
        let mut rest = Vec::with_capacity(planes.len());
        for plane in planes {
            let (head, tail) = plane.split_at(n);
            band_planes.push(head);
            rest.push(tail);
        }
        planes = rest;
        let band_src = match src.pixels {
            SourcePixels::Packed { format, rows } => SourcePixels::Packed { format, rows: rows.sub(start, n) },
            SourcePixels::Nv12 { y, uv, vu } => {
                SourcePixels::Nv12 { y: y.sub(start, n), uv: uv.sub(start / 2, n / 2), vu }
            }
            SourcePixels::Yuv422 { rows, y_even } => SourcePixels::Yuv422 { rows: rows.sub(start, n), y_even },
            SourcePixels::I420 { y, u, v } => {
                SourcePixels::I420 { y: y.sub(start, n), u: u.sub(start / 2, n / 2), v: v.sub(start / 2, n / 2) }
            }
            SourcePixels::P010 { y, uv } => SourcePixels::P010 { y: y.sub(start, n), uv: uv.sub(start / 2, n / 2) },
            SourcePixels::I010 { y, u, v } => {
                SourcePixels::I010 { y: y.sub(start, n), u: u.sub(start / 2, n / 2), v: v.sub(start / 2, n / 2) }
            }
        };
        bands.push(Band { src: band_src, dst: band_planes });
        start += n;
    }
    bands
}

/// Which kernels `convert` would run for these formats and options, e.g.
/// "avx512/bf16-native/fma" or "scalar/lut": for tests and benchmarks.
pub fn describe(src: Format, dst: Format, options: &Options) -> Result<String> {
    Ok(Plan::cached(src, dst, options, false)?.description.clone())
}

/// Which kernels `convert` would run to resize a `src_size` frame into a
/// `dst_size` one with these options, e.g. "avx2/area + avx2/bf16/fma", and
/// the transform it would return: checks the geometry without converting.
pub fn describe_resize(
    src: Format,
    dst: Format,
    src_size: (usize, usize),
    dst_size: (usize, usize),
    options: &Options,
) -> Result<(String, Transform)> {
    frame_geometry(src, src_size.0, src_size.1, None)?;
    frame_geometry(dst, dst_size.0, dst_size.1, None)?;
    let transform = resize::place(src, src_size, dst_size, &options.resize)?;
    if resize::is_plain(&transform, src_size, dst_size) {
        return Ok((describe(src, dst, options)?, transform));
    }
    let plan = Plan::cached(src, dst, options, true)?;
    let level = SimdLevel::resolve(options.simd)?;
    let interpolation = options.resize.interpolation;
    let method = resize::describe(interpolation, &transform, level, plan.src_channels);
    let mut steps = plan.description.clone();
    let path = resize::yuv_path(src, &plan, interpolation, &transform, level);
    if path == resize::YuvPath::Fused {
        // The x pass decodes what it reads: no row is decoded (or interleaved) first.
        // (AVX2's at both x86 levels: `kernels::row_kernels`.)
        steps = steps.replacen(&yuv_decoder(src, level, 4).1, "avx2/yuv420-fused", 1);
    } else if src == Format::I420 {
        // A resize decodes NV12 rows: a strong shrink gathers I420's chroma groups from its
        // planes, a mild one interleaves its U and V rows first.
        let before =
            if path == resize::YuvPath::Gathered { "scalar/i420-gather" } else { kernels::interleaver(level, 1).1 };
        let decode = format!("{before} + {}", kernels::nv12_decoder(level, 4).1);
        steps = steps.replacen(&yuv_decoder(src, level, 4).1, &decode, 1);
    }
    Ok((format!("{method} + {steps}"), transform))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Runs `encoder` over one row of pixels `src`, into a fresh row.
    fn encode(plan: &Plan, encoder: Encoder, element: Element, src: &[u8]) -> Vec<u8> {
        let (pixels, size) = (src.len() / plan.src_channels, element.size());
        let mut out = vec![0u8; pixels * 4 * size];
        match encoder {
            // SAFETY: the encoders come from `simd_encoders` for an available level.
            Encoder::Packed(f) => unsafe { f(plan, src, &mut out) },
            Encoder::Planar(f) => {
                let (p0, rest) = out.split_at_mut(pixels * size);
                let (p1, rest) = rest.split_at_mut(pixels * size);
                // SAFETY: as above.
                unsafe { f(plan, src, p0, p1, &mut rest[..pixels * size]) }
            }
        }
        out
    }

    proptest! {
        /// Every SIMD kernel that is exact by construction (a true division,
        /// bf16 rounded to nearest even in integer arithmetic: not "-fast",
        /// which rounds ties away, nor "-native", which flushes subnormals)
        /// writes what the tables write, for any parameters and pixels. The
        /// fast arithmetics share all their data movement with these, so this
        /// checks the gathers, packs and stores of every kernel, whether or not
        /// a plan would pick it (the plan's own check cannot see a channel mix-up:
        /// its probe pixels have equal channels).
        #[test]
        fn exact_simd_kernels_match_the_tables(
            src_format in prop::sample::select(vec![Format::Gray, Format::Bgr, Format::Rgb, Format::Rgba, Format::Bgra]),
            dst in prop::sample::select(vec![Format::RgbxBf16, Format::RgbxFp16, Format::RgbpFloat, Format::RgbpFp16, Format::BgrpFloat]),
            mean in prop::array::uniform3(-300.0f32..300.0),
            scale in prop::array::uniform3(prop_oneof![0.001f32..500.0, -500.0f32..-0.001]),
            pad in -4.0f32..4.0,
            pixels in 1usize..80,
            seed in any::<u64>(),
        ) {
            let pad = if dst.has_pad() { pad } else { 0.0 };
            let options = Options { mean: Some(mean), scale: Some(scale), pad, ..Options::default() };
            let src = random_bytes(pixels * src_format.channels(), seed);
            for level in SimdLevel::available() {
                let plan = Plan::new(src_format, dst, &options, level).unwrap();
                let element = dst.element();
                let reference = kernels::scalar_encoder(element, dst.is_planar(), plan.src_channels, dst.channels());
                let want = encode(&plan, reference, element, &src);
                for kernel in kernels::simd_encoders(level, element, dst.is_planar(), plan.src_channels, false) {
                    let name = kernel.name;
                    if name.ends_with("/div") && !name.contains("-fast") && !name.contains("-native") {
                        prop_assert!(encode(&plan, kernel.encoder, element, &src) == want, "{src_format}->{dst}: {name}");
                    }
                }
            }
        }
    }

    /// `n` bytes from a xorshift seeded by `seed` (the property tests' pixels).
    fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut state = seed | 1;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    }

    proptest! {
        /// The int8 kernels' exact form (two true divisions) writes what the
        /// tables write for any parameters and pixels, every source width
        /// and both destinations (their gathers, packs and stores).
        #[test]
        fn exact_int8_kernels_match_the_tables(
            src_format in prop::sample::select(vec![Format::Gray, Format::Bgr, Format::Rgba]),
            dst in prop::sample::select(vec![Format::RgbxI8, Format::RgbI8]),
            mean in prop::array::uniform3(-300.0f32..300.0),
            scale in prop::array::uniform3(prop_oneof![0.01f32..500.0, -500.0f32..-0.01]),
            quant in (prop_oneof![0.0005f32..0.05, 0.05f32..8.0], -128i32..128),
            pad in -128i32..128,
            pixels in 1usize..80,
            seed in any::<u64>(),
        ) {
            let pad = if dst.has_pad() { pad as f32 } else { 0.0 };
            let options = Options { mean: Some(mean), scale: Some(scale), pad, quant: Some(quant), ..Options::default() };
            let src = random_bytes(pixels * src_format.channels(), seed);
            for level in SimdLevel::available() {
                let plan = Plan::new(src_format, dst, &options, level).unwrap();
                let reference = kernels::scalar_encoder(Element::I8, false, plan.src_channels, dst.channels());
                let want = encode(&plan, reference, Element::I8, &src);
                for kernel in kernels::int8_encoders(level, plan.src_channels, dst.channels()) {
                    if kernel.name.ends_with("/div") {
                        prop_assert!(encode(&plan, kernel.encoder, Element::I8, &src) == want, "{src_format}->{dst}: {}", kernel.name);
                    }
                }
            }
        }
    }

    /// ImageNet-like parameters and a typical input quantisation take the
    /// SIMD int8 kernels.
    #[test]
    fn int8_destinations_take_simd_kernels() {
        let options = Options {
            mean: Some([123.675, 116.28, 103.53]),
            scale: Some([58.395, 57.12, 57.375]),
            quant: Some((0.0187, -3)),
            ..Options::default()
        };
        for level in SimdLevel::available().into_iter().filter(|&l| l != SimdLevel::Scalar) {
            for (src, dst) in
                [(Format::Bgr, Format::RgbxI8), (Format::Rgba, Format::RgbI8), (Format::Nv12, Format::RgbxI8)]
            {
                let plan = Plan::new(src, dst, &options, level).unwrap();
                assert!(plan.description.contains("/i8"), "{src}->{dst} at {level}: {}", plan.description);
            }
        }
    }

    /// The fast arithmetics are really used for ordinary parameters (ImageNet's).
    #[test]
    fn imagenet_parameters_take_a_fast_arithmetic() {
        let options = Options {
            mean: Some([123.675, 116.28, 103.53]),
            scale: Some([58.395, 57.12, 57.375]),
            ..Options::default()
        };
        for level in SimdLevel::available().into_iter().filter(|&l| l != SimdLevel::Scalar) {
            for dst in [Format::RgbxBf16, Format::RgbxFp16, Format::RgbpFloat, Format::RgbpFp16] {
                let plan = Plan::new(Format::Bgr, dst, &options, level).unwrap();
                if plan.description.contains("lut") {
                    continue; // no SIMD kernel for this case at this level
                }
                assert!(!plan.description.ends_with("/div"), "{dst} at {level}: {}", plan.description);
            }
        }
    }
}
