//! x86_64 kernels: AVX2 (8 pixels a step) and AVX-512 (16 pixels a step).
//!
//! Every kernel has the same shape: load a group of source pixels, shuffle
//! them into 4-byte pixels in destination channel order (pad slot zeroed) or
//! into one run of bytes per channel (planar), widen to f32, normalise,
//! narrow to the destination type, store; the tail of a row goes to the
//! scalar kernel. Loop guards bound every load by the source slice and every
//! store by the destination slice, whatever lengths the caller passes.
//!
//! # Safety (all `unsafe fn` here)
//! The caller must have checked that the CPU supports the kernel's level
//! (`SimdLevel::is_supported`); the plan only holds kernels of such a level.

use std::arch::x86_64::*;

use super::super::convert::Plan;
use super::super::format::Element;
use super::super::simd::SimdLevel;
use super::scalar::{self, bt601};
use super::{Encoder, Kernel, Nv12Row};

/// Byte indices for `shuffle_epi8` in one 16-byte lane of 4 source pixels:
/// to 4-byte pixels in destination order (`slot_major` false), or to 4 bytes
/// of channel 0, then 4 of channel 1, then 4 of channel 2 (true). Index 0x80
/// zeroes the byte (the pad slot).
fn lane_shuffle(channels: usize, map: [usize; 3], slot_major: bool) -> [u8; 16] {
    let mut mask = [0x80u8; 16];
    for p in 0..4 {
        for k in 0..3 {
            // One-channel sources are first widened to one pixel per 4 bytes.
            let from = if channels == 1 { 4 * p } else { channels * p + map[k] };
            let to = if slot_major { 4 * k + p } else { 4 * p + k };
            mask[to] = from as u8;
        }
    }
    mask
}

/// Bytes a load of one step reads, for `C`-channel sources.
const fn step_bytes<const C: usize>(pixels: usize) -> usize {
    match C {
        // AVX2 reads 32 bytes for 24; AVX-512 reads exactly 48 (masked load).
        3 if pixels == 8 => 32,
        _ => pixels * C,
    }
}

pub(super) fn encoders(level: SimdLevel, element: Element, planar: bool, channels: usize, identity: bool) -> Vec<Kernel> {
    let wide = level == SimdLevel::Avx512;
    let native_bf16 = wide && is_x86_feature_detected!("avx512bf16");
    let mut kernels = Vec::new();
    // `by_channels!(path, [generics after C], Packed|Planar, name)`
    macro_rules! by_channels {
        ($($f:ident)::+, [$($g:tt),*], $kind:ident, $name:expr) => {
            kernels.push(Kernel {
                name: $name,
                encoder: match channels {
                    1 => Encoder::$kind($($f)::+::<1, $($g),*>),
                    3 => Encoder::$kind($($f)::+::<3, $($g),*>),
                    _ => Encoder::$kind($($f)::+::<4, $($g),*>),
                },
            })
        };
    }
    macro_rules! fma_then_div {
        ($($f:ident)::+, [$($g:tt),*], $kind:ident, $name:expr) => {{
            by_channels!($($f)::+, [$($g,)* true], $kind, concat!($name, "/fma"));
            by_channels!($($f)::+, [$($g,)* false], $kind, concat!($name, "/div"));
        }};
    }
    match (wide, element, planar) {
        // u8 layouts with normalisation round through the scalar tables.
        (_, Element::U8, false) if !identity => {}
        (false, Element::U8, false) => by_channels!(avx2::packed_u8, [], Packed, "avx2/u8"),
        (true, Element::U8, false) => by_channels!(avx512::packed_u8, [], Packed, "avx512/u8"),
        (false, Element::Bf16, false) => fma_then_div!(avx2::packed_16, [true], Packed, "avx2/bf16"),
        (false, Element::F16, false) => fma_then_div!(avx2::packed_16, [false], Packed, "avx2/f16"),
        (true, Element::Bf16, false) => {
            if native_bf16 {
                by_channels!(avx512::packed_bf16_native, [true], Packed, "avx512/bf16-native/fma");
            }
            fma_then_div!(avx512::packed_bf16, [], Packed, "avx512/bf16");
        }
        (true, Element::F16, false) => fma_then_div!(avx512::packed_f16, [], Packed, "avx512/f16"),
        (false, Element::F32, true) => fma_then_div!(avx2::planar, [false], Planar, "avx2/planar-f32"),
        (false, Element::F16, true) => fma_then_div!(avx2::planar, [true], Planar, "avx2/planar-f16"),
        (true, Element::F32, true) => fma_then_div!(avx512::planar, [false], Planar, "avx512/planar-f32"),
        (true, Element::F16, true) => fma_then_div!(avx512::planar, [true], Planar, "avx512/planar-f16"),
        _ => {}
    }
    kernels
}

pub(super) fn nv12_decoder(level: SimdLevel) -> (Nv12Row, &'static str) {
    match level {
        SimdLevel::Avx512 => (avx512::nv12_row, "avx512/nv12"),
        _ => (avx2::nv12_row, "avx2/nv12"),
    }
}

/// The arithmetic of a plan, per destination slot: `(x - mean) / scale`
/// (`FMA` false) or `x * inv_scale + bias` (`FMA` true).
fn affine<const FMA: bool>(plan: &Plan) -> ([f32; 4], [f32; 4]) {
    if FMA {
        (plan.bias, plan.inv_scale)
    } else {
        (plan.mean, plan.scale)
    }
}

mod avx2 {
    use super::*;

    /// 8 pixels to 32 bytes: 4-byte pixels or channel runs, as `shuffle` says.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8<const C: usize>(src: *const u8, shuffle: __m256i) -> __m256i {
        let v = match C {
            1 => _mm256_cvtepu8_epi32(_mm_loadl_epi64(src.cast())),
            // Lane 0 gets bytes 0..12 (pixels 0-3), lane 1 bytes 12..24.
            3 => _mm256_permutevar8x32_epi32(_mm256_loadu_si256(src.cast()), _mm256_setr_epi32(0, 1, 2, 3, 3, 4, 5, 6)),
            _ => _mm256_loadu_si256(src.cast()),
        };
        _mm256_shuffle_epi8(v, shuffle)
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn both_lanes(mask: [u8; 16]) -> __m256i {
        let lane = _mm_loadu_si128(mask.as_ptr().cast());
        _mm256_set_m128i(lane, lane)
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn normalise<const FMA: bool>(x: __m256i, a: __m256, b: __m256) -> __m256 {
        let f = _mm256_cvtepi32_ps(x);
        if FMA {
            _mm256_fmadd_ps(f, b, a)
        } else {
            _mm256_div_ps(_mm256_sub_ps(f, a), b)
        }
    }

    /// f32 to bf16 bits in the low half of each i32: round to nearest even.
    /// (The values come from u8 inputs and finite parameters: never NaN.)
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn bf16_bits(f: __m256) -> __m256i {
        let bits = _mm256_castps_si256(f);
        let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(1));
        let rounded = _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7FFF)), lsb);
        _mm256_srli_epi32::<16>(rounded)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn packed_u8<const C: usize>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
        let n = dst.len() / 4;
        let shuffle = both_lanes(lane_shuffle(C, plan.map, false));
        let pad = _mm256_set1_epi32((plan.pad << 24) as i32);
        let mut i = 0;
        while i + 8 <= n && i * C + step_bytes::<C>(8) <= src.len() {
            let v = load8::<C>(src.as_ptr().add(i * C), shuffle);
            _mm256_storeu_si256(dst.as_mut_ptr().add(i * 4).cast(), _mm256_or_si256(v, pad));
            i += 8;
        }
        scalar::packed::<u8, C>(plan, &src[(i * C).min(src.len())..], &mut dst[i * 4..]);
    }

    /// Packed 16-bit floats: bf16 (`BF16`) or IEEE half.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn packed_16<const C: usize, const BF16: bool, const FMA: bool>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
        let n = dst.len() / 8;
        let shuffle = both_lanes(lane_shuffle(C, plan.map, false));
        let (a, b) = affine::<FMA>(plan);
        let a = _mm256_broadcast_ps(&_mm_loadu_ps(a.as_ptr()));
        let b = _mm256_broadcast_ps(&_mm_loadu_ps(b.as_ptr()));
        let pad = _mm256_set1_epi64x(((plan.pad as u64) << 48) as i64);
        let mut i = 0;
        while i + 8 <= n && i * C + step_bytes::<C>(8) <= src.len() {
            let v = load8::<C>(src.as_ptr().add(i * C), shuffle);
            let lo = _mm256_castsi256_si128(v);
            let hi = _mm256_extracti128_si256::<1>(v);
            // Each quarter: 2 pixels x 4 channels.
            let q = [lo, _mm_srli_si128::<8>(lo), hi, _mm_srli_si128::<8>(hi)]
                .map(|x| normalise::<FMA>(_mm256_cvtepu8_epi32(x), a, b));
            let out = dst.as_mut_ptr().add(i * 8);
            if BF16 {
                for h in 0..2 {
                    // packus interleaves lanes: pixels 0, 2 | 1, 3; the permute restores 0, 1, 2, 3.
                    let packed = _mm256_packus_epi32(bf16_bits(q[2 * h]), bf16_bits(q[2 * h + 1]));
                    let ordered = _mm256_permute4x64_epi64::<0xD8>(packed);
                    _mm256_storeu_si256(out.add(32 * h).cast(), _mm256_or_si256(ordered, pad));
                }
            } else {
                let pad = _mm256_castsi256_si128(pad);
                for (h, f) in q.into_iter().enumerate() {
                    let halves = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f);
                    _mm_storeu_si128(out.add(16 * h).cast(), _mm_or_si128(halves, pad));
                }
            }
            i += 8;
        }
        scalar::packed::<u16, C>(plan, &src[(i * C).min(src.len())..], &mut dst[i * 8..]);
    }

    /// Three planes of f32 or (`HALF`) IEEE half.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn planar<const C: usize, const HALF: bool, const FMA: bool>(
        plan: &Plan,
        src: &[u8],
        p0: &mut [u8],
        p1: &mut [u8],
        p2: &mut [u8],
    ) {
        let size = if HALF { 2 } else { 4 };
        let n = p0.len().min(p1.len()).min(p2.len()) / size;
        let shuffle = both_lanes(lane_shuffle(C, plan.map, true));
        let (a, b) = affine::<FMA>(plan);
        let (a, b) = ([0, 1, 2].map(|k| _mm256_set1_ps(a[k])), [0, 1, 2].map(|k| _mm256_set1_ps(b[k])));
        // Gathers the per-lane channel runs: channel 0 of pixels 0-7, channel 1, channel 2.
        let gather = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let mut i = 0;
        while i + 8 <= n && i * C + step_bytes::<C>(8) <= src.len() {
            let v = _mm256_permutevar8x32_epi32(load8::<C>(src.as_ptr().add(i * C), shuffle), gather);
            let lo = _mm256_castsi256_si128(v);
            let runs = [lo, _mm_srli_si128::<8>(lo), _mm256_extracti128_si256::<1>(v)];
            for (k, plane) in [&mut *p0, &mut *p1, &mut *p2].into_iter().enumerate() {
                let f = normalise::<FMA>(_mm256_cvtepu8_epi32(runs[k]), a[k], b[k]);
                let out = plane.as_mut_ptr().add(i * size);
                if HALF {
                    let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f);
                    _mm_storeu_si128(out.cast(), h);
                } else {
                    _mm256_storeu_ps(out.cast(), f);
                }
            }
            i += 8;
        }
        let s = &src[(i * C).min(src.len())..];
        let (t0, t1, t2) = (&mut p0[i * size..], &mut p1[i * size..], &mut p2[i * size..]);
        if HALF {
            scalar::planar::<u16, C>(plan, s, t0, t1, t2)
        } else {
            scalar::planar::<f32, C>(plan, s, t0, t1, t2)
        }
    }

    /// 16 pixels of NV12 to 4-byte pixels, OpenCV's fixed-point arithmetic in i32 lanes.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn nv12_row(y: &[u8], uv: &[u8], out: &mut [u8], pos: [usize; 3], pad: u8) {
        use bt601::*;
        let n = y.len().min(uv.len()).min(out.len() / 4);
        let set = _mm256_set1_epi32;
        let (cy, cvr, cvg, cug, cub, half) = (set(CY), set(CVR), set(CVG), set(CUG), set(CUB), set(HALF));
        let shifts = pos.map(|p| _mm_cvtsi32_si128(8 * p as i32));
        let pad_pos = 6 - pos[0] - pos[1] - pos[2];
        let pad_px = set(((pad as u32) << (8 * pad_pos)) as i32);
        let split_uv = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        let (zero, max) = (_mm256_setzero_si256(), set(255));
        let mut i = 0;
        while i + 16 <= n {
            let luma = _mm_subs_epu8(_mm_loadu_si128(y.as_ptr().add(i).cast()), _mm_set1_epi8(16));
            let ys = [luma, _mm_srli_si128::<8>(luma)].map(|l| _mm256_mullo_epi32(_mm256_cvtepu8_epi32(l), cy));
            let chroma = _mm_shuffle_epi8(_mm_loadu_si128(uv.as_ptr().add(i).cast()), split_uv);
            let u = _mm256_sub_epi32(_mm256_cvtepu8_epi32(chroma), set(128));
            let v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128::<8>(chroma)), set(128));
            let terms = [
                _mm256_add_epi32(half, _mm256_mullo_epi32(cvr, v)),
                _mm256_add_epi32(half, _mm256_add_epi32(_mm256_mullo_epi32(cvg, v), _mm256_mullo_epi32(cug, u))),
                _mm256_add_epi32(half, _mm256_mullo_epi32(cub, u)),
            ];
            // Each chroma sample serves two neighbouring pixels.
            let dup = [_mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3), _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7)];
            for h in 0..2 {
                let mut px = pad_px;
                for c in 0..3 {
                    let sum = _mm256_add_epi32(ys[h], _mm256_permutevar8x32_epi32(terms[c], dup[h]));
                    let value = _mm256_min_epi32(_mm256_max_epi32(_mm256_srai_epi32::<20>(sum), zero), max);
                    px = _mm256_or_si256(px, _mm256_sll_epi32(value, shifts[c]));
                }
                _mm256_storeu_si256(out.as_mut_ptr().add(4 * (i + 8 * h)).cast(), px);
            }
            i += 16;
        }
        scalar::nv12_row(&y[i..], &uv[i.min(uv.len())..], &mut out[4 * i..], pos, pad);
    }
}

mod avx512 {
    use super::*;

    /// 16 pixels to 64 bytes: 4-byte pixels or channel runs, as `shuffle` says.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    unsafe fn load16<const C: usize>(src: *const u8, shuffle: __m512i) -> __m512i {
        let v = match C {
            1 => _mm512_cvtepu8_epi32(_mm_loadu_si128(src.cast())),
            // 48 bytes, lane j getting bytes 12j..12j+12 (pixels 4j..4j+3).
            3 => _mm512_permutexvar_epi32(
                _mm512_setr_epi32(0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9, 9, 10, 11, 12),
                _mm512_maskz_loadu_epi8(0xFFFF_FFFF_FFFF, src.cast()),
            ),
            _ => _mm512_loadu_si512(src.cast()),
        };
        _mm512_shuffle_epi8(v, shuffle)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    unsafe fn all_lanes(mask: [u8; 16]) -> __m512i {
        _mm512_broadcast_i32x4(_mm_loadu_si128(mask.as_ptr().cast()))
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    unsafe fn normalise<const FMA: bool>(x: __m512i, a: __m512, b: __m512) -> __m512 {
        let f = _mm512_cvtepi32_ps(x);
        if FMA {
            _mm512_fmadd_ps(f, b, a)
        } else {
            _mm512_div_ps(_mm512_sub_ps(f, a), b)
        }
    }

    /// The 16 pixels of `v` (4-byte, destination order) as 4 vectors of 4 pixels x 4 channels.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    unsafe fn quarters<const FMA: bool>(v: __m512i, a: __m512, b: __m512) -> [__m512; 4] {
        [
            _mm512_extracti32x4_epi32::<0>(v),
            _mm512_extracti32x4_epi32::<1>(v),
            _mm512_extracti32x4_epi32::<2>(v),
            _mm512_extracti32x4_epi32::<3>(v),
        ]
        .map(|q| normalise::<FMA>(_mm512_cvtepu8_epi32(q), a, b))
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    unsafe fn four_times(values: [f32; 4]) -> __m512 {
        _mm512_broadcast_f32x4(_mm_loadu_ps(values.as_ptr()))
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn packed_u8<const C: usize>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
        let n = dst.len() / 4;
        let shuffle = all_lanes(lane_shuffle(C, plan.map, false));
        let pad = _mm512_set1_epi32((plan.pad << 24) as i32);
        let mut i = 0;
        while i + 16 <= n && i * C + step_bytes::<C>(16) <= src.len() {
            let v = load16::<C>(src.as_ptr().add(i * C), shuffle);
            _mm512_storeu_si512(dst.as_mut_ptr().add(i * 4).cast(), _mm512_or_si512(v, pad));
            i += 16;
        }
        scalar::packed::<u8, C>(plan, &src[(i * C).min(src.len())..], &mut dst[i * 4..]);
    }

    /// Packed bf16 with integer round-to-nearest-even (any AVX-512 CPU).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn packed_bf16<const C: usize, const FMA: bool>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
        let n = dst.len() / 8;
        let shuffle = all_lanes(lane_shuffle(C, plan.map, false));
        let (a, b) = affine::<FMA>(plan);
        let (a, b) = (four_times(a), four_times(b));
        let pad = _mm256_set1_epi64x(((plan.pad as u64) << 48) as i64);
        let mut i = 0;
        while i + 16 <= n && i * C + step_bytes::<C>(16) <= src.len() {
            let v = load16::<C>(src.as_ptr().add(i * C), shuffle);
            let out = dst.as_mut_ptr().add(i * 8);
            for (h, f) in quarters::<FMA>(v, a, b).into_iter().enumerate() {
                let bits = _mm512_castps_si512(f);
                let lsb = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
                let rounded = _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7FFF)), lsb);
                let halves = _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(rounded));
                _mm256_storeu_si256(out.add(32 * h).cast(), _mm256_or_si256(halves, pad));
            }
            i += 16;
        }
        scalar::packed::<u16, C>(plan, &src[(i * C).min(src.len())..], &mut dst[i * 8..]);
    }

    /// Packed bf16 with the AVX512-BF16 instruction: rounds to nearest even but
    /// flushes subnormals, so a plan uses it only where it reproduces the reference.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma,f16c")]
    pub(super) unsafe fn packed_bf16_native<const C: usize, const FMA: bool>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
        let n = dst.len() / 8;
        let shuffle = all_lanes(lane_shuffle(C, plan.map, false));
        let (a, b) = affine::<FMA>(plan);
        let (a, b) = (four_times(a), four_times(b));
        let pad = _mm512_set1_epi64(((plan.pad as u64) << 48) as i64);
        let mut i = 0;
        while i + 16 <= n && i * C + step_bytes::<C>(16) <= src.len() {
            let v = load16::<C>(src.as_ptr().add(i * C), shuffle);
            let q = quarters::<FMA>(v, a, b);
            let out = dst.as_mut_ptr().add(i * 8);
            for h in 0..2 {
                // The second argument fills the low half: pixels in order.
                let bf: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(q[2 * h + 1], q[2 * h]));
                _mm512_storeu_si512(out.add(64 * h).cast(), _mm512_or_si512(bf, pad));
            }
            i += 16;
        }
        scalar::packed::<u16, C>(plan, &src[(i * C).min(src.len())..], &mut dst[i * 8..]);
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn packed_f16<const C: usize, const FMA: bool>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
        let n = dst.len() / 8;
        let shuffle = all_lanes(lane_shuffle(C, plan.map, false));
        let (a, b) = affine::<FMA>(plan);
        let (a, b) = (four_times(a), four_times(b));
        let pad = _mm256_set1_epi64x(((plan.pad as u64) << 48) as i64);
        let mut i = 0;
        while i + 16 <= n && i * C + step_bytes::<C>(16) <= src.len() {
            let v = load16::<C>(src.as_ptr().add(i * C), shuffle);
            let out = dst.as_mut_ptr().add(i * 8);
            for (h, f) in quarters::<FMA>(v, a, b).into_iter().enumerate() {
                let halves = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(f);
                _mm256_storeu_si256(out.add(32 * h).cast(), _mm256_or_si256(halves, pad));
            }
            i += 16;
        }
        scalar::packed::<u16, C>(plan, &src[(i * C).min(src.len())..], &mut dst[i * 8..]);
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn planar<const C: usize, const HALF: bool, const FMA: bool>(
        plan: &Plan,
        src: &[u8],
        p0: &mut [u8],
        p1: &mut [u8],
        p2: &mut [u8],
    ) {
        let size = if HALF { 2 } else { 4 };
        let n = p0.len().min(p1.len()).min(p2.len()) / size;
        let shuffle = all_lanes(lane_shuffle(C, plan.map, true));
        let (a, b) = affine::<FMA>(plan);
        let (a, b) = ([0, 1, 2].map(|k| _mm512_set1_ps(a[k])), [0, 1, 2].map(|k| _mm512_set1_ps(b[k])));
        // Lane k of the result: channel k of all 16 pixels.
        let gather = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        let mut i = 0;
        while i + 16 <= n && i * C + step_bytes::<C>(16) <= src.len() {
            let v = _mm512_permutexvar_epi32(gather, load16::<C>(src.as_ptr().add(i * C), shuffle));
            let runs = [_mm512_extracti32x4_epi32::<0>(v), _mm512_extracti32x4_epi32::<1>(v), _mm512_extracti32x4_epi32::<2>(v)];
            for (k, plane) in [&mut *p0, &mut *p1, &mut *p2].into_iter().enumerate() {
                let f = normalise::<FMA>(_mm512_cvtepu8_epi32(runs[k]), a[k], b[k]);
                let out = plane.as_mut_ptr().add(i * size);
                if HALF {
                    let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(f);
                    _mm256_storeu_si256(out.cast(), h);
                } else {
                    _mm512_storeu_ps(out.cast(), f);
                }
            }
            i += 16;
        }
        let s = &src[(i * C).min(src.len())..];
        let (t0, t1, t2) = (&mut p0[i * size..], &mut p1[i * size..], &mut p2[i * size..]);
        if HALF {
            scalar::planar::<u16, C>(plan, s, t0, t1, t2)
        } else {
            scalar::planar::<f32, C>(plan, s, t0, t1, t2)
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn nv12_row(y: &[u8], uv: &[u8], out: &mut [u8], pos: [usize; 3], pad: u8) {
        use bt601::*;
        let n = y.len().min(uv.len()).min(out.len() / 4);
        let set = _mm512_set1_epi32;
        let (cy, cvr, cvg, cug, cub, half) = (set(CY), set(CVR), set(CVG), set(CUG), set(CUB), set(HALF));
        let shifts = pos.map(|p| _mm_cvtsi32_si128(8 * p as i32));
        let pad_pos = 6 - pos[0] - pos[1] - pos[2];
        let pad_px = set(((pad as u32) << (8 * pad_pos)) as i32);
        // U of pixel p is chroma lane p & !1, V lane p | 1.
        let u_of = _mm512_setr_epi32(0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14);
        let v_of = _mm512_setr_epi32(1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15);
        let (zero, max) = (_mm512_setzero_si512(), set(255));
        let mut i = 0;
        while i + 16 <= n {
            let luma = _mm_subs_epu8(_mm_loadu_si128(y.as_ptr().add(i).cast()), _mm_set1_epi8(16));
            let yv = _mm512_mullo_epi32(_mm512_cvtepu8_epi32(luma), cy);
            let chroma = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(uv.as_ptr().add(i).cast())), set(128));
            let u = _mm512_permutexvar_epi32(u_of, chroma);
            let v = _mm512_permutexvar_epi32(v_of, chroma);
            let yh = _mm512_add_epi32(yv, half);
            let sums = [
                _mm512_add_epi32(yh, _mm512_mullo_epi32(cvr, v)),
                _mm512_add_epi32(yh, _mm512_add_epi32(_mm512_mullo_epi32(cvg, v), _mm512_mullo_epi32(cug, u))),
                _mm512_add_epi32(yh, _mm512_mullo_epi32(cub, u)),
            ];
            let mut px = pad_px;
            for c in 0..3 {
                let value = _mm512_min_epi32(_mm512_max_epi32(_mm512_srai_epi32::<20>(sums[c]), zero), max);
                px = _mm512_or_si512(px, _mm512_sll_epi32(value, shifts[c]));
            }
            _mm512_storeu_si512(out.as_mut_ptr().add(4 * i).cast(), px);
            i += 16;
        }
        scalar::nv12_row(&y[i..], &uv[i.min(uv.len())..], &mut out[4 * i..], pos, pad);
    }
}
