//! The plan of one conversion: everything a row kernel needs, fixed once per
//! call (the reference tables, the normalisation constants, the byte
//! permutations, the kernels chosen), and the row loop that runs it.
//!
//! Arrows run one way: `convert` builds plans and picks kernels for them;
//! the kernels read plans; this module knows neither (it holds, on x86, the
//! x86 home's plain tables, `kernels/x86/tables.rs`, which import nothing).

use super::colour::Coefficients;
use super::format::{Element, Format};
use super::frame::{Rows, RowsMut, SourcePixels};
#[cfg(target_arch = "x86_64")]
use super::kernels::x86::tables::Permutes;
use crate::simd::{f32_to_bf16, f32_to_f16};

/// A source row of pixels to one packed destination row.
pub(crate) type PackedRow = unsafe fn(&Plan, &[u8], &mut [u8]);
/// A source row of pixels to one row of each of three planes.
pub(crate) type PlanarRow = unsafe fn(&Plan, &[u8], &mut [u8], &mut [u8], &mut [u8]);
/// A Y row and its UV row to 3- or 4-byte pixels (see [`YuvOut`]); for
/// 10-bit sources, rows of little-endian u16 samples.
pub(crate) type Nv12Row = unsafe fn(&[u8], &[u8], &mut [u8], &YuvOut);
/// Two Y rows that share one chroma row (NV12's U,V row, or I420's U and V
/// rows) to two rows of pixels: the chroma terms computed once for both.
pub(crate) type Nv12Pair = unsafe fn([&[u8]; 2], Chroma<'_>, [&mut [u8]; 2], &YuvOut);
/// A packed 4:2:2 row (YUYV or UYVY) decoded straight to pixels (see [`YuvOut`]).
pub(crate) type Yuv422Row = unsafe fn(&[u8], &mut [u8], &YuvOut);
/// A packed 4:2:2 row split into its even and its odd bytes (Y and U,V).
pub(crate) type SplitRow = unsafe fn(&[u8], &mut [u8], &mut [u8]);
/// A U row and a V row interleaved into one U,V row.
pub(crate) type InterleaveRow = unsafe fn(&[u8], &[u8], &mut [u8]);

/// A 4:2:0 row's chroma: NV12's interleaved U, V (V, U for NV21), or
/// I420's two planes, read where they lie.
#[derive(Clone, Copy)]
pub(crate) enum Chroma<'a> {
    Interleaved(&'a [u8]),
    Planar(&'a [u8], &'a [u8]),
}

impl<'a> Chroma<'a> {
    /// The pixels the row's chroma covers (two a U, V pair).
    pub(crate) fn pixels(self) -> usize {
        match self {
            Chroma::Interleaved(uv) => uv.len(),
            Chroma::Planar(u, v) => 2 * u.len().min(v.len()),
        }
    }

    /// The chroma of the pixels from `x` (even) on: the first `x` skipped; empty past the end.
    pub(crate) fn skip_pixels(self, x: usize) -> Chroma<'a> {
        match self {
            Chroma::Interleaved(uv) => Chroma::Interleaved(&uv[x.min(uv.len())..]),
            Chroma::Planar(u, v) => Chroma::Planar(&u[(x / 2).min(u.len())..], &v[(x / 2).min(v.len())..]),
        }
    }

    /// The U and V samples of pixel pair `j` (V, U for NV21): the fused
    /// resize pass's (x86 alone).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn pair(self, j: usize) -> (u8, u8) {
        match self {
            Chroma::Interleaved(uv) => (uv[2 * j], uv[2 * j + 1]),
            Chroma::Planar(u, v) => (u[j], v[j]),
        }
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Encoder {
    Packed(PackedRow),
    Planar(PlanarRow),
}

/// An encoder and its name (`level/what/arithmetic`), for diagnostics and tests.
///
/// SIMD encoders compute `(x - mean) / scale` either as `x * (1 / scale) +
/// (-mean / scale)` in one fused multiply-add ("fma": fast, not always
/// exact) or with a true division ("div": IEEE-exact like the reference);
/// a plan takes the first candidate that reproduces the reference.
#[derive(Clone, Copy)]
pub(crate) struct Kernel {
    pub name: &'static str,
    pub encoder: Encoder,
}

/// Per destination channel, the destination value of each of the 256 u8 inputs.
pub(crate) enum Luts {
    U8(Box<[[u8; 256]; 3]>),
    U16(Box<[[u16; 256]; 3]>),
    F32(Box<[[f32; 256]; 3]>),
}

/// Everything a row kernel needs, fixed once per call.
pub(crate) struct Plan {
    /// Values per pixel of the rows the encoder reads (4 for decoded NV12).
    pub src_channels: usize,
    /// For destination channel k, its index within a source pixel.
    pub map: [usize; 3],
    /// Normalisation per destination channel. The fourth entry makes the pad
    /// slot (read as 0) come out as the pad value: 0 * 1 + pad, (0 + pad) / 1.
    pub mean: [f32; 4],
    pub scale: [f32; 4],
    pub inv_scale: [f32; 4],
    /// `-mean / scale`, for kernels that compute `x * inv_scale + bias`.
    pub bias: [f32; 4],
    pub luts: Luts,
    /// Bits of the pad value in the destination element (u8, i8, f16/bf16 or f32).
    pub pad: u32,
    /// The scale and zero point of an int8 destination.
    pub quant: Option<(f32, i32)>,
    /// Byte shuffles and permutations for the x86 kernels, built once per
    /// plan (kernels/x86/tables.rs).
    #[cfg(target_arch = "x86_64")]
    pub permutes: Permutes,
    pub(crate) encoder: Encoder,
    pub(crate) nv12: Option<Nv12Plan>,
    /// For YUYV, UYVY, I010 (and I420 where a resize decodes single rows):
    /// how a row becomes NV12's Y and U,V rows.
    pub(crate) rearrange: Option<Rearrange>,
    /// Which kernels run, e.g. "avx512/bf16-native/fma" or "scalar/lut".
    pub description: String,
}

#[derive(Clone, Copy)]
pub(crate) struct Nv12Plan {
    pub decode: Nv12Row,
    /// The same decoder, two rows at a time (for 4:2:0 sources).
    pub pair: Nv12Pair,
    /// YUYV/UYVY decoded from the packed row itself, where the level has
    /// such a decoder (else the row is split first: `Rearrange::Split`).
    pub packed: Option<Yuv422Row>,
    /// Decode straight into u8 destination rows (no normalisation), else into
    /// an RGBx row of scratch that the encoder then reads.
    pub direct: bool,
    pub out: YuvOut,
}

/// What a YUV decoder writes: R, G, B at byte positions `pos` of a pixel
/// of `bytes` bytes (3, or 4 with `pad` in the fourth), computed in the
/// colour standard's arithmetic.
#[derive(Clone, Copy, Debug)]
pub(crate) struct YuvOut {
    pub pos: [usize; 3],
    pub pad: u8,
    pub bytes: usize,
    pub k: Coefficients,
}

impl YuvOut {
    /// For NV21 (V before U in each chroma pair), the NV12 arithmetic with the
    /// roles of the two chroma bytes exchanged: the decoders compute "R" from
    /// the second byte (now U) and "B" from the first (now V), so R and B
    /// trade their coefficients and their places, and G's two terms trade
    /// coefficients. Exact: the same products, summed in the same order.
    pub(crate) fn chroma_order(self, src: Format) -> YuvOut {
        if src != Format::Nv21 {
            return self;
        }
        self.swap_chroma()
    }

    /// The decoding of the chroma pairs read the other way round (V, U):
    /// R's and B's coefficients and places exchanged, and G's two
    /// coefficients (see `chroma_order`).
    pub(crate) fn swap_chroma(self) -> YuvOut {
        let k = self.k;
        YuvOut {
            pos: [self.pos[2], self.pos[1], self.pos[0]],
            k: Coefficients { cvr: k.cub, cub: k.cvr, cvg: k.cug, cug: k.cvg, ..k },
            ..self
        }
    }
}

/// How camera YUV rows become the NV12 decoder's input (see `kernels::splitter`).
#[derive(Clone, Copy)]
pub(crate) enum Rearrange {
    /// Packed 4:2:2: the even and odd bytes of a row.
    Split(SplitRow),
    /// I010 (and I420 where a resize decodes single rows): the U and V rows
    /// interleaved (I010: their u16 samples).
    Interleave(InterleaveRow),
}

/// The reference arithmetic, in f32 as numpy does it: `(x - mean) / scale`,
/// then rounded to the destination type (u8: half to even, saturated; i8:
/// divided by the quantisation scale, rounded half to even, the zero point
/// added, saturated).
pub(crate) fn build_luts(element: Element, mean: [f32; 3], scale: [f32; 3], quant: Option<(f32, i32)>) -> Luts {
    let value = |k: usize, x: usize| (x as f32 - mean[k]) / scale[k];
    fn table<T: Copy + Default>(f: impl Fn(usize, usize) -> T) -> Box<[[T; 256]; 3]> {
        let mut t = Box::new([[T::default(); 256]; 3]);
        for (k, row) in t.iter_mut().enumerate() {
            for (x, v) in row.iter_mut().enumerate() {
                *v = f(k, x);
            }
        }
        t
    }
    match element {
        Element::U8 => Luts::U8(table(|k, x| value(k, x).round_ties_even().clamp(0.0, 255.0) as u8)),
        Element::I8 => {
            let (q, zero_point) = quant.expect("an int8 destination has a quantisation (checked by the plan)");
            Luts::U8(table(|k, x| {
                let level = (value(k, x) / q).round_ties_even() + zero_point as f32;
                level.clamp(-128.0, 127.0) as i8 as u8
            }))
        }
        Element::Bf16 => Luts::U16(table(|k, x| f32_to_bf16(value(k, x)))),
        Element::F16 => Luts::U16(table(|k, x| f32_to_f16(value(k, x)))),
        Element::F32 => Luts::F32(table(value)),
    }
}

impl Plan {
    /// Converts the rows of `src` into the rows of `dst` (one plane, or three).
    pub(crate) fn run(&self, src: SourcePixels<'_>, dst: &mut [RowsMut<'_>]) {
        match src {
            SourcePixels::Packed { rows, .. } => {
                for r in 0..rows.count() {
                    self.encode_row(rows.row(r), dst, r);
                }
            }
            SourcePixels::Nv12 { y, uv, .. } => {
                let mut decoder = Decoder::new(self, y.row_bytes());
                // Bands start on even rows: rows 2j and 2j + 1 share U,V row j.
                for r in (0..y.count()).step_by(2) {
                    decoder.rows(self, y, r, Chroma::Interleaved(uv.row(r / 2)), dst);
                }
            }
            SourcePixels::Yuv422 { rows, .. } if self.nv12.is_some_and(|n| n.packed.is_some()) => {
                let mut decoder = Decoder::new(self, rows.row_bytes() / 2);
                for r in 0..rows.count() {
                    decoder.packed_row(self, rows.row(r), dst, r);
                }
            }
            SourcePixels::Yuv422 { rows, y_even } => {
                let Some(Rearrange::Split(split)) = self.rearrange else { unreachable!("a 4:2:2 plan") };
                let width = rows.row_bytes() / 2;
                let (mut even, mut odd) = (vec![0u8; width], vec![0u8; width]);
                let mut decoder = Decoder::new(self, width);
                for r in 0..rows.count() {
                    // SAFETY: the splitter was picked for this CPU's level.
                    unsafe { split(rows.row(r), &mut even, &mut odd) };
                    let (y, uv) = if y_even { (&even, &odd) } else { (&odd, &even) };
                    decoder.row(self, y, uv, dst, r);
                }
            }
            SourcePixels::I420 { y, u, v } => {
                // The pair decoder reads the U and V rows where they lie.
                let mut decoder = Decoder::new(self, y.row_bytes());
                for r in (0..y.count()).step_by(2) {
                    decoder.rows(self, y, r, Chroma::Planar(u.row(r / 2), v.row(r / 2)), dst);
                }
            }
            // 10-bit: rows of u16 samples, two bytes a sample.
            SourcePixels::P010 { y, uv } => {
                let mut decoder = Decoder::new(self, y.row_bytes() / 2);
                for r in 0..y.count() {
                    decoder.row(self, y.row(r), uv.row(r / 2), dst, r);
                }
            }
            SourcePixels::I010 { y, u, v } => {
                let Some(Rearrange::Interleave(interleave)) = self.rearrange else { unreachable!("an I010 plan") };
                let mut uv = vec![0u8; y.row_bytes()];
                let mut decoder = Decoder::new(self, y.row_bytes() / 2);
                for r in 0..y.count() {
                    if r % 2 == 0 {
                        // SAFETY: the interleaver was picked for this CPU's level.
                        unsafe { interleave(u.row(r / 2), v.row(r / 2), &mut uv) };
                    }
                    decoder.row(self, y.row(r), &uv, dst, r);
                }
            }
        }
    }

    /// Encodes `src` (pixels of `src_channels` values) into row `r` of `dst`
    /// from pixel `x` on; `pixel_bytes` is the bytes of one pixel in each
    /// destination plane. The rest of the row is left as it is.
    pub(crate) fn encode_span(&self, src: &[u8], dst: &mut [RowsMut<'_>], r: usize, x: usize, pixel_bytes: usize) {
        let bytes = x * pixel_bytes..(x + src.len() / self.src_channels) * pixel_bytes;
        match (self.encoder, dst) {
            (Encoder::Packed(f), [plane]) => {
                let out = &mut plane.row_mut(r)[bytes];
                // SAFETY: as in `encode_row`.
                unsafe { f(self, src, out) }
            }
            (Encoder::Planar(f), [p0, p1, p2]) => {
                let (o0, o1, o2) =
                    (&mut p0.row_mut(r)[bytes.clone()], &mut p1.row_mut(r)[bytes.clone()], &mut p2.row_mut(r)[bytes]);
                // SAFETY: as in `encode_row`.
                unsafe { f(self, src, o0, o1, o2) }
            }
            _ => unreachable!("packed destinations have one plane, planar ones three"),
        }
    }

    pub(crate) fn encode_row(&self, src: &[u8], dst: &mut [RowsMut<'_>], r: usize) {
        match (self.encoder, dst) {
            // SAFETY: SIMD encoders are only chosen for a level this CPU supports
            // (SimdLevel::resolve checked it), and every encoder bounds its
            // accesses by the slices it is given.
            (Encoder::Packed(f), [plane]) => unsafe { f(self, src, plane.row_mut(r)) },
            (Encoder::Planar(f), [p0, p1, p2]) => unsafe { f(self, src, p0.row_mut(r), p1.row_mut(r), p2.row_mut(r)) },
            _ => unreachable!("packed destinations have one plane, planar ones three"),
        }
    }
}

/// Decodes Y and U,V rows (NV12's) into destination rows: straight into u8
/// pixels, or into rows of RGBx scratch that the plan's encoder then reads.
struct Decoder {
    nv12: Nv12Plan,
    scratch: Vec<u8>,
    second: Vec<u8>,
}

impl Decoder {
    fn new(plan: &Plan, width: usize) -> Self {
        let nv12 = plan.nv12.expect("a YUV plan");
        let scratch = || if nv12.direct { Vec::new() } else { vec![0u8; width * 4] };
        Decoder { nv12, scratch: scratch(), second: scratch() }
    }

    /// Rows `r` and `r + 1` of `y` (or `r` alone, the last of an odd
    /// count), which share the chroma row `chroma`.
    fn rows(&mut self, plan: &Plan, y: Rows<'_>, r: usize, chroma: Chroma<'_>, dst: &mut [RowsMut<'_>]) {
        if r + 1 == y.count() {
            return match chroma {
                Chroma::Interleaved(uv) => self.row(plan, y.row(r), uv, dst, r),
                // One row a frame at most: its U and V interleaved for the one-row decoder.
                Chroma::Planar(u, v) => {
                    let uv: Vec<u8> = u.iter().zip(v).flat_map(|(&u, &v)| [u, v]).collect();
                    self.row(plan, y.row(r), &uv, dst, r)
                }
            };
        }
        let nv12 = self.nv12;
        let out: [&mut [u8]; 2] =
            if nv12.direct { dst[0].row_pair_mut(r) } else { [&mut self.scratch, &mut self.second] };
        // SAFETY: the decoder was picked for this CPU's level.
        unsafe { (nv12.pair)([y.row(r), y.row(r + 1)], chroma, out, &nv12.out) };
        if !nv12.direct {
            plan.encode_row(&self.scratch, dst, r);
            plan.encode_row(&self.second, dst, r + 1);
        }
    }

    /// A YUYV/UYVY row decoded as it is (`Nv12Plan::packed`).
    fn packed_row(&mut self, plan: &Plan, row: &[u8], dst: &mut [RowsMut<'_>], r: usize) {
        let nv12 = self.nv12;
        let decode = nv12.packed.expect("a packed 4:2:2 decoder");
        let out: &mut [u8] = if nv12.direct { dst[0].row_mut(r) } else { &mut self.scratch };
        // SAFETY: the decoder was picked for this CPU's level.
        unsafe { decode(row, out, &nv12.out) };
        if !nv12.direct {
            plan.encode_row(&self.scratch, dst, r);
        }
    }

    fn row(&mut self, plan: &Plan, y: &[u8], uv: &[u8], dst: &mut [RowsMut<'_>], r: usize) {
        let nv12 = self.nv12;
        let out: &mut [u8] = if nv12.direct { dst[0].row_mut(r) } else { &mut self.scratch };
        // SAFETY: the decoder was picked for this CPU's level.
        unsafe { (nv12.decode)(y, uv, out, &nv12.out) };
        if !nv12.direct {
            plan.encode_row(&self.scratch, dst, r);
        }
    }
}
