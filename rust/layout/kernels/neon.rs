//! aarch64 Advanced SIMD (NEON) kernels, 16 pixels a step: `vld3q_u8` /
//! `vld4q_u8` de-interleave the source, `vst4q` interleaves the destination.
//! IEEE half destinations use the scalar tables (Rust's f16 vector types are
//! not stable yet).
//!
//! # Safety (all `unsafe fn` here)
//! NEON is part of every aarch64 CPU; loop guards bound every load by the
//! source slice and every store by the destination slice.

use std::arch::aarch64::*;

use super::super::convert::Plan;
use super::super::format::Element;
use super::scalar::{self, bt601};
use super::{Encoder, Kernel, Nv12Row};

pub(super) fn encoders(element: Element, planar: bool, channels: usize, identity: bool) -> Vec<Kernel> {
    let mut kernels = Vec::new();
    macro_rules! by_channels {
        ($f:ident, [$($g:tt),*], $kind:ident, $name:expr) => {
            kernels.push(Kernel {
                name: $name,
                encoder: match channels {
                    1 => Encoder::$kind($f::<1, $($g),*>),
                    3 => Encoder::$kind($f::<3, $($g),*>),
                    _ => Encoder::$kind($f::<4, $($g),*>),
                },
            })
        };
    }
    match (element, planar) {
        (Element::U8, false) if identity => by_channels!(packed_u8, [], Packed, "neon/u8"),
        (Element::Bf16, false) => {
            by_channels!(packed_bf16, [true, true], Packed, "neon/bf16-fast/fma");
            by_channels!(packed_bf16, [true, false], Packed, "neon/bf16-fast/div");
            by_channels!(packed_bf16, [false, true], Packed, "neon/bf16/fma");
            by_channels!(packed_bf16, [false, false], Packed, "neon/bf16/div");
        }
        (Element::F32, true) => {
            by_channels!(planar_f32, [true], Planar, "neon/planar-f32/fma");
            by_channels!(planar_f32, [false], Planar, "neon/planar-f32/div");
        }
        _ => {}
    }
    kernels
}

pub(super) fn nv12_decoder() -> (Nv12Row, &'static str) {
    (nv12_row, "neon/nv12")
}

/// Whether the plan swaps R and B (RGB <-> BGR); the other order is identity.
/// GRAY's map ([0, 0, 0]) reads the same either way.
fn swaps(map: [usize; 3]) -> bool {
    map == [2, 1, 0]
}

/// 16 source pixels as three byte vectors, in destination channel order.
#[inline(always)]
unsafe fn load16<const C: usize, const SWAP: bool>(src: *const u8) -> [uint8x16_t; 3] {
    let [a, b, c] = match C {
        1 => {
            let g = vld1q_u8(src);
            [g, g, g]
        }
        3 => {
            let v = vld3q_u8(src);
            [v.0, v.1, v.2]
        }
        _ => {
            let v = vld4q_u8(src);
            [v.0, v.1, v.2]
        }
    };
    if SWAP {
        [c, b, a]
    } else {
        [a, b, c]
    }
}

/// The 16 bytes of `x` as four vectors of 4 f32.
#[inline(always)]
unsafe fn widen(x: uint8x16_t) -> [float32x4_t; 4] {
    let lo = vmovl_u8(vget_low_u8(x));
    let hi = vmovl_high_u8(x);
    [vmovl_u16(vget_low_u16(lo)), vmovl_high_u16(lo), vmovl_u16(vget_low_u16(hi)), vmovl_high_u16(hi)]
        .map(|w| vcvtq_f32_u32(w))
}

/// `x * b + a` (`FMA`) or `(x - a) / b`, per the plan's channel constants.
#[inline(always)]
unsafe fn normalise<const FMA: bool>(x: float32x4_t, a: float32x4_t, b: float32x4_t) -> float32x4_t {
    if FMA {
        vfmaq_f32(a, x, b)
    } else {
        vdivq_f32(vsubq_f32(x, a), b)
    }
}

fn constants<const FMA: bool>(plan: &Plan) -> ([f32; 4], [f32; 4]) {
    if FMA {
        (plan.bias, plan.inv_scale)
    } else {
        (plan.mean, plan.scale)
    }
}

unsafe fn packed_u8<const C: usize>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
    if swaps(plan.map) {
        packed_u8_in::<C, true>(plan, src, dst)
    } else {
        packed_u8_in::<C, false>(plan, src, dst)
    }
}

unsafe fn packed_u8_in<const C: usize, const SWAP: bool>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
    let n = dst.len() / 4;
    let pad = vdupq_n_u8(plan.pad as u8);
    let mut i = 0;
    while i + 16 <= n && (i + 16) * C <= src.len() {
        let [r, g, b] = load16::<C, SWAP>(src.as_ptr().add(i * C));
        vst4q_u8(dst.as_mut_ptr().add(i * 4), uint8x16x4_t(r, g, b, pad));
        i += 16;
    }
    scalar::packed::<u8, C>(plan, &src[(i * C).min(src.len())..], &mut dst[i * 4..]);
}

/// Packed bf16: `FAST` rounds ties away from zero (a plan takes it only where
/// no input lands on a tie), otherwise to nearest even.
unsafe fn packed_bf16<const C: usize, const FAST: bool, const FMA: bool>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
    if swaps(plan.map) {
        packed_bf16_in::<C, true, FAST, FMA>(plan, src, dst)
    } else {
        packed_bf16_in::<C, false, FAST, FMA>(plan, src, dst)
    }
}

#[inline(always)]
unsafe fn bf16_of<const FAST: bool>(f: float32x4_t) -> uint16x4_t {
    let bits = vreinterpretq_u32_f32(f);
    let rounded = if FAST {
        vaddq_u32(bits, vdupq_n_u32(0x8000))
    } else {
        let lsb = vandq_u32(vshrq_n_u32::<16>(bits), vdupq_n_u32(1));
        vaddq_u32(vaddq_u32(bits, vdupq_n_u32(0x7FFF)), lsb)
    };
    vshrn_n_u32::<16>(rounded)
}

unsafe fn packed_bf16_in<const C: usize, const SWAP: bool, const FAST: bool, const FMA: bool>(
    plan: &Plan,
    src: &[u8],
    dst: &mut [u8],
) {
    let n = dst.len() / 8;
    let (a, b) = constants::<FMA>(plan);
    let (a, b) = ([0, 1, 2].map(|k| vdupq_n_f32(a[k])), [0, 1, 2].map(|k| vdupq_n_f32(b[k])));
    let pad = vdupq_n_u16(plan.pad as u16);
    let mut i = 0;
    while i + 16 <= n && (i + 16) * C <= src.len() {
        let channels = load16::<C, SWAP>(src.as_ptr().add(i * C));
        // Per channel, two vectors of 8 bf16: pixels 0-7 and 8-15.
        let mut halves = [[vdupq_n_u16(0); 2]; 3];
        for k in 0..3 {
            let f = widen(channels[k]).map(|x| bf16_of::<FAST>(normalise::<FMA>(x, a[k], b[k])));
            halves[k] = [vcombine_u16(f[0], f[1]), vcombine_u16(f[2], f[3])];
        }
        let out = dst.as_mut_ptr().add(i * 8).cast::<u16>();
        for h in 0..2 {
            vst4q_u16(out.add(32 * h), uint16x8x4_t(halves[0][h], halves[1][h], halves[2][h], pad));
        }
        i += 16;
    }
    scalar::packed::<u16, C>(plan, &src[(i * C).min(src.len())..], &mut dst[i * 8..]);
}

unsafe fn planar_f32<const C: usize, const FMA: bool>(plan: &Plan, src: &[u8], p0: &mut [u8], p1: &mut [u8], p2: &mut [u8]) {
    if swaps(plan.map) {
        planar_f32_in::<C, true, FMA>(plan, src, p0, p1, p2)
    } else {
        planar_f32_in::<C, false, FMA>(plan, src, p0, p1, p2)
    }
}

unsafe fn planar_f32_in<const C: usize, const SWAP: bool, const FMA: bool>(
    plan: &Plan,
    src: &[u8],
    p0: &mut [u8],
    p1: &mut [u8],
    p2: &mut [u8],
) {
    let n = p0.len().min(p1.len()).min(p2.len()) / 4;
    let (a, b) = constants::<FMA>(plan);
    let (a, b) = ([0, 1, 2].map(|k| vdupq_n_f32(a[k])), [0, 1, 2].map(|k| vdupq_n_f32(b[k])));
    let mut i = 0;
    while i + 16 <= n && (i + 16) * C <= src.len() {
        let channels = load16::<C, SWAP>(src.as_ptr().add(i * C));
        for (k, plane) in [&mut *p0, &mut *p1, &mut *p2].into_iter().enumerate() {
            let out = plane.as_mut_ptr().add(i * 4).cast::<f32>();
            for (q, x) in widen(channels[k]).into_iter().enumerate() {
                vst1q_f32(out.add(4 * q), normalise::<FMA>(x, a[k], b[k]));
            }
        }
        i += 16;
    }
    let s = &src[(i * C).min(src.len())..];
    scalar::planar::<f32, C>(plan, s, &mut p0[i * 4..], &mut p1[i * 4..], &mut p2[i * 4..]);
}

/// 16 pixels of NV12: OpenCV's fixed-point arithmetic in i32 lanes, clamped
/// by saturating narrows as `saturate_cast` does.
unsafe fn nv12_row(y: &[u8], uv: &[u8], out: &mut [u8], pos: [usize; 3], pad: u8) {
    match pos {
        [0, 1, 2] => nv12_row_in::<false>(y, uv, out, pad),
        [2, 1, 0] => nv12_row_in::<true>(y, uv, out, pad),
        _ => scalar::nv12_row(y, uv, out, pos, pad),
    }
}

unsafe fn nv12_row_in<const SWAP: bool>(y: &[u8], uv: &[u8], out: &mut [u8], pad: u8) {
    use bt601::*;
    let n = y.len().min(uv.len()).min(out.len() / 4);
    let pad_bytes = vdupq_n_u8(pad);
    let signed = |x: uint16x8_t| -> [int32x4_t; 2] {
        [vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(x))), vreinterpretq_s32_u32(vmovl_high_u16(x))]
    };
    let mut i = 0;
    while i + 16 <= n {
        let luma = vqsubq_u8(vld1q_u8(y.as_ptr().add(i)), vdupq_n_u8(16));
        let [y0, y1] = signed(vmovl_u8(vget_low_u8(luma)));
        let [y2, y3] = signed(vmovl_high_u8(luma));
        let ys = [y0, y1, y2, y3].map(|v| vmlaq_n_s32(vdupq_n_s32(HALF), v, CY));
        let chroma = vld2_u8(uv.as_ptr().add(i));
        let u = signed(vmovl_u8(chroma.0)).map(|v| vsubq_s32(v, vdupq_n_s32(128)));
        let v = signed(vmovl_u8(chroma.1)).map(|v| vsubq_s32(v, vdupq_n_s32(128)));
        // Four chroma samples per vector; each serves two neighbouring pixels.
        let per_pixel = |t: [int32x4_t; 2]| [vzip1q_s32(t[0], t[0]), vzip2q_s32(t[0], t[0]), vzip1q_s32(t[1], t[1]), vzip2q_s32(t[1], t[1])];
        let rt = per_pixel([vmulq_n_s32(v[0], CVR), vmulq_n_s32(v[1], CVR)]);
        let gt = per_pixel([0, 1].map(|h| vmlaq_n_s32(vmulq_n_s32(v[h], CVG), u[h], CUG)));
        let bt = per_pixel([vmulq_n_s32(u[0], CUB), vmulq_n_s32(u[1], CUB)]);
        let channel = |t: [int32x4_t; 4]| -> uint8x16_t {
            let s = [0, 1, 2, 3].map(|q| vqmovn_s32(vshrq_n_s32::<20>(vaddq_s32(ys[q], t[q]))));
            vcombine_u8(vqmovun_s16(vcombine_s16(s[0], s[1])), vqmovun_s16(vcombine_s16(s[2], s[3])))
        };
        let (r, g, b) = (channel(rt), channel(gt), channel(bt));
        let (first, last) = if SWAP { (b, r) } else { (r, b) };
        vst4q_u8(out.as_mut_ptr().add(4 * i), uint8x16x4_t(first, g, last, pad_bytes));
        i += 16;
    }
    let pos = if SWAP { [2, 1, 0] } else { [0, 1, 2] };
    scalar::nv12_row(&y[i..], &uv[i.min(uv.len())..], &mut out[4 * i..], pos, pad);
}
