//! x86_64 kernels: AVX2 (8 pixels a step) and AVX-512 (16 pixels a step).
//!
//! Every kernel has the same shape: gather a step of source pixels into
//! 32-bit lanes in destination channel order (in-lane byte shuffles, or whole-
//! register byte permutes with VBMI; a pad lane reads 0), convert to f32,
//! normalise (a pad lane comes out as the pad value), narrow to the
//! destination type, store; the tail of a row goes to the scalar kernel. Loop
//! guards bound every load by the source slice and every store by the
//! destination slice, whatever lengths the caller passes.
//!
//! # Safety (all `unsafe fn` here)
//! The caller must have checked that the CPU supports the kernel's level
//! (`SimdLevel::is_supported`); the plan only holds kernels of such a level.

use std::arch::x86_64::*;

use super::super::plan::Plan;
use super::super::format::Element;
use super::super::simd::SimdLevel;
use super::scalar::{self, bt601};
use super::{affine, Encoder, Kernel, Nv12Row, BF16, BF16_FAST, DIV, F16, FMA, REFINED};

/// Byte indices for `shuffle_epi8` in one 16-byte lane of 4 source pixels:
/// to 4-byte pixels in destination order (`slot_major` false), or to 4 bytes
/// of channel 0, then 4 of channel 1, then 4 of channel 2 (true). Index 0x80
/// zeroes the byte (the pad slot).
fn lane_shuffle(channels: usize, map: [usize; 3], slot_major: bool) -> [u8; 16] {
    let mut mask = [0x80u8; 16];
    for p in 0..4 {
        for (k, &channel) in map.iter().enumerate() {
            // One-channel sources are first widened to one pixel per 4 bytes.
            let from = if channels == 1 { 4 * p } else { channels * p + channel };
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
    use SimdLevel::{Avx2, Avx512, Avx512Vbmi};
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
    // One kernel per arithmetic (see `FMA`), in the order a plan tries them.
    macro_rules! fma_then_div {
        ($($f:ident)::+, [$($g:tt),*], $kind:ident, $name:expr) => {{
            by_channels!($($f)::+, [$($g,)* FMA], $kind, concat!($name, "/fma"));
            by_channels!($($f)::+, [$($g,)* REFINED], $kind, concat!($name, "/refined"));
            by_channels!($($f)::+, [$($g,)* DIV], $kind, concat!($name, "/div"));
        }};
    }
    match (level, element, planar) {
        // u8 layouts with normalisation round through the scalar tables.
        (_, Element::U8, false) if !identity => {}
        (Avx2, Element::U8, false) => by_channels!(avx2::packed_u8, [], Packed, "avx2/u8"),
        (Avx512, Element::U8, false) => by_channels!(avx512::packed_u8, [], Packed, "avx512/u8"),
        (Avx512Vbmi, Element::U8, false) => by_channels!(vbmi::packed_u8, [], Packed, "avx512vbmi/u8"),
        (Avx2, Element::Bf16, false) => {
            fma_then_div!(avx2::packed_16, [BF16_FAST], Packed, "avx2/bf16-fast");
            fma_then_div!(avx2::packed_16, [BF16], Packed, "avx2/bf16");
        }
        (Avx2, Element::F16, false) => fma_then_div!(avx2::packed_16, [F16], Packed, "avx2/f16"),
        (Avx512, Element::Bf16, false) => {
            fma_then_div!(avx512::packed_16, [BF16_FAST], Packed, "avx512/bf16-fast");
            fma_then_div!(avx512::packed_16, [BF16], Packed, "avx512/bf16");
        }
        (Avx512, Element::F16, false) => fma_then_div!(avx512::packed_16, [F16], Packed, "avx512/f16"),
        (Avx512Vbmi, Element::Bf16, false) => {
            if is_x86_feature_detected!("avx512bf16") {
                fma_then_div!(vbmi::packed_bf16_native, [], Packed, "avx512vbmi/bf16-native");
            }
            fma_then_div!(vbmi::packed_16, [BF16_FAST], Packed, "avx512vbmi/bf16-fast");
            fma_then_div!(vbmi::packed_16, [BF16], Packed, "avx512vbmi/bf16");
        }
        (Avx512Vbmi, Element::F16, false) => fma_then_div!(vbmi::packed_f16, [], Packed, "avx512vbmi/f16"),
        (Avx2, Element::F32, true) => fma_then_div!(avx2::planar, [false], Planar, "avx2/planar-f32"),
        (Avx2, Element::F16, true) => fma_then_div!(avx2::planar, [true], Planar, "avx2/planar-f16"),
        (Avx512, Element::F32, true) => fma_then_div!(avx512::planar, [false], Planar, "avx512/planar-f32"),
        (Avx512, Element::F16, true) => fma_then_div!(avx512::planar, [true], Planar, "avx512/planar-f16"),
        (Avx512Vbmi, Element::F32, true) => fma_then_div!(vbmi::planar, [false], Planar, "avx512vbmi/planar-f32"),
        (Avx512Vbmi, Element::F16, true) => fma_then_div!(vbmi::planar, [true], Planar, "avx512vbmi/planar-f16"),
        _ => {}
    }
    kernels
}

pub(super) fn nv12_decoder(level: SimdLevel) -> (Nv12Row, &'static str) {
    match level {
        SimdLevel::Avx512 => (avx512::nv12_row, "avx512/nv12"),
        SimdLevel::Avx512Vbmi => (avx512::nv12_row, "avx512vbmi/nv12"),
        _ => (avx2::nv12_row, "avx2/nv12"),
    }
}

/// `shuffle_epi8` masks widening 4 pixels at the start of a 16-byte lane
/// (`stride` bytes apart) to 32-bit lanes: for `packed`, mask j gives the 4
/// channels of pixel j (the pad slot 0); otherwise mask k gives channel k of
/// the 4 pixels.
fn widen_masks(stride: usize, map: [usize; 3], packed: bool) -> [[u8; 16]; 4] {
    let mut masks = [[0x80u8; 16]; 4];
    for (m, mask) in masks.iter_mut().enumerate() {
        for lane in 0..4 {
            let (pixel, k) = if packed { (m, lane) } else { (lane, m) };
            if k < 3 {
                mask[4 * lane] = (pixel * stride + map[k]) as u8;
            }
        }
    }
    masks
}

/// The `shuffle_epi8` mask that turns, in each 16-byte lane, 4 bytes of R,
/// then 4 of G, 4 of B and 4 of pad into 4 pixels with R, G, B at byte
/// positions `pos` (the pad in the remaining one).
fn interleave_mask(pos: [usize; 3]) -> [u8; 16] {
    let pad_pos = 6 - pos[0] - pos[1] - pos[2];
    let mut mask = [0u8; 16];
    for p in 0..4 {
        for (c, &at) in pos.iter().chain([&pad_pos]).enumerate() {
            mask[4 * p + at] = (4 * c + p) as u8;
        }
    }
    mask
}

/// The tail of a row of 16-bit floats, by the scalar tables.
fn tail_16<const C: usize>(plan: &Plan, src: &[u8], i: usize, dst: &mut [u8]) {
    scalar::packed::<u16, C>(plan, &src[(i * C).min(src.len())..], &mut dst[i * 8..]);
}

/// The tail of a row of three planes (f32, or IEEE half for `HALF`), by the scalar tables.
fn tail_planar<const C: usize, const HALF: bool>(plan: &Plan, src: &[u8], i: usize, p: [&mut [u8]; 3]) {
    let size = if HALF { 2 } else { 4 };
    let s = &src[(i * C).min(src.len())..];
    let [p0, p1, p2] = p;
    let (t0, t1, t2) = (&mut p0[i * size..], &mut p1[i * size..], &mut p2[i * size..]);
    if HALF {
        scalar::planar::<u16, C>(plan, s, t0, t1, t2)
    } else {
        scalar::planar::<f32, C>(plan, s, t0, t1, t2)
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
    unsafe fn normalise<const ARITH: u8>(x: __m256i, a: __m256, b: __m256, c: __m256) -> __m256 {
        let f = _mm256_cvtepi32_ps(x);
        match ARITH {
            FMA => _mm256_fmadd_ps(f, b, a),
            REFINED => {
                let t = _mm256_sub_ps(f, a);
                let q = _mm256_mul_ps(t, c);
                _mm256_fmadd_ps(_mm256_fnmadd_ps(q, b, t), c, q)
            }
            _ => _mm256_div_ps(_mm256_sub_ps(f, a), b),
        }
    }

    /// 8 source pixels, 4 at the start of each 16-byte lane (one byte apart for
    /// GRAY, `C` bytes apart otherwise).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn lanes8<const C: usize>(src: *const u8) -> __m256i {
        match C {
            1 => _mm256_permutevar8x32_epi32(
                _mm256_castsi128_si256(_mm_loadl_epi64(src.cast())),
                _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1),
            ),
            3 => _mm256_permutevar8x32_epi32(_mm256_loadu_si256(src.cast()), _mm256_setr_epi32(0, 1, 2, 3, 3, 4, 5, 6)),
            _ => _mm256_loadu_si256(src.cast()),
        }
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

    /// Packed bf16 or f16 (`KIND`), computing only the three colour channels:
    /// one vector per channel holds 8 pixels, lane-ordered 0, 1, 4, 5 | 2, 3,
    /// 6, 7 so that two in-lane unpacks leave pixels 0-3 and 4-7 in order.
    /// With each 16-bit float in the high half of its 32-bit lane, a blend
    /// puts R (or B) and G (or the pad) side by side: no pack, no cross-lane
    /// permute.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn packed_16<const C: usize, const KIND: u8, const ARITH: u8>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
        let n = dst.len() / 8;
        let masks = split_masks(C, plan.map).map(|m| _mm256_loadu_si256(m.as_ptr().cast()));
        let spread = _mm256_loadu_si256(spread(C).as_ptr().cast());
        let [a, b, c] = affine::<ARITH>(plan);
        let [a, b, c] = [a, b, c].map(|v| [0, 1, 2].map(|k| _mm256_set1_ps(v[k])));
        let pad = _mm256_set1_epi32((plan.pad << 16) as i32);
        let mut i = 0;
        while i + 8 <= n && i * C + step_bytes::<C>(8) <= src.len() {
            let v = match C {
                1 => _mm256_castsi128_si256(_mm_loadl_epi64(src.as_ptr().add(i).cast())),
                _ => _mm256_loadu_si256(src.as_ptr().add(i * C).cast()),
            };
            let v = _mm256_permutevar8x32_epi32(v, spread);
            let [r, g, bl] = [0, 1, 2].map(|k| high_half::<KIND>(normalise::<ARITH>(_mm256_shuffle_epi8(v, masks[k]), a[k], b[k], c[k])));
            // 32-bit lanes of (R, G) and (B, pad) words.
            let rg = _mm256_blend_epi16::<0xAA>(_mm256_srli_epi32::<16>(r), g);
            let bp = _mm256_blend_epi16::<0xAA>(_mm256_srli_epi32::<16>(bl), pad);
            let out = dst.as_mut_ptr().add(i * 8);
            _mm256_storeu_si256(out.cast(), _mm256_unpacklo_epi32(rg, bp));
            _mm256_storeu_si256(out.add(32).cast(), _mm256_unpackhi_epi32(rg, bp));
            i += 8;
        }
        tail_16::<C>(plan, src, i, dst);
    }

    /// The 16-bit float (`KIND`) of each f32 lane, in the lane's high half
    /// (the low half is left as it falls). bf16 rounds in integer arithmetic
    /// (see `BF16_FAST`): the values come from u8 inputs and finite
    /// parameters, never NaN. f16 rounds to nearest even (F16C).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn high_half<const KIND: u8>(f: __m256) -> __m256i {
        let bits = _mm256_castps_si256(f);
        match KIND {
            BF16_FAST => _mm256_add_epi32(bits, _mm256_set1_epi32(0x8000)),
            BF16 => {
                let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(1));
                _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7FFF)), lsb)
            }
            // The 8 halves come out in lane order; widening keeps it.
            _ => _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f))),
        }
    }

    /// Where `packed_16` moves the source dwords of 8 pixels: lane 0 gets
    /// the bytes of pixels 0, 1 (its low 8 bytes) and 4, 5 (its high 8); lane
    /// 1 those of 2, 3 and 6, 7. Each half is two consecutive source dwords.
    const fn spread(channels: usize) -> [i32; 8] {
        match channels {
            1 => [0, 1, 0, 1, 0, 1, 0, 1],
            3 => [0, 1, 3, 4, 1, 2, 4, 5],
            _ => [0, 1, 4, 5, 2, 3, 6, 7],
        }
    }

    /// `shuffle_epi8` masks for `packed_16`: mask k widens channel k of the
    /// lane's 4 pixels to 32-bit lanes, from where `spread` left their bytes.
    fn split_masks(channels: usize, map: [usize; 3]) -> [[u8; 32]; 3] {
        let spread = spread(channels);
        let mut masks = [[0x80u8; 32]; 3];
        for (k, mask) in masks.iter_mut().enumerate() {
            let channel = if channels == 1 { 0 } else { map[k] };
            for lane in 0..2 {
                for (slot, pixel) in [0, 1, 4, 5].into_iter().enumerate() {
                    let half = slot / 2;
                    let from = (pixel + 2 * lane) * channels + channel;
                    let first = 4 * spread[4 * lane + 2 * half] as usize;
                    mask[16 * lane + 4 * slot] = (from - first + 8 * half) as u8;
                }
            }
        }
        masks
    }

    /// Three planes of f32 or (`HALF`) IEEE half.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn planar<const C: usize, const HALF: bool, const ARITH: u8>(
        plan: &Plan,
        src: &[u8],
        p0: &mut [u8],
        p1: &mut [u8],
        p2: &mut [u8],
    ) {
        let size = if HALF { 2 } else { 4 };
        let n = p0.len().min(p1.len()).min(p2.len()) / size;
        let masks = widen_masks(C, plan.map, false).map(|m| both_lanes(m));
        let [a, b, c] = affine::<ARITH>(plan);
        let [a, b, c] = [a, b, c].map(|v| [0, 1, 2].map(|k| _mm256_set1_ps(v[k])));
        let mut i = 0;
        while i + 8 <= n && i * C + step_bytes::<C>(8) <= src.len() {
            let v = lanes8::<C>(src.as_ptr().add(i * C));
            for (k, plane) in [&mut *p0, &mut *p1, &mut *p2].into_iter().enumerate() {
                let f = normalise::<ARITH>(_mm256_shuffle_epi8(v, masks[k]), a[k], b[k], c[k]);
                let out = plane.as_mut_ptr().add(i * size);
                if HALF {
                    _mm_storeu_si128(out.cast(), _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f));
                } else {
                    _mm256_storeu_ps(out.cast(), f);
                }
            }
            i += 8;
        }
        tail_planar::<C, HALF>(plan, src, i, [p0, p1, p2]);
    }

    /// 16 pixels of NV12 to 4-byte pixels: OpenCV's fixed-point arithmetic in
    /// i32 lanes; saturating packs clamp to 0..=255 as `saturate_cast` does.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn nv12_row(y: &[u8], uv: &[u8], out: &mut [u8], pos: [usize; 3], pad: u8) {
        use bt601::*;
        let n = y.len().min(uv.len()).min(out.len() / 4);
        let set = _mm256_set1_epi32;
        let (cy, cvr, cvg, cug, cub, half) = (set(CY), set(CVR), set(CVG), set(CUG), set(CUB), set(HALF));
        let pad_lanes = set(pad as i32);
        let interleave = both_lanes(interleave_mask(pos));
        let split_uv = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        // Each chroma sample serves two neighbouring pixels.
        let dup = [_mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3), _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7)];
        let mut i = 0;
        while i + 16 <= n {
            let luma = _mm_subs_epu8(_mm_loadu_si128(y.as_ptr().add(i).cast()), _mm_set1_epi8(16));
            let chroma = _mm_shuffle_epi8(_mm_loadu_si128(uv.as_ptr().add(i).cast()), split_uv);
            let u = _mm256_sub_epi32(_mm256_cvtepu8_epi32(chroma), set(128));
            let v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128::<8>(chroma)), set(128));
            let terms = [
                _mm256_mullo_epi32(cvr, v),
                _mm256_add_epi32(_mm256_mullo_epi32(cvg, v), _mm256_mullo_epi32(cug, u)),
                _mm256_mullo_epi32(cub, u),
            ];
            for (h, l) in [luma, _mm_srli_si128::<8>(luma)].into_iter().enumerate() {
                let yh = _mm256_add_epi32(_mm256_mullo_epi32(_mm256_cvtepu8_epi32(l), cy), half);
                let [r, g, b] = terms.map(|t| {
                    _mm256_srai_epi32::<20>(_mm256_add_epi32(yh, _mm256_permutevar8x32_epi32(t, dup[h])))
                });
                // Per lane: 4 R, 4 G, 4 B, 4 pad bytes, then interleaved into 4 pixels.
                let bytes = _mm256_packus_epi16(_mm256_packs_epi32(r, g), _mm256_packs_epi32(b, pad_lanes));
                let pixels = _mm256_shuffle_epi8(bytes, interleave);
                _mm256_storeu_si256(out.as_mut_ptr().add(4 * (i + 8 * h)).cast(), pixels);
            }
            i += 16;
        }
        scalar::nv12_row(&y[i..], &uv[i.min(uv.len())..], &mut out[4 * i..], pos, pad);
    }
}

/// Helpers shared by both AVX-512 levels.
mod avx512_common {
    use super::*;

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn normalise<const ARITH: u8>(x: __m512i, a: __m512, b: __m512, c: __m512) -> __m512 {
        let f = _mm512_cvtepi32_ps(x);
        match ARITH {
            FMA => _mm512_fmadd_ps(f, b, a),
            REFINED => {
                let t = _mm512_sub_ps(f, a);
                let q = _mm512_mul_ps(t, c);
                _mm512_fmadd_ps(_mm512_fnmadd_ps(q, b, t), c, q)
            }
            _ => _mm512_div_ps(_mm512_sub_ps(f, a), b),
        }
    }

    /// 16 f32 to IEEE half (F16C rounding).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn narrow_f16(f: __m512) -> __m256i {
        _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f)
    }

    /// Stores 16 pixels of 4 channels, given as 4 vectors of 4 consecutive
    /// pixels, as 16-bit floats (`KIND`): 128 bytes at `out`. bf16 rounds in
    /// integer arithmetic (see `BF16_FAST`); the values are never NaN.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn store_16<const KIND: u8>(out: *mut u8, q: [__m512; 4]) {
        if KIND == F16 {
            for (j, f) in q.into_iter().enumerate() {
                _mm256_storeu_si256(out.add(32 * j).cast(), narrow_f16(f));
            }
            return;
        }
        let r = q.map(|f| {
            let bits = _mm512_castps_si512(f);
            let rounded = if KIND == BF16_FAST {
                _mm512_add_epi32(bits, _mm512_set1_epi32(0x8000))
            } else {
                let lsb = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
                _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7FFF)), lsb)
            };
            _mm512_srli_epi32::<16>(rounded)
        });
        // packus pairs lane L of both: pixels L and 4 + L; the permute restores order.
        let order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
        for h in 0..2 {
            let packed = _mm512_packus_epi32(r[2 * h], r[2 * h + 1]);
            _mm512_storeu_si512(out.add(64 * h).cast(), _mm512_permutexvar_epi64(order, packed));
        }
    }

    /// The four per-slot values repeated for 4 pixels.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn four_times(values: [f32; 4]) -> __m512 {
        _mm512_broadcast_f32x4(_mm_loadu_ps(values.as_ptr()))
    }
}

/// AVX-512 F/BW/DQ/VL: in-lane shuffles, then widening.
mod avx512 {
    use super::avx512_common::*;
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

    /// The four 16-byte lanes of `v` widened to 32-bit lanes.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    unsafe fn widen_lanes(v: __m512i) -> [__m512i; 4] {
        [
            _mm512_extracti32x4_epi32::<0>(v),
            _mm512_extracti32x4_epi32::<1>(v),
            _mm512_extracti32x4_epi32::<2>(v),
            _mm512_extracti32x4_epi32::<3>(v),
        ]
        .map(|q| _mm512_cvtepu8_epi32(q))
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

    /// Packed bf16 or f16 (`KIND`).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn packed_16<const C: usize, const KIND: u8, const ARITH: u8>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
        let n = dst.len() / 8;
        let shuffle = all_lanes(lane_shuffle(C, plan.map, false));
        let [a, b, c] = affine::<ARITH>(plan);
        let (a, b, c) = (four_times(a), four_times(b), four_times(c));
        let mut i = 0;
        while i + 16 <= n && i * C + step_bytes::<C>(16) <= src.len() {
            let v = load16::<C>(src.as_ptr().add(i * C), shuffle);
            let q = widen_lanes(v).map(|x| normalise::<ARITH>(x, a, b, c));
            store_16::<KIND>(dst.as_mut_ptr().add(i * 8), q);
            i += 16;
        }
        tail_16::<C>(plan, src, i, dst);
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn planar<const C: usize, const HALF: bool, const ARITH: u8>(
        plan: &Plan,
        src: &[u8],
        p0: &mut [u8],
        p1: &mut [u8],
        p2: &mut [u8],
    ) {
        let size = if HALF { 2 } else { 4 };
        let n = p0.len().min(p1.len()).min(p2.len()) / size;
        let shuffle = all_lanes(lane_shuffle(C, plan.map, true));
        let [a, b, c] = affine::<ARITH>(plan);
        let [a, b, c] = [a, b, c].map(|v| [0, 1, 2].map(|k| _mm512_set1_ps(v[k])));
        // Lane k of the result: channel k of all 16 pixels.
        let gather = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        let mut i = 0;
        while i + 16 <= n && i * C + step_bytes::<C>(16) <= src.len() {
            let v = _mm512_permutexvar_epi32(gather, load16::<C>(src.as_ptr().add(i * C), shuffle));
            let runs = widen_lanes(v);
            for (k, plane) in [&mut *p0, &mut *p1, &mut *p2].into_iter().enumerate() {
                let f = normalise::<ARITH>(runs[k], a[k], b[k], c[k]);
                let out = plane.as_mut_ptr().add(i * size);
                if HALF {
                    _mm256_storeu_si256(out.cast(), narrow_f16(f));
                } else {
                    _mm512_storeu_ps(out.cast(), f);
                }
            }
            i += 16;
        }
        tail_planar::<C, HALF>(plan, src, i, [p0, p1, p2]);
    }

    /// 16 pixels of NV12 to 4-byte pixels: OpenCV's fixed-point arithmetic in
    /// i32 lanes; saturating packs clamp to 0..=255 as `saturate_cast` does.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn nv12_row(y: &[u8], uv: &[u8], out: &mut [u8], pos: [usize; 3], pad: u8) {
        use bt601::*;
        let n = y.len().min(uv.len()).min(out.len() / 4);
        let set = _mm512_set1_epi32;
        let (cy, cvr, cvg, cug, cub, half) = (set(CY), set(CVR), set(CVG), set(CUG), set(CUB), set(HALF));
        let pad_lanes = set(pad as i32);
        let interleave = all_lanes(interleave_mask(pos));
        // U of pixel p is chroma lane p & !1, V lane p | 1.
        let u_of = _mm512_setr_epi32(0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14);
        let v_of = _mm512_setr_epi32(1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15);
        let mut i = 0;
        while i + 16 <= n {
            let luma = _mm_subs_epu8(_mm_loadu_si128(y.as_ptr().add(i).cast()), _mm_set1_epi8(16));
            let yh = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_cvtepu8_epi32(luma), cy), half);
            let chroma = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(uv.as_ptr().add(i).cast())), set(128));
            let u = _mm512_permutexvar_epi32(u_of, chroma);
            let v = _mm512_permutexvar_epi32(v_of, chroma);
            let r = _mm512_srai_epi32::<20>(_mm512_add_epi32(yh, _mm512_mullo_epi32(cvr, v)));
            let g = _mm512_add_epi32(_mm512_mullo_epi32(cvg, v), _mm512_mullo_epi32(cug, u));
            let g = _mm512_srai_epi32::<20>(_mm512_add_epi32(yh, g));
            let b = _mm512_srai_epi32::<20>(_mm512_add_epi32(yh, _mm512_mullo_epi32(cub, u)));
            // Per lane: 4 R, 4 G, 4 B, 4 pad bytes, then interleaved into 4 pixels.
            let bytes = _mm512_packus_epi16(_mm512_packs_epi32(r, g), _mm512_packs_epi32(b, pad_lanes));
            _mm512_storeu_si512(out.as_mut_ptr().add(4 * i).cast(), _mm512_shuffle_epi8(bytes, interleave));
            i += 16;
        }
        scalar::nv12_row(&y[i..], &uv[i.min(uv.len())..], &mut out[4 * i..], pos, pad);
    }
}

/// AVX-512 with VBMI: one byte permute gathers, reorders and widens at once.
mod vbmi {
    use super::avx512_common::*;
    use super::*;

    /// The 16 * C source bytes of 16 pixels (a masked load: never past them).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx2,fma,f16c")]
    unsafe fn window<const C: usize>(src: *const u8) -> __m512i {
        let mask: u64 = if C == 4 { u64::MAX } else { (1u64 << (16 * C)) - 1 };
        _mm512_maskz_loadu_epi8(mask, src.cast())
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx2,fma,f16c")]
    unsafe fn table(bytes: &[u8; 64]) -> __m512i {
        _mm512_loadu_si512(bytes.as_ptr().cast())
    }

    /// Bytes of `window` picked by `index`, where index `Permutes::zero(C)`
    /// gives 0: one permute, no masking.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx2,fma,f16c")]
    unsafe fn gather<const C: usize>(window: __m512i, index: __m512i) -> __m512i {
        if C == 4 {
            _mm512_permutex2var_epi8(window, index, _mm512_setzero_si512())
        } else {
            _mm512_permutexvar_epi8(index, window)
        }
    }

    /// The R, G, B bytes of 16 4-byte pixels.
    const COLOUR_BYTES: u64 = 0x7777_7777_7777_7777;

    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx2,fma,f16c")]
    pub(super) unsafe fn packed_u8<const C: usize>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
        let n = dst.len() / 4;
        let index = table(&plan.permutes.packed_bytes);
        let pad = _mm512_set1_epi32((plan.pad << 24) as i32);
        let mut i = 0;
        while i + 16 <= n && i * C + 16 * C <= src.len() {
            let v = _mm512_mask_permutexvar_epi8(pad, COLOUR_BYTES, index, window::<C>(src.as_ptr().add(i * C)));
            _mm512_storeu_si512(dst.as_mut_ptr().add(i * 4).cast(), v);
            i += 16;
        }
        scalar::packed::<u8, C>(plan, &src[(i * C).min(src.len())..], &mut dst[i * 4..]);
    }

    /// Packed bf16 or f16 (`KIND`).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx2,fma,f16c")]
    pub(super) unsafe fn packed_16<const C: usize, const KIND: u8, const ARITH: u8>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
        let n = dst.len() / 8;
        let index = plan.permutes.packed_lanes.each_ref().map(|t| table(t));
        let [a, b, c] = affine::<ARITH>(plan);
        let (a, b, c) = (four_times(a), four_times(b), four_times(c));
        let mut i = 0;
        while i + 16 <= n && i * C + 16 * C <= src.len() {
            let w = window::<C>(src.as_ptr().add(i * C));
            let q = index.map(|idx| normalise::<ARITH>(gather::<C>(w, idx), a, b, c));
            store_16::<KIND>(dst.as_mut_ptr().add(i * 8), q);
            i += 16;
        }
        tail_16::<C>(plan, src, i, dst);
    }



    /// Word indices interleaving [R 0-15 | G 0-15] and [B 0-15 | pad] into 8
    /// pixels of R, G, B, pad: pixels 0-7 (`half` 0) or 8-15 (`half` 1).
    fn interleave_words(half: usize) -> [u16; 32] {
        let mut index = [0u16; 32];
        for p in 0..8 {
            let pixel = (8 * half + p) as u16;
            index[4 * p..4 * p + 4].copy_from_slice(&[pixel, 16 + pixel, 32 + pixel, 48]);
        }
        index
    }

    /// Packed IEEE half, computing only the three colour channels (as
    /// `packed_bf16_native`).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx2,fma,f16c")]
    pub(super) unsafe fn packed_f16<const C: usize, const ARITH: u8>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
        let n = dst.len() / 8;
        let index = plan.permutes.planar_lanes.each_ref().map(|t| table(t));
        let [a, b, c] = affine::<ARITH>(plan);
        let [a, b, c] = [a, b, c].map(|v| [0, 1, 2].map(|k| _mm512_set1_ps(v[k])));
        let pad = _mm256_set1_epi16(plan.pad as i16);
        let words = [0, 1].map(|h| _mm512_loadu_si512(interleave_words(h).as_ptr().cast()));
        let mut i = 0;
        while i + 16 <= n && i * C + 16 * C <= src.len() {
            let w = window::<C>(src.as_ptr().add(i * C));
            let [r, g, bl] = [0, 1, 2].map(|k| narrow_f16(normalise::<ARITH>(gather::<C>(w, index[k]), a[k], b[k], c[k])));
            let rg = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(r), g);
            let bp = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(bl), pad);
            let out = dst.as_mut_ptr().add(i * 8);
            for (h, idx) in words.iter().enumerate() {
                _mm512_storeu_si512(out.add(64 * h).cast(), _mm512_permutex2var_epi16(rg, *idx, bp));
            }
            i += 16;
        }
        tail_16::<C>(plan, src, i, dst);
    }

    /// Packed bf16 with the AVX512-BF16 instruction, computing only the three
    /// colour channels (the pad words come from a constant, interleaved by two
    /// word permutes). The instruction rounds to nearest even but flushes
    /// subnormals, so a plan uses it only where it reproduces the reference.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx512bf16,avx2,fma,f16c")]
    pub(super) unsafe fn packed_bf16_native<const C: usize, const ARITH: u8>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
        let n = dst.len() / 8;
        let index = plan.permutes.planar_lanes.each_ref().map(|t| table(t));
        let [a, b, c] = affine::<ARITH>(plan);
        let [a, b, c] = [a, b, c].map(|v| [0, 1, 2].map(|k| _mm512_set1_ps(v[k])));
        let pad = _mm512_set1_ps(f32::from_bits(plan.pad << 16));
        let words = [0, 1].map(|h| _mm512_loadu_si512(interleave_words(h).as_ptr().cast()));
        let mut i = 0;
        while i + 16 <= n && i * C + 16 * C <= src.len() {
            let w = window::<C>(src.as_ptr().add(i * C));
            let [r, g, bl] = [0, 1, 2].map(|k| normalise::<ARITH>(gather::<C>(w, index[k]), a[k], b[k], c[k]));
            let rg: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(g, r));
            let bp: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(pad, bl));
            let out = dst.as_mut_ptr().add(i * 8);
            for (h, idx) in words.iter().enumerate() {
                _mm512_storeu_si512(out.add(64 * h).cast(), _mm512_permutex2var_epi16(rg, *idx, bp));
            }
            i += 16;
        }
        tail_16::<C>(plan, src, i, dst);
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx2,fma,f16c")]
    pub(super) unsafe fn planar<const C: usize, const HALF: bool, const ARITH: u8>(
        plan: &Plan,
        src: &[u8],
        p0: &mut [u8],
        p1: &mut [u8],
        p2: &mut [u8],
    ) {
        let size = if HALF { 2 } else { 4 };
        let n = p0.len().min(p1.len()).min(p2.len()) / size;
        let index = plan.permutes.planar_lanes.each_ref().map(|t| table(t));
        let [a, b, c] = affine::<ARITH>(plan);
        let [a, b, c] = [a, b, c].map(|v| [0, 1, 2].map(|k| _mm512_set1_ps(v[k])));
        let mut i = 0;
        while i + 16 <= n && i * C + 16 * C <= src.len() {
            let w = window::<C>(src.as_ptr().add(i * C));
            for (k, plane) in [&mut *p0, &mut *p1, &mut *p2].into_iter().enumerate() {
                let f = normalise::<ARITH>(gather::<C>(w, index[k]), a[k], b[k], c[k]);
                let out = plane.as_mut_ptr().add(i * size);
                if HALF {
                    _mm256_storeu_si256(out.cast(), narrow_f16(f));
                } else {
                    _mm512_storeu_ps(out.cast(), f);
                }
            }
            i += 16;
        }
        tail_planar::<C, HALF>(plan, src, i, [p0, p1, p2]);
    }
}
