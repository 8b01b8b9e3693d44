//! The portable kernels: table lookups, exact by construction (every table
//! entry is the scalar reference value), and the tails of every SIMD kernel.

use super::super::colour::{yuv10_to_rgb, yuv_to_rgb, yuv_to_rgb_fast, Fast};
use super::super::plan::{Chroma, Luts, Plan, YuvOut};
use super::resample::Resample;

/// A destination element: how to write it and where its tables live.
pub(crate) trait Out: Copy {
    const SIZE: usize;
    fn put(self, out: &mut [u8]);
    fn luts(luts: &Luts) -> &[[Self; 256]; 3];
    fn from_bits(bits: u32) -> Self;
}

impl Out for u8 {
    const SIZE: usize = 1;
    #[inline(always)]
    fn put(self, out: &mut [u8]) {
        out[0] = self;
    }
    fn luts(luts: &Luts) -> &[[u8; 256]; 3] {
        match luts {
            Luts::U8(t) => t,
            _ => unreachable!("a u8 destination has u8 tables"),
        }
    }
    fn from_bits(bits: u32) -> u8 {
        bits as u8
    }
}

impl Out for u16 {
    const SIZE: usize = 2;
    #[inline(always)]
    fn put(self, out: &mut [u8]) {
        out[..2].copy_from_slice(&self.to_ne_bytes());
    }
    fn luts(luts: &Luts) -> &[[u16; 256]; 3] {
        match luts {
            Luts::U16(t) => t,
            _ => unreachable!("a 16-bit float destination has u16 tables"),
        }
    }
    fn from_bits(bits: u32) -> u16 {
        bits as u16
    }
}

impl Out for f32 {
    const SIZE: usize = 4;
    #[inline(always)]
    fn put(self, out: &mut [u8]) {
        out[..4].copy_from_slice(&self.to_ne_bytes());
    }
    fn luts(luts: &Luts) -> &[[f32; 256]; 3] {
        match luts {
            Luts::F32(t) => t,
            _ => unreachable!("an f32 destination has f32 tables"),
        }
    }
    fn from_bits(bits: u32) -> f32 {
        f32::from_bits(bits)
    }
}

/// One row of `C`-channel u8 pixels to packed 4-channel pixels of `T`.
pub(crate) fn packed<T: Out, const C: usize>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
    let luts = T::luts(&plan.luts);
    let pad = T::from_bits(plan.pad);
    let [a, b, c] = plan.map;
    for (px, out) in src.chunks_exact(C).zip(dst.chunks_exact_mut(4 * T::SIZE)) {
        luts[0][px[a] as usize].put(out);
        luts[1][px[b] as usize].put(&mut out[T::SIZE..]);
        luts[2][px[c] as usize].put(&mut out[2 * T::SIZE..]);
        pad.put(&mut out[3 * T::SIZE..]);
    }
}

/// One row of `C`-channel u8 pixels to packed 3-channel pixels of `T` (no pad).
pub(crate) fn packed3<T: Out, const C: usize>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
    let luts = T::luts(&plan.luts);
    let [a, b, c] = plan.map;
    for (px, out) in src.chunks_exact(C).zip(dst.chunks_exact_mut(3 * T::SIZE)) {
        luts[0][px[a] as usize].put(out);
        luts[1][px[b] as usize].put(&mut out[T::SIZE..]);
        luts[2][px[c] as usize].put(&mut out[2 * T::SIZE..]);
    }
}

/// One row of `C`-channel u8 pixels to one row of each of three planes of `T`.
pub(crate) fn planar<T: Out, const C: usize>(plan: &Plan, src: &[u8], p0: &mut [u8], p1: &mut [u8], p2: &mut [u8]) {
    let luts = T::luts(&plan.luts);
    let [a, b, c] = plan.map;
    let outs = p0.chunks_exact_mut(T::SIZE).zip(p1.chunks_exact_mut(T::SIZE)).zip(p2.chunks_exact_mut(T::SIZE));
    for (px, ((o0, o1), o2)) in src.chunks_exact(C).zip(outs) {
        luts[0][px[a] as usize].put(o0);
        luts[1][px[b] as usize].put(o1);
        luts[2][px[c] as usize].put(o2);
    }
}

/// A packed 4:2:2 row, YUYV (`Y_FIRST`) or UYVY, as `nv12_row` decodes
/// its split bytes.
pub(crate) fn yuv422_row<const Y_FIRST: bool>(row: &[u8], dst: &mut [u8], out: &YuvOut) {
    let (pos, b) = (out.pos, out.bytes);
    let pad_pos = 6 - pos[0] - pos[1] - pos[2];
    let (oy, oc) = if Y_FIRST { (0, 1) } else { (1, 0) };
    for (q, px2) in row.chunks_exact(4).zip(dst.chunks_exact_mut(2 * b)) {
        for (k, px) in px2.chunks_exact_mut(b).enumerate() {
            let rgb = yuv_to_rgb(&out.k, q[2 * k + oy], q[oc], q[2 + oc]);
            px[pos[0]] = rgb[0];
            px[pos[1]] = rgb[1];
            px[pos[2]] = rgb[2];
            if b == 4 {
                px[pad_pos] = out.pad;
            }
        }
    }
}

/// Two rows sharing one chroma row, one after the other.
pub(crate) fn nv12_pair(y: [&[u8]; 2], chroma: Chroma<'_>, dst: [&mut [u8]; 2], out: &YuvOut) {
    for (y, dst) in y.into_iter().zip(dst) {
        match chroma {
            Chroma::Interleaved(uv) => nv12_row(y, uv, dst, out),
            Chroma::Planar(u, v) => i420_row(y, u, v, dst, out),
        }
    }
}

/// One NV12 row (Y row, and the UV row it shares with its neighbour) to
/// pixels of `out.bytes` bytes with R, G, B at byte positions `out.pos` (and
/// `out.pad` in the fourth), in the arithmetic of `out.k` (see colour.rs).
pub(crate) fn nv12_row(y: &[u8], uv: &[u8], dst: &mut [u8], out: &YuvOut) {
    decode_420(y, uv.chunks_exact(2).map(|c| (c[0], c[1])), dst, out)
}

/// One I420 row (Y row, and the U and V rows it shares), as `nv12_row`.
pub(crate) fn i420_row(y: &[u8], u: &[u8], v: &[u8], dst: &mut [u8], out: &YuvOut) {
    decode_420(y, u.iter().copied().zip(v.iter().copied()), dst, out)
}

/// A row of pixel pairs, each pair's chroma from `chroma`.
#[inline(always)]
fn decode_420(y: &[u8], chroma: impl Iterator<Item = (u8, u8)>, dst: &mut [u8], out: &YuvOut) {
    let (pos, b) = (out.pos, out.bytes);
    let pad_pos = 6 - pos[0] - pos[1] - pos[2];
    for ((ys, (u, v)), px2) in y.chunks_exact(2).zip(chroma).zip(dst.chunks_exact_mut(2 * b)) {
        for (&yy, px) in ys.iter().zip(px2.chunks_exact_mut(b)) {
            let rgb = yuv_to_rgb(&out.k, yy, u, v);
            px[pos[0]] = rgb[0];
            px[pos[1]] = rgb[1];
            px[pos[2]] = rgb[2];
            if b == 4 {
                px[pad_pos] = out.pad;
            }
        }
    }
}

/// Two rows sharing one chroma row in the fast rounding (`colour::Fast`):
/// the reference of every fast decoder, and the tails of their loops.
pub(crate) fn nv12_pair_fast(y: [&[u8]; 2], chroma: Chroma<'_>, dst: [&mut [u8]; 2], out: &YuvOut) {
    for (y, dst) in y.into_iter().zip(dst) {
        match chroma {
            Chroma::Interleaved(uv) => nv12_row_fast(y, uv, dst, out),
            Chroma::Planar(u, v) => decode_420_fast(y, u.iter().copied().zip(v.iter().copied()), dst, out),
        }
    }
}

/// One NV12 row in the fast rounding (the last row of an odd count).
pub(crate) fn nv12_row_fast(y: &[u8], uv: &[u8], dst: &mut [u8], out: &YuvOut) {
    decode_420_fast(y, uv.chunks_exact(2).map(|c| (c[0], c[1])), dst, out)
}

fn decode_420_fast(y: &[u8], chroma: impl Iterator<Item = (u8, u8)>, dst: &mut [u8], out: &YuvOut) {
    let (pos, b, f) = (out.pos, out.bytes, Fast::of(&out.k));
    let pad_pos = 6 - pos[0] - pos[1] - pos[2];
    for ((ys, (u, v)), px2) in y.chunks_exact(2).zip(chroma).zip(dst.chunks_exact_mut(2 * b)) {
        for (&yy, px) in ys.iter().zip(px2.chunks_exact_mut(b)) {
            let rgb = yuv_to_rgb_fast(&f, yy, u, v);
            px[pos[0]] = rgb[0];
            px[pos[1]] = rgb[1];
            px[pos[2]] = rgb[2];
            if b == 4 {
                px[pad_pos] = out.pad;
            }
        }
    }
}

/// A 10-bit sample: the little-endian u16 at `b`, its top 10 bits (P010) or
/// with `LOW` its low 10 bits (I010; the top 6 are ignored).
#[inline(always)]
pub(crate) fn sample10<const LOW: bool>(b: &[u8]) -> u16 {
    let word = u16::from_le_bytes([b[0], b[1]]);
    if LOW {
        word & 0x3FF
    } else {
        word >> 6
    }
}

/// One row of 10-bit samples (P010's Y row and the U,V row it shares; I010's
/// with its U and V rows interleaved), as `nv12_row` with
/// `colour::yuv10_to_rgb`.
pub(crate) fn yuv10_row<const LOW: bool>(y: &[u8], uv: &[u8], dst: &mut [u8], out: &YuvOut) {
    let (pos, b) = (out.pos, out.bytes);
    let pad_pos = 6 - pos[0] - pos[1] - pos[2];
    for ((ys, uv), px2) in y.chunks_exact(4).zip(uv.chunks_exact(4)).zip(dst.chunks_exact_mut(2 * b)) {
        let (u, v) = (sample10::<LOW>(&uv[..2]), sample10::<LOW>(&uv[2..]));
        for (yy, px) in ys.chunks_exact(2).zip(px2.chunks_exact_mut(b)) {
            let rgb = yuv10_to_rgb(&out.k, sample10::<LOW>(yy), u, v);
            px[pos[0]] = rgb[0];
            px[pos[1]] = rgb[1];
            px[pos[2]] = rgb[2];
            if b == 4 {
                px[pad_pos] = out.pad;
            }
        }
    }
}

/// 4-byte pixels to 3-byte ones with no arithmetic (RGBx/RGBA or decoded
/// YUV rows into RGB or BGR): the pad dropped, R and B swapped if `SWAP`.
/// Also the tail of the SIMD versions (LLVM's vectorisation of this loop is
/// several times slower than those).
#[inline(always)]
pub(crate) fn drop_pad_pixels<const SWAP: bool>(src: &[u8], dst: &mut [u8]) {
    for (s, d) in src.chunks_exact(4).zip(dst.chunks_exact_mut(3)) {
        if SWAP {
            d.copy_from_slice(&[s[2], s[1], s[0]]);
        } else {
            d.copy_from_slice(&s[..3]);
        }
    }
}

pub(crate) fn drop_pad<const SWAP: bool>(_: &Plan, src: &[u8], dst: &mut [u8]) {
    drop_pad_pixels::<SWAP>(src, dst)
}

/// 3-byte pixels in the same order: a row copy.
pub(crate) fn copy(_: &Plan, src: &[u8], dst: &mut [u8]) {
    let n = src.len().min(dst.len());
    dst[..n].copy_from_slice(&src[..n]);
}

/// 3-byte pixels with R and B swapped (stamped for AVX2 in x86/avx2.rs).
#[inline(always)]
pub(crate) fn swap_rb_pixels(src: &[u8], dst: &mut [u8]) {
    for (s, d) in src.chunks_exact(3).zip(dst.chunks_exact_mut(3)) {
        d.copy_from_slice(&[s[2], s[1], s[0]]);
    }
}

pub(crate) fn swap_rb(_: &Plan, src: &[u8], dst: &mut [u8]) {
    swap_rb_pixels(src, dst)
}

// The YUV rearrangements: camera rows into the NV12 decoders' input
// (kernels::splitter, interleaver), and the SIMD ones' tails.

/// `even[i] = row[2i]`, `odd[i] = row[2i + 1]`, for as many pairs as all three hold.
pub(crate) fn split_row(row: &[u8], even: &mut [u8], odd: &mut [u8]) {
    for ((pair, e), o) in row.chunks_exact(2).zip(even.iter_mut()).zip(odd.iter_mut()) {
        *e = pair[0];
        *o = pair[1];
    }
}

/// U and V samples of `BYTES` bytes each (1: I420, 2: I010) interleaved:
/// `uv[2i] = u[i]`, `uv[2i + 1] = v[i]`, sample by sample.
pub(crate) fn interleave_row<const BYTES: usize>(u: &[u8], v: &[u8], uv: &mut [u8]) {
    for ((a, b), pair) in u.chunks_exact(BYTES).zip(v.chunks_exact(BYTES)).zip(uv.chunks_exact_mut(2 * BYTES)) {
        pair[..BYTES].copy_from_slice(a);
        pair[BYTES..].copy_from_slice(b);
    }
}

/// The scalar level's resize row loops: the portable ones, compiled without
/// extra features.
pub(crate) struct Portable;
impl Resample for Portable {}

pub(crate) mod resample {
    crate::layout::kernels::stamp_kernels!(super::Portable, []: resample);
}
