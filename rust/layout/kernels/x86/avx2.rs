//! AVX2, FMA and F16C (every x86 level builds on it): [`Simd`] and the
//! other kernel traits for [`Avx2`], 8 pixels a step (in-lane byte shuffles;
//! a pad lane reads 0), its kernels stamped, and the rows written by hand in
//! AVX2 that every x86 level uses: 4-byte pixels to 3-byte ones, the YUV
//! rearrangements (YUYV/UYVY split, I420/I010 interleave), the resize
//! bilinear x pass. The kernels themselves are in vector.rs and resample.rs.
//!
//! # Safety (all `unsafe fn` here)
//! The caller must have checked that the CPU supports the kernel's level
//! (`SimdLevel::is_supported`); the plan only holds kernels of such a level.
//! Pointers given to the `Simd` methods are valid for the bytes each method
//! says it reads or writes (the generic kernels' loop guards see to it).

use std::arch::x86_64::*;

use super::super::super::colour::{HALF, SHIFT};
use super::super::super::plan::{Plan, YuvOut};
use super::super::resample::{
    blocks, horizontal_linear_from, pair_means, pair_sums, yuv_linear_from, Chroma, ColumnSum, Linear, Resample,
    YuvTaps,
};
use super::super::scalar;
use super::super::vector::{bf16_high, Fast16, Job, Quantise, Simd, Words, F16};
use super::tables::{
    chroma_422_mask, in_dword, in_order, luma_422_mask, Permutes, CHROMA_PLANE_WORDS, PAIR_WORDS, THREE_BYTES,
    THREE_BYTE_PIXELS,
};

// `pixels_of_sums` takes `sum >> SHIFT` as the high word shifted by 4.
const _: () = assert!(SHIFT == 20);

crate::layout::kernels::stamp_kernels!(Avx2, ["avx2,fma,f16c"]: conversion, words, int8, fast);

/// `Simd`'s arithmetic for one x86 vector width: the intrinsic of each operation.
macro_rules! arithmetic {
    ($f:ty, $i:ty, $splat:ident, $splat_i:ident, $to_f32:ident, $sub:ident, $mul:ident, $div:ident, $fmadd:ident,
     $fnmadd:ident, $bits:ident, $add_i:ident, $and_i:ident, $mul_i:ident, $srli:ident) => {
        #[inline(always)]
        unsafe fn splat(x: f32) -> $f {
            $splat(x)
        }
        #[inline(always)]
        unsafe fn splat_i(x: i32) -> $i {
            $splat_i(x)
        }
        #[inline(always)]
        unsafe fn to_f32(x: $i) -> $f {
            $to_f32(x)
        }
        #[inline(always)]
        unsafe fn sub(a: $f, b: $f) -> $f {
            $sub(a, b)
        }
        #[inline(always)]
        unsafe fn mul(a: $f, b: $f) -> $f {
            $mul(a, b)
        }
        #[inline(always)]
        unsafe fn div(a: $f, b: $f) -> $f {
            $div(a, b)
        }
        #[inline(always)]
        unsafe fn mul_add(a: $f, b: $f, c: $f) -> $f {
            $fmadd(a, b, c)
        }
        #[inline(always)]
        unsafe fn neg_mul_add(a: $f, b: $f, c: $f) -> $f {
            $fnmadd(a, b, c)
        }
        #[inline(always)]
        unsafe fn bits(f: $f) -> $i {
            $bits(f)
        }
        #[inline(always)]
        unsafe fn add_i(a: $i, b: $i) -> $i {
            $add_i(a, b)
        }
        #[inline(always)]
        unsafe fn and_i(a: $i, b: $i) -> $i {
            $and_i(a, b)
        }
        #[inline(always)]
        unsafe fn mul_i(a: $i, b: $i) -> $i {
            $mul_i(a, b)
        }
        #[inline(always)]
        unsafe fn shr16(a: $i) -> $i {
            $srli::<16>(a)
        }
    };
}
pub(super) use arithmetic;

/// AVX2, FMA and F16C: 8 pixels a step, in-lane byte shuffles (`Permutes`).
#[derive(Clone, Copy)]
pub(super) struct Avx2;

pub(super) struct Avx2Tables {
    /// Source dwords to 16-byte lanes (`channels`).
    permute: __m256i,
    /// `shuffle_epi8` masks, the same in both lanes: per channel for
    /// `channels`; the first alone for `rgbx_u8` and `store_rgbx_bytes`.
    masks: [__m256i; 3],
    /// The pad, where it goes in a 32-bit lane.
    pad: __m256i,
}

#[inline(always)]
unsafe fn both_lanes(mask: [u8; 16]) -> __m256i {
    let lane = _mm_loadu_si128(mask.as_ptr().cast());
    _mm256_set_m128i(lane, lane)
}

impl Simd for Avx2 {
    const LANES: usize = 8;
    type I = __m256i;
    type F = __m256;
    type Tables = Avx2Tables;

    #[inline(always)]
    unsafe fn tables<const C: usize>(job: Job<'_>) -> Avx2Tables {
        let zero = _mm256_setzero_si256();
        let load = |idx: [i32; 8]| _mm256_loadu_si256(idx.as_ptr().cast());
        let mut t = Avx2Tables { permute: zero, masks: [zero; 3], pad: zero };
        match job {
            Job::Bytes(plan) => {
                t.masks[0] = both_lanes(plan.permutes.lane_pixels);
                t.pad = _mm256_set1_epi32((plan.pad << 24) as i32);
            }
            Job::Planar(plan) => {
                t.permute = load(in_order(C));
                let [m0, m1, m2] = &plan.permutes.widen;
                t.masks = [both_lanes(*m0), both_lanes(*m1), both_lanes(*m2)];
            }
            Job::Packed16(plan) | Job::Quads(plan) => {
                t.permute = load(Permutes::spread(C));
                let [m0, m1, m2] = &plan.permutes.split;
                let load = |m: &[u8; 32]| _mm256_loadu_si256(m.as_ptr().cast());
                t.masks = [load(m0), load(m1), load(m2)];
                t.pad = _mm256_set1_epi32((plan.pad << 16) as i32);
            }
            Job::Yuv422 { pad, swapped, y_first } => {
                t.masks[0] = both_lanes(chroma_422_mask(y_first, swapped, false));
                t.masks[1] = both_lanes(chroma_422_mask(y_first, swapped, true));
                t.pad = _mm256_set1_epi16(i16::from(pad));
            }
            Job::Nv12 { swapped, pad } => {
                // U then V (or V then U, `swapped`).
                let words = |first: bool| _mm256_loadu_si256(PAIR_WORDS[usize::from(first)].as_ptr().cast());
                t.masks = [words(swapped), words(!swapped), zero];
                t.pad = _mm256_set1_epi16(i16::from(pad));
            }
        }
        t
    }

    #[inline(always)]
    fn src_bytes<const C: usize>() -> usize {
        // A 3-channel step loads 32 bytes for its 24.
        if C == 3 {
            32
        } else {
            8 * C
        }
    }

    arithmetic!(
        __m256,
        __m256i,
        _mm256_set1_ps,
        _mm256_set1_epi32,
        _mm256_cvtepi32_ps,
        _mm256_sub_ps,
        _mm256_mul_ps,
        _mm256_div_ps,
        _mm256_fmadd_ps,
        _mm256_fnmadd_ps,
        _mm256_castps_si256,
        _mm256_add_epi32,
        _mm256_and_si256,
        _mm256_mullo_epi32,
        _mm256_srli_epi32
    );

    #[inline(always)]
    unsafe fn rgbx_u8<const C: usize>(t: &Avx2Tables, src: *const u8, dst: *mut u8) {
        let v = match C {
            1 => _mm256_cvtepu8_epi32(_mm_loadl_epi64(src.cast())),
            3 => _mm256_permutevar8x32_epi32(_mm256_loadu_si256(src.cast()), _mm256_setr_epi32(0, 1, 2, 3, 3, 4, 5, 6)),
            _ => _mm256_loadu_si256(src.cast()),
        };
        _mm256_storeu_si256(dst.cast(), _mm256_or_si256(_mm256_shuffle_epi8(v, t.masks[0]), t.pad));
    }

    #[inline(always)]
    unsafe fn channels<const C: usize, const PACKED: bool>(t: &Avx2Tables, src: *const u8) -> [__m256i; 3] {
        let v = match C {
            1 => _mm256_castsi128_si256(_mm_loadl_epi64(src.cast())),
            _ => _mm256_loadu_si256(src.cast()),
        };
        // 4-byte pixels in pixel order are where the shuffles want them already.
        let v = if C == 4 && !PACKED { v } else { _mm256_permutevar8x32_epi32(v, t.permute) };
        let [m0, m1, m2] = t.masks;
        if C == 1 {
            // GRAY: the three channels are one.
            let x = _mm256_shuffle_epi8(v, m0);
            return [x, x, x];
        }
        [_mm256_shuffle_epi8(v, m0), _mm256_shuffle_epi8(v, m1), _mm256_shuffle_epi8(v, m2)]
    }

    #[inline(always)]
    unsafe fn store_f32(out: *mut u8, f: __m256) {
        _mm256_storeu_ps(out.cast(), f)
    }
    #[inline(always)]
    unsafe fn store_f16(out: *mut u8, f: __m256) {
        _mm_storeu_si128(out.cast(), _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f))
    }

    /// With each 16-bit float in the high half of its 32-bit lane, a blend
    /// puts R (or B) and G (or the pad) side by side, and the lane order of
    /// `spread` (0, 1, 4, 5 | 2, 3, 6, 7) lets two in-lane unpacks leave
    /// pixels 0-3 and 4-7 in order: no pack, no cross-lane permute.
    #[inline(always)]
    unsafe fn store_rgbx16<const KIND: u8>(t: &Avx2Tables, out: *mut u8, rgb: [__m256; 3]) {
        #[inline(always)]
        unsafe fn high_half<const KIND: u8>(f: __m256) -> __m256i {
            match KIND {
                // The 8 halves come out in lane order; widening keeps it.
                F16 => _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f))),
                _ => bf16_high::<Avx2, KIND>(f),
            }
        }
        let [r, g, b] = [high_half::<KIND>(rgb[0]), high_half::<KIND>(rgb[1]), high_half::<KIND>(rgb[2])];
        // 32-bit lanes of (R, G) and (B, pad) words.
        let rg = _mm256_blend_epi16::<0xAA>(_mm256_srli_epi32::<16>(r), g);
        let bp = _mm256_blend_epi16::<0xAA>(_mm256_srli_epi32::<16>(b), t.pad);
        _mm256_storeu_si256(out.cast(), _mm256_unpacklo_epi32(rg, bp));
        _mm256_storeu_si256(out.add(32).cast(), _mm256_unpackhi_epi32(rg, bp));
    }

    #[inline(always)]
    unsafe fn luma_pairs(y: *const u8, offset: u8) -> [__m256i; 2] {
        let even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        let l = _mm_shuffle_epi8(_mm_subs_epu8(_mm_loadu_si128(y.cast()), _mm_set1_epi8(offset as i8)), even_odd);
        [_mm256_cvtepu8_epi32(l), _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(l))]
    }
    /// `vpmaddwd`, one uop, multiplies exactly: each 32-bit lane holds the
    /// words `256 (Y - 128)` and `Y`, the factor `cy >> 8` and `cy & 255`,
    /// so the lane's sum is `Y * cy - 32768 * (cy >> 8)` (`luma_bias`). Both
    /// lanes hold the 16 luma bytes, so one byte shuffle makes the words of
    /// 8 pixels (the even ones or the odd ones), and an xor turns `Y` into
    /// the signed `Y - 128` in the high byte.
    #[inline(always)]
    unsafe fn luma_products(y: *const u8, offset: u8, factor: __m256i) -> [__m256i; 2] {
        let l =
            _mm256_subs_epu8(_mm256_broadcastsi128_si256(_mm_loadu_si128(y.cast())), _mm256_set1_epi8(offset as i8));
        // Pixel p's bytes [0, Y, Y, 0] in lane j's dword k, for p = 8j + 2k (even), 8j + 2k + 1 (odd).
        let z = -128;
        let even = _mm256_setr_epi8(
            z, 0, 0, z, z, 2, 2, z, z, 4, 4, z, z, 6, 6, z, z, 8, 8, z, z, 10, 10, z, z, 12, 12, z, z, 14, 14, z,
        );
        let odd = _mm256_add_epi8(even, _mm256_set1_epi32(0x0001_0100));
        let signed = _mm256_set1_epi32(0x8000);
        let product = |mask: __m256i| _mm256_madd_epi16(_mm256_xor_si256(_mm256_shuffle_epi8(l, mask), signed), factor);
        [product(even), product(odd)]
    }
    fn luma_factor(cy: i32) -> i32 {
        ((cy & 0xFF) << 16) | (cy >> 8)
    }
    fn luma_bias(cy: i32) -> i32 {
        -32768 * (cy >> 8)
    }
    /// `vpmaddwd`, one uop, multiplies exactly as in `luma_products`: the
    /// chroma byte c as the words `256 (c - 128)` and `c`
    /// (`tables::dword_words`), the factor `c >> 8` and `c & 255`.
    #[inline(always)]
    unsafe fn add_chroma(acc: __m256i, x: __m256i, factor: __m256i) -> __m256i {
        _mm256_add_epi32(acc, _mm256_madd_epi16(x, factor))
    }
    fn chroma_factor(c: i32) -> i32 {
        ((c & 0xFF) << 16) | ((c >> 8) & 0xFFFF)
    }
    fn chroma_bias(c: i32) -> i32 {
        128 * (c & 0xFF)
    }
    #[inline(always)]
    unsafe fn chroma_planes(a: *const u8, b: *const u8) -> [__m256i; 2] {
        let mask = _mm256_loadu_si256(CHROMA_PLANE_WORDS.as_ptr().cast());
        let words = |p: *const u8| {
            let bytes = _mm256_broadcastq_epi64(_mm_loadl_epi64(p.cast()));
            _mm256_xor_si256(_mm256_shuffle_epi8(bytes, mask), _mm256_set1_epi32(0x8000))
        };
        [words(a), words(b)]
    }
    #[inline(always)]
    unsafe fn chroma(t: &Avx2Tables, uv: *const u8) -> [__m256i; 2] {
        let pairs = _mm256_broadcastsi128_si256(_mm_loadu_si128(uv.cast()));
        let words = |mask: __m256i| _mm256_xor_si256(_mm256_shuffle_epi8(pairs, mask), _mm256_set1_epi32(0x8000));
        [words(t.masks[0]), words(t.masks[1])]
    }
    /// 32 bytes are 8 pixel pairs, pairs 0-3 in lane 0 and 4-7 in lane 1,
    /// as `chroma` has them: byte shuffles alone make `luma_products`' words.
    #[inline(always)]
    unsafe fn luma_products_422<const Y_FIRST: bool>(row: *const u8, offset: u8, factor: __m256i) -> [__m256i; 2] {
        let q = _mm256_loadu_si256(row.cast());
        let offset = _mm256_set1_epi32(i32::from(offset) * 0x0001_0100);
        let signed = _mm256_set1_epi32(0x8000);
        let product = |mask: [u8; 16]| {
            let words = _mm256_xor_si256(_mm256_subs_epu8(_mm256_shuffle_epi8(q, both_lanes(mask)), offset), signed);
            _mm256_madd_epi16(words, factor)
        };
        [product(const { luma_422_mask(Y_FIRST, false) }), product(const { luma_422_mask(Y_FIRST, true) })]
    }
    #[inline(always)]
    unsafe fn chroma_422(t: &Avx2Tables, row: *const u8) -> [__m256i; 2] {
        let q = _mm256_loadu_si256(row.cast());
        let words = |mask: __m256i| _mm256_xor_si256(_mm256_shuffle_epi8(q, mask), _mm256_set1_epi32(0x8000));
        [words(t.masks[0]), words(t.masks[1])]
    }
    /// R, G, B (`RGB_ORDER`) and the pad of 16 pixels in pixel order, as
    /// `[pixels 0-3 | 8-11]` and `[pixels 4-7 | 12-15]`.
    const RGB_ORDER: bool = true;
    fn nv12_positions(pos: [usize; 3]) -> bool {
        pos == [0, 1, 2] || pos == [2, 1, 0]
    }
    #[inline(always)]
    unsafe fn store_rgbx_sums(t: &Avx2Tables, out: *mut u8, even: [__m256i; 3], odd: [__m256i; 3]) {
        let [lo, hi] = Self::pixels_of_sums(t, even, odd);
        _mm256_storeu_si256(out.cast(), _mm256_permute2x128_si256::<0x20>(lo, hi));
        _mm256_storeu_si256(out.add(32).cast(), _mm256_permute2x128_si256::<0x31>(lo, hi));
    }
    /// Straight from the packed channel bytes: in each lane (8 pixels), two
    /// pairs of byte shuffles make the 24 bytes of its 3-byte pixels, stored
    /// as 16 + 8.
    #[inline(always)]
    unsafe fn store_rgb_sums(t: &Avx2Tables, out: *mut u8, even: [__m256i; 3], odd: [__m256i; 3]) {
        let [rb, gp] = Self::channel_bytes(t, even, odd);
        let run = |[from_rb, from_gp]: [[u8; 16]; 2]| {
            _mm256_or_si256(_mm256_shuffle_epi8(rb, both_lanes(from_rb)), _mm256_shuffle_epi8(gp, both_lanes(from_gp)))
        };
        let (head, tail) = (run(THREE_BYTE_PIXELS[0]), run(THREE_BYTE_PIXELS[1]));
        _mm_storeu_si128(out.cast(), _mm256_castsi256_si128(head));
        _mm_storel_epi64(out.add(16).cast(), _mm256_castsi256_si128(tail));
        _mm_storeu_si128(out.add(24).cast(), _mm256_extracti128_si256::<1>(head));
        _mm_storel_epi64(out.add(40).cast(), _mm256_extracti128_si256::<1>(tail));
    }
}

impl Avx2 {
    /// 16 pixels' bytes from the sums of their even and odd pixels (pairs
    /// 0-3 | 4-7 in the lanes): each even sum's high word beside its odd
    /// neighbour's puts the pixels in order (0-7 | 8-15) as `sum >> 16`, an
    /// exact shift by 4 more leaves `sum >> 20`, and saturating packs clamp
    /// it to a byte; then R, G, B and pad bytes are interleaved.
    #[inline(always)]
    unsafe fn pixels_of_sums(t: &Avx2Tables, even: [__m256i; 3], odd: [__m256i; 3]) -> [__m256i; 2] {
        let [rb, gp] = Self::channel_bytes(t, even, odd);
        let (rg, bp) = (_mm256_unpacklo_epi8(rb, gp), _mm256_unpackhi_epi8(rb, gp));
        [_mm256_unpacklo_epi16(rg, bp), _mm256_unpackhi_epi16(rg, bp)]
    }
    /// The first half of `pixels_of_sums`: `[R 0-7, B 0-7 | R 8-15, B 8-15]`
    /// and `[G 0-7, pad | G 8-15, pad]`.
    #[inline(always)]
    unsafe fn channel_bytes(t: &Avx2Tables, even: [__m256i; 3], odd: [__m256i; 3]) -> [__m256i; 2] {
        let words =
            |e: __m256i, o: __m256i| _mm256_srai_epi16::<4>(_mm256_blend_epi16::<0xAA>(_mm256_srli_epi32::<16>(e), o));
        let [r, g, b] = [words(even[0], odd[0]), words(even[1], odd[1]), words(even[2], odd[2])];
        [_mm256_packus_epi16(r, b), _mm256_packus_epi16(g, t.pad)]
    }
}

/// A pair of u16 words is one 32-bit lane: the even word is its low half,
/// the odd word its high half.
impl Words for Avx2 {
    #[inline(always)]
    unsafe fn words10<const LOW: bool>(p: *const u8) -> [__m256i; 2] {
        let x = _mm256_loadu_si256(p.cast());
        if LOW {
            let ten = _mm256_set1_epi32(0x3FF);
            [_mm256_and_si256(x, ten), _mm256_and_si256(_mm256_srli_epi32::<16>(x), ten)]
        } else {
            [_mm256_srli_epi32::<22>(_mm256_slli_epi32::<16>(x)), _mm256_srli_epi32::<22>(x)]
        }
    }
}

impl Quantise for Avx2 {
    #[inline(always)]
    unsafe fn round_even(f: __m256) -> __m256i {
        let f = _mm256_min_ps(_mm256_max_ps(f, _mm256_set1_ps(-32768.0)), _mm256_set1_ps(32767.0));
        _mm256_cvtps_epi32(f) // MXCSR's rounding: to nearest, ties to even
    }
    /// Signed packs saturate to i8; each 16-byte lane then holds 4 pixels as
    /// 4 R, 4 G, 4 B, 4 pad bytes, interleaved by one shuffle.
    #[inline(always)]
    unsafe fn store_i8<const BYTES: usize>(out: *mut u8, rgb: [__m256i; 3], pad: __m256i) {
        let bytes = _mm256_packs_epi16(_mm256_packs_epi32(rgb[0], rgb[1]), _mm256_packs_epi32(rgb[2], pad));
        if BYTES == 4 {
            let m = _mm256_setr_epi8(
                0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, //
                0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
            );
            _mm256_storeu_si256(out.cast(), _mm256_shuffle_epi8(bytes, m));
        } else {
            let m = _mm256_setr_epi8(
                0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, -128, -128, -128, -128, //
                0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, -128, -128, -128, -128,
            );
            let packed =
                _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(bytes, m), _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7));
            _mm_storeu_si128(out.cast(), _mm256_castsi256_si128(packed));
            _mm_storel_epi64(out.add(16).cast(), _mm256_extracti128_si256::<1>(packed));
        }
    }
}

/// 4-byte pixels to 3-byte ones (`kernels::byte_reorder`), 8 pixels a step:
/// in each lane the pad bytes dropped (and R, B swapped) by one byte
/// shuffle, the lanes' 12 bytes put together by a dword permute, stored as
/// 16 + 8 bytes.
#[target_feature(enable = "avx2")]
pub(crate) fn drop_pad<const SWAP: bool>(_: &Plan, src: &[u8], dst: &mut [u8]) {
    let n = (src.len() / 4).min(dst.len() / 3);
    let lane: [i8; 16] = if SWAP {
        [2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1]
    } else {
        [0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1]
    };
    // SAFETY (every intrinsic below): AVX2 is enabled on this function,
    // which a plan only holds for a CPU that has it; the loop guard bounds
    // the 32 bytes read at 4i and the 24 written at 3i.
    unsafe {
        let half = _mm_loadu_si128(lane.as_ptr().cast());
        let shuffle = _mm256_set_m128i(half, half);
        let gather = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
        let mut i = 0;
        while i + 8 <= n {
            let x = _mm256_loadu_si256(src.as_ptr().add(4 * i).cast());
            let packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(x, shuffle), gather);
            let out = dst.as_mut_ptr().add(3 * i);
            _mm_storeu_si128(out.cast(), _mm256_castsi256_si128(packed));
            _mm_storel_epi64(out.add(16).cast(), _mm256_extracti128_si256::<1>(packed));
            i += 8;
        }
        scalar::drop_pad_pixels::<SWAP>(&src[4 * i..], &mut dst[3 * i..]);
    }
}

// The fast rounding's 16-bit lanes (`vector::nv12_pair_fast`).
impl Fast16 for Avx2 {
    type V = __m256i;
    const WORDS: usize = 16;
    #[inline(always)]
    unsafe fn load(p: *const u8) -> __m256i {
        // SAFETY: the kernel's loop guard bounds the 32 bytes read.
        unsafe { _mm256_loadu_si256(p.cast()) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut u8, v: __m256i) {
        // SAFETY: the kernel's loop guard bounds the 32 bytes written.
        unsafe { _mm256_storeu_si256(p.cast(), v) }
    }
    fast16_arithmetic!(__m256i:
        xor(a, b) = _mm256_xor_si256;
        and(a, b) = _mm256_and_si256;
        shl8(a) = _mm256_slli_epi16::<8>;
        subs_u8(a, b) = _mm256_subs_epu8;
        unpack_lo8(a, b) = _mm256_unpacklo_epi8;
        unpack_hi8(a, b) = _mm256_unpackhi_epi8;
        unpack_lo16(a, b) = _mm256_unpacklo_epi16;
        unpack_hi16(a, b) = _mm256_unpackhi_epi16;
        mulhrs(a, b) = _mm256_mulhrs_epi16;
        add16(a, b) = _mm256_add_epi16;
        adds16(a, b) = _mm256_adds_epi16;
        sra6(a) = _mm256_srai_epi16::<6>;
        packus(a, b) = _mm256_packus_epi16;
    );
    #[inline(always)]
    unsafe fn splat8(x: i8) -> __m256i {
        _mm256_set1_epi8(x)
    }
    #[inline(always)]
    unsafe fn splat16(x: i16) -> __m256i {
        _mm256_set1_epi16(x)
    }
    #[inline(always)]
    unsafe fn group_index() -> __m256i {
        _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7)
    }
    #[inline(always)]
    unsafe fn groups(a: __m256i, index: __m256i) -> __m256i {
        _mm256_permutevar8x32_epi32(a, index)
    }
    /// The 16 bytes in both lanes, each put in its word's high byte by one byte shuffle.
    #[inline(always)]
    unsafe fn plane_words<const GROUPS: bool>(p: *const u8, _index: __m256i) -> __m256i {
        const fn mask(groups: bool) -> [i8; 32] {
            let mut m = [-1i8; 32];
            let mut w = 0;
            while w < 16 {
                let (lane, k) = (w / 8, w % 8);
                // Grouped: lane 0 holds pairs 0, 1, 4, 5, 8, 9, 12, 13; lane 1 the others.
                let pair = if groups { (k / 2) * 4 + lane * 2 + k % 2 } else { lane * 8 + k };
                m[2 * w + 1] = pair as i8;
                w += 1;
            }
            m
        }
        const GROUPED: [i8; 32] = mask(true);
        const IN_ORDER: [i8; 32] = mask(false);
        let m = if GROUPS { &GROUPED } else { &IN_ORDER };
        // SAFETY: the kernel's loop guard bounds the 16 bytes read; the masks are 32 bytes.
        unsafe {
            let bytes = _mm256_broadcastsi128_si256(_mm_loadu_si128(p.cast()));
            let words = _mm256_shuffle_epi8(bytes, _mm256_loadu_si256(m.as_ptr().cast()));
            _mm256_xor_si256(words, _mm256_set1_epi16(i16::MIN))
        }
    }
    /// Each lane's 48 bytes from three packs that pair the channels' halves
    /// (`[c0 0-7, c1 0-7]`, `[c2 0-7, c0 8-15]`, `[c1 8-15, c2 8-15]`), each
    /// 16 bytes by byte shuffles of the two or three packs that hold them (7
    /// in all), stored 16 bytes at a time.
    #[inline(always)]
    unsafe fn store3(p: *mut u8, h: [(__m256i, __m256i); 3]) {
        let packs = [
            _mm256_packus_epi16(h[0].0, h[1].0),
            _mm256_packus_epi16(h[2].0, h[0].1),
            _mm256_packus_epi16(h[1].1, h[2].1),
        ];
        // SAFETY: the masks are 32 bytes; the kernel's loop guard bounds the 96 bytes written.
        unsafe {
            let chunk = |k: usize| {
                let m = |v: usize| _mm256_loadu_si256(THREE_BYTES[k][v].as_ptr().cast());
                _mm256_or_si256(
                    _mm256_or_si256(_mm256_shuffle_epi8(packs[0], m(0)), _mm256_shuffle_epi8(packs[1], m(1))),
                    _mm256_shuffle_epi8(packs[2], m(2)),
                )
            };
            let (k0, k1, k2) = (chunk(0), chunk(1), chunk(2));
            _mm_storeu_si128(p.cast(), _mm256_castsi256_si128(k0));
            _mm_storeu_si128(p.add(16).cast(), _mm256_castsi256_si128(k1));
            _mm_storeu_si128(p.add(32).cast(), _mm256_castsi256_si128(k2));
            _mm_storeu_si128(p.add(48).cast(), _mm256_extracti128_si256::<1>(k0));
            _mm_storeu_si128(p.add(64).cast(), _mm256_extracti128_si256::<1>(k1));
            _mm_storeu_si128(p.add(80).cast(), _mm256_extracti128_si256::<1>(k2));
        }
    }
}

/// `Fast16`'s one-instruction operations for one x86 vector width: the
/// intrinsic of each (`fn name(args) = intrinsic`).
macro_rules! fast16_arithmetic {
    ($v:ty: $($name:ident($($a:ident),*) = $f:path;)*) => {
        $(
            #[inline(always)]
            unsafe fn $name($($a: $v),*) -> $v {
                $f($($a),*)
            }
        )*
    };
}
pub(super) use fast16_arithmetic;

// RGB <-> BGR: the portable loop, vectorised by LLVM with AVX2 shuffles.
crate::simd::stamp!(@fn ["avx2"] swap_rb<>(_plan: &Plan, src: &[u8], dst: &mut [u8]) {
    scalar::swap_rb_pixels(src, dst)
});

// The YUV rearrangements (kernels::splitter, interleaver):
// camera rows into the NV12 decoders' input.

/// 32 bytes at a time: even bytes to the low 8 of each lane, odd to the
/// high 8, then the lanes' quarters gathered.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn split_row(row: &[u8], even: &mut [u8], odd: &mut [u8]) {
    let n = (row.len() / 2).min(even.len()).min(odd.len());
    let mask = _mm256_setr_epi8(
        0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, //
        0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
    );
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: i + 16 <= n bounds the 32 bytes read at 2i and the 16
        // written at i in each output.
        let x = _mm256_shuffle_epi8(_mm256_loadu_si256(row.as_ptr().add(2 * i).cast()), mask);
        let x = _mm256_permute4x64_epi64::<0b11_01_10_00>(x);
        _mm_storeu_si128(even.as_mut_ptr().add(i).cast(), _mm256_castsi256_si128(x));
        _mm_storeu_si128(odd.as_mut_ptr().add(i).cast(), _mm256_extracti128_si256::<1>(x));
        i += 16;
    }
    scalar::split_row(&row[2 * i..], &mut even[i..], &mut odd[i..]);
}

/// 32 bytes of U and of V a step, by bytes (I420) or 16-bit words (I010).
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn interleave_row<const BYTES: usize>(u: &[u8], v: &[u8], uv: &mut [u8]) {
    const { assert!(BYTES == 1 || BYTES == 2) };
    let n = u.len().min(v.len()).min(uv.len() / 2);
    let mut i = 0;
    while i + 32 <= n {
        // SAFETY: i + 32 <= n bounds the 32 bytes read from u and v at i
        // and the 64 written to uv at 2i.
        let a = _mm256_loadu_si256(u.as_ptr().add(i).cast());
        let b = _mm256_loadu_si256(v.as_ptr().add(i).cast());
        // Samples 0-7 | 16-23 and 8-15 | 24-31 (bytes; words: 0-3 | 8-11, 4-7 | 12-15).
        let (lo, hi) = if BYTES == 1 {
            (_mm256_unpacklo_epi8(a, b), _mm256_unpackhi_epi8(a, b))
        } else {
            (_mm256_unpacklo_epi16(a, b), _mm256_unpackhi_epi16(a, b))
        };
        let out = uv.as_mut_ptr().add(2 * i);
        _mm256_storeu_si256(out.cast(), _mm256_permute2x128_si256::<0x20>(lo, hi));
        _mm256_storeu_si256(out.add(32).cast(), _mm256_permute2x128_si256::<0x31>(lo, hi));
        i += 32;
    }
    scalar::interleave_row::<BYTES>(&u[i..], &v[i..], &mut uv[2 * i..]);
}

// The resize row loops (kernels/resample.rs).

/// The bilinear x pass, where LLVM's code for the portable loop was
/// measurably slow (it was two thirds of a 1080p -> 224x224 resize): SSSE3
/// shuffles and `pmaddwd`, inlined into the AVX2 and AVX-512 wrappers.
/// As `resample::horizontal_linear`: for each destination pixel, the pair of
/// source pixels from one 8-byte load, their values interleaved as 16-bit
/// (a, b) pairs, times the (w0, w1) pair in one multiply-add; two pixels
/// per step in the two halves of a 256-bit register, then one at a time.
/// Each step also prefetches a cache line of `ahead`, the row the next
/// call reads: a shrink's rows lie several rows apart, so the hardware
/// prefetchers would start each one cold.
impl Resample for Avx2 {
    #[inline(always)]
    fn horizontal_linear<const C: usize>(src: &[u8], taps: &Linear, out: &mut [i16], ahead: &[u8]) {
        rows_from::<C, 1>(0, 0, [src], taps, [out], [ahead])
    }

    /// Two rows in one loop: each step's taps serve both.
    #[inline(always)]
    fn horizontal_linear2<const C: usize>(src: [&[u8]; 2], taps: &Linear, out: [&mut [i16]; 2], ahead: [&[u8]; 2]) {
        rows_from::<C, 2>(0, 0, src, taps, out, ahead)
    }

    #[inline(always)]
    fn blocks<const C: usize, S: ColumnSum>(acc: &[S], kx: usize, area: u32, out: &mut [u8]) {
        pixel_blocks::<C, S>(acc, kx, area, out)
    }

    #[inline(always)]
    fn pair_sums<const C: usize>(row: &[u8], sums: &mut [u16]) {
        halving_sums::<C>(row, sums)
    }

    #[inline(always)]
    fn pair_means<const C: usize>(row: &[u8], sums: &[u16], out: &mut [u8]) {
        halving_means::<C>(row, sums, out)
    }

    #[inline(always)]
    fn yuv_linear<const ROWS: usize>(
        y: [&[u8]; 2],
        chroma: Chroma<'_>,
        taps: &YuvTaps,
        out: [&mut [i16]; 2],
        yuv: &YuvOut,
        ahead: &[&[u8]],
    ) {
        match (yuv.pos, yuv.pad) {
            ([0, 1, 2], 0) => yuv_rows::<ROWS, false, false>(y, chroma, taps, out, yuv, ahead),
            ([0, 1, 2], _) => yuv_rows::<ROWS, false, true>(y, chroma, taps, out, yuv, ahead),
            ([2, 1, 0], 0) => yuv_rows::<ROWS, true, false>(y, chroma, taps, out, yuv, ahead),
            ([2, 1, 0], _) => yuv_rows::<ROWS, true, true>(y, chroma, taps, out, yuv, ahead),
            _ => yuv_linear_from::<ROWS>(0, y, chroma, &taps.linear, out, yuv),
        }
    }
}

/// The resize row loops for AVX2 (their features as they always were: no F16C).
pub(crate) mod resample {
    crate::layout::kernels::stamp_kernels!(super::Avx2, ["avx2,fma"]: resample, fused);
}

/// `Resample::blocks` for 3- and 4-byte pixels: a pixel's column sums are
/// one 128-bit vector (3-byte pixels: with the next pixel's first, a lane
/// whose byte the next store overwrites), so a block's `kx` pixels are added
/// a vector at a time, two output pixels a step (one in each 128-bit lane),
/// and the mean taken as the portable loop takes it
/// (`(sum + 2) >> 2` for an area of 4; else `sum * (1 / area)` in f32 and
/// `cvtps2dq`, which rounds to nearest even as `round_ties_even` does, the
/// packs clamping to 255), where LLVM's code for the portable loop took most
/// of a 3x3 shrink's time. The portable loop takes the pixels whose last
/// vector or store would pass the slices' ends. 16-bit sums are widened as
/// they are loaded (`vpmovzxwd`), four values at a time as 32-bit ones are.
#[inline(always)]
fn pixel_blocks<const C: usize, S: ColumnSum>(acc: &[S], kx: usize, area: u32, out: &mut [u8]) {
    if !(C == 3 || C == 4) || kx == 0 {
        return blocks::<C, S>(acc, kx, area, out);
    }
    let n = (acc.len() / (C * kx)).min(out.len() / C);
    // The output pixels d whose last vector, C kx d + C (kx - 1) + 4 values, lies inside `acc`, and whose 4
    // bytes at C d inside the n pixels' C n (no byte past them written, though `out` may go on).
    let inside = |len: usize, reach: usize, stride: usize| len.checked_sub(reach).map_or(0, |room| room / stride + 1);
    let vectors = n.min(inside(acc.len(), C * (kx - 1) + 4, C * kx)).min(inside(C * n, 4, C));
    // The loads below read a value as 4 bytes where `WIDE`, else as 2.
    const { assert!(std::mem::size_of::<S>() == if S::WIDE { 4 } else { 2 }) };
    // SAFETY: the callers are compiled with AVX2 (SSE4.1 included). Output
    // pixel d < `vectors` reads the 4 values C kx d + C i.. of `acc`, i < kx,
    // and writes the 4 bytes C d.. of `out`, inside both (`inside`; C n <=
    // `out.len()`).
    unsafe {
        // The four sums at `p` as 32-bit values; two such, one in each 128-bit lane.
        let four = |p: *const S| {
            if S::WIDE {
                _mm_loadu_si128(p.cast())
            } else {
                _mm_cvtepu16_epi32(_mm_loadl_epi64(p.cast()))
            }
        };
        let two_fours = |low: *const S, high: *const S| {
            if S::WIDE {
                _mm256_loadu2_m128i(high.cast(), low.cast())
            } else {
                _mm256_cvtepu16_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64(low.cast()), _mm_loadl_epi64(high.cast())))
            }
        };
        let block = |d: usize| {
            let first = acc.as_ptr().add(C * kx * d);
            let mut sum = four(first);
            for i in 1..kx {
                sum = _mm_add_epi32(sum, four(first.add(C * i)));
            }
            sum
        };
        // Two pixels' sums, one in each 128-bit lane.
        let blocks2 = |d: usize| {
            let first = acc.as_ptr().add(C * kx * d);
            let second = first.add(C * kx);
            let mut sum = two_fours(first, second);
            for i in 1..kx {
                sum = _mm256_add_epi32(sum, two_fours(first.add(C * i), second.add(C * i)));
            }
            sum
        };
        let o = out.as_mut_ptr();
        let store = |d: usize, mean: __m128i| {
            let bytes = _mm_packus_epi16(_mm_packus_epi32(mean, mean), mean);
            o.add(C * d).cast::<i32>().write_unaligned(_mm_cvtsi128_si32(bytes));
        };
        // Pixel d's bytes, then pixel d + 1's (which overwrite what pixel d's store put past its C).
        let store2 = |d: usize, mean: __m256i| {
            let bytes = _mm256_packus_epi16(_mm256_packus_epi32(mean, mean), mean);
            o.add(C * d).cast::<i32>().write_unaligned(_mm_cvtsi128_si32(_mm256_castsi256_si128(bytes)));
            o.add(C * (d + 1)).cast::<i32>().write_unaligned(_mm_cvtsi128_si32(_mm256_extracti128_si256::<1>(bytes)));
        };
        let mut d = 0;
        if area == 4 {
            let two = _mm256_set1_epi32(2);
            while d + 2 <= vectors {
                store2(d, _mm256_srli_epi32::<2>(_mm256_add_epi32(blocks2(d), two)));
                d += 2;
            }
            if d < vectors {
                store(d, _mm_srli_epi32::<2>(_mm_add_epi32(block(d), _mm256_castsi256_si128(two))));
            }
        } else {
            let inv = _mm256_set1_ps(1.0 / area as f32);
            while d + 2 <= vectors {
                store2(d, _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_cvtepi32_ps(blocks2(d)), inv)));
                d += 2;
            }
            if d < vectors {
                store(d, _mm_cvtps_epi32(_mm_mul_ps(_mm_cvtepi32_ps(block(d)), _mm256_castps256_ps128(inv))));
            }
        }
    }
    blocks::<C, S>(&acc[C * kx * vectors..], kx, area, &mut out[C * vectors..]);
}

/// In each 16-byte lane, the same channel of two neighbouring pixels side
/// by side, so that one `pmaddubsw` by ones sums each pair: 4-byte pixels
/// reordered, 1-byte ones as they are. (3-byte pixels: `THREE_PAIRS`.)
#[inline(always)]
unsafe fn pairs_side_by_side<const C: usize>(v: __m256i) -> __m256i {
    if C == 4 {
        _mm256_shuffle_epi8(v, both_lanes([0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15]))
    } else {
        v
    }
}

/// The 12 bytes of two pairs of 3-byte pixels (a 16-byte lane's first 12),
/// each channel's two side by side as `pairs_side_by_side` sets them, and
/// four zeros: a `pmaddubsw` by ones makes the two pairs' 6 sums and 2 zeros.
const THREE_PAIRS: [u8; 16] = [0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11, 0x80, 0x80, 0x80, 0x80];

/// `Resample::pair_sums` for 1- and 4-byte pixels: 32 bytes a step, a
/// shuffle and a `pmaddubsw` make their 16 sums in order. 3-byte pixels: 4
/// pixels' pairs a step from a 12-byte window in each lane (`THREE_PAIRS`),
/// each lane's 6 sums stored with 2 zeros that the next store overwrites.
#[inline(always)]
fn halving_sums<const C: usize>(row: &[u8], sums: &mut [u16]) {
    let n = (row.len() / (2 * C)).min(sums.len() / C);
    let mut d = 0;
    if C == 3 {
        // SAFETY: the callers are compiled with AVX2. A step reads the 16
        // bytes at 6 d and at 6 d + 12 of `row` and writes the 8 sums at 3 d
        // and at 3 d + 6 of `sums`: d + 5 <= n pixels keeps both inside the
        // n pixels' 6 n bytes and 3 n sums; the two zeros past the step's 12
        // sums lie before 3 n, where the next step or the tail writes.
        unsafe {
            let (ones, mask) = (_mm256_set1_epi8(1), both_lanes(THREE_PAIRS));
            while d + 5 <= n {
                let v = _mm256_loadu2_m128i(row.as_ptr().add(6 * d + 12).cast(), row.as_ptr().add(6 * d).cast());
                let s = _mm256_maddubs_epi16(_mm256_shuffle_epi8(v, mask), ones);
                let o = sums.as_mut_ptr().add(3 * d);
                _mm_storeu_si128(o.cast(), _mm256_castsi256_si128(s));
                _mm_storeu_si128(o.add(6).cast(), _mm256_extracti128_si256::<1>(s));
                d += 4;
            }
        }
    }
    if C == 4 || C == 1 {
        // SAFETY: the callers are compiled with AVX2. A step reads the 32
        // bytes 2 C d.. of `row` and writes the 16 sums C d.. of `sums`,
        // d + 16 / C <= n pixels, so inside both.
        unsafe {
            let ones = _mm256_set1_epi8(1);
            while d + 16 / C <= n {
                let v = _mm256_loadu_si256(row.as_ptr().add(2 * C * d).cast());
                let s = _mm256_maddubs_epi16(pairs_side_by_side::<C>(v), ones);
                _mm256_storeu_si256(sums.as_mut_ptr().add(C * d).cast(), s);
                d += 16 / C;
            }
        }
    }
    pair_sums::<C>(&row[2 * C * d..], &mut sums[C * d..]);
}

/// `Resample::pair_means` for 1- and 4-byte pixels: 64 bytes a step, their
/// pair sums as `halving_sums` makes them plus the first row's, the mean
/// rounded per 16-bit lane, packed to 32 bytes in order. 3-byte pixels: 4
/// pixels a step as `halving_sums` takes them, each lane's 6 means stored
/// with 2 bytes that the next store overwrites.
#[inline(always)]
fn halving_means<const C: usize>(row: &[u8], sums: &[u16], out: &mut [u8]) {
    let n = (row.len() / (2 * C)).min(sums.len() / C).min(out.len() / C);
    let mut d = 0;
    if C == 3 {
        // SAFETY: the callers are compiled with AVX2. A step reads the 16
        // bytes at 6 d and at 6 d + 12 of `row` and the 8 sums at 3 d and at
        // 3 d + 6 of `sums`, and writes the 8 bytes at 3 d and at 3 d + 6 of
        // `out`: d + 5 <= n pixels keeps all inside the n pixels' 6 n bytes,
        // 3 n sums and 3 n bytes; the two bytes past the step's 12 lie
        // before 3 n, where the next step or the tail writes.
        unsafe {
            let (ones, two, mask) = (_mm256_set1_epi8(1), _mm256_set1_epi16(2), both_lanes(THREE_PAIRS));
            while d + 5 <= n {
                let v = _mm256_loadu2_m128i(row.as_ptr().add(6 * d + 12).cast(), row.as_ptr().add(6 * d).cast());
                let first = _mm256_loadu2_m128i(sums.as_ptr().add(3 * d + 6).cast(), sums.as_ptr().add(3 * d).cast());
                let both = _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_shuffle_epi8(v, mask), ones), first);
                let means = _mm256_srli_epi16::<2>(_mm256_add_epi16(both, two));
                let packed = _mm256_packus_epi16(means, means);
                let o = out.as_mut_ptr().add(3 * d);
                _mm_storel_epi64(o.cast(), _mm256_castsi256_si128(packed));
                _mm_storel_epi64(o.add(6).cast(), _mm256_extracti128_si256::<1>(packed));
                d += 4;
            }
        }
    }
    if C == 4 || C == 1 {
        // SAFETY: the callers are compiled with AVX2. A step reads the 64
        // bytes 2 C d.. of `row` and the 32 sums C d.. of `sums`, and writes
        // the 32 bytes C d.. of `out`, d + 32 / C <= n pixels, so inside all three.
        unsafe {
            let (ones, two) = (_mm256_set1_epi8(1), _mm256_set1_epi16(2));
            while d + 32 / C <= n {
                let half = |k: usize| {
                    let v = _mm256_loadu_si256(row.as_ptr().add(2 * C * d + 32 * k).cast());
                    let first = _mm256_loadu_si256(sums.as_ptr().add(C * d + 16 * k).cast());
                    let both = _mm256_add_epi16(_mm256_maddubs_epi16(pairs_side_by_side::<C>(v), ones), first);
                    _mm256_srli_epi16::<2>(_mm256_add_epi16(both, two))
                };
                // The pack interleaves the halves' lanes: a qword permute puts them back in order.
                let packed = _mm256_permute4x64_epi64::<0xD8>(_mm256_packus_epi16(half(0), half(1)));
                _mm256_storeu_si256(out.as_mut_ptr().add(C * d).cast(), packed);
                d += 32 / C;
            }
        }
    }
    pair_means::<C>(&row[2 * C * d..], &sums[C * d..], &mut out[C * d..]);
}

/// The bilinear x pass (`Resample::horizontal_linear`) from destination
/// pixel `first` on, `ahead` prefetched from byte `fetched` on: where a
/// level's own loop stopped (`avx512::VbmiRows`), or 0 and 0.
#[inline(always)]
pub(super) fn rows_from<const C: usize, const R: usize>(
    first: usize,
    fetched: usize,
    src: [&[u8]; R],
    taps: &Linear,
    mut out: [&mut [i16]; R],
    ahead: [&[u8]; R],
) {
    if C == 1 {
        for r in 0..R {
            horizontal_linear_from::<C>(first, src[r], taps, &mut *out[r]);
        }
        return;
    }
    let (first, fetched) = match C {
        3 => four_steps::<C, R, false>(first, fetched, src, taps, &mut out, ahead),
        4 => {
            let (near, fetched) = four_steps::<C, R, false>(first, fetched, src, taps, &mut out, ahead);
            four_steps::<C, R, true>(near, fetched, src, taps, &mut out, ahead)
        }
        _ => (first, fetched),
    };
    let mut mask = [0x80u8; 16];
    for c in 0..4 {
        mask[4 * c] = c as u8;
        mask[4 * c + 2] = (C + c) as u8;
    }
    let n = taps.index.len();
    let shortest = src.iter().map(|s| s.len()).min().unwrap_or(0);
    let fits = |d: usize| taps.index[d][0] as usize * C + 8 <= shortest;
    let (mut d, mut fetched) = (first, fetched);
    assert!(out.iter().all(|o| o.len() >= n * C + 4) && taps.weight.len() == n);
    // SAFETY: the callers are compiled with AVX2 (SSSE3 and SSE4.1 included).
    // Each load reads 8 bytes at index * C, inside every row of `src`
    // (`fits`; indices never decrease, so `fits(d + 1)` covers d); weights
    // are read at d and d + 1 < n; each store writes 4 values at d * C,
    // inside `out` (room for 4 values more than n * C). Prefetches name
    // addresses inside `ahead` (and could not fault if they did not).
    unsafe {
        let mask = _mm_loadu_si128(mask.as_ptr().cast());
        let mask2 = _mm256_broadcastsi128_si256(mask);
        let spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        let weights = taps.weight.as_ptr();
        while d + 2 <= n && fits(d + 1) {
            // A line a step, not `Prefetch`: its bookkeeping cost this two-pixel step more (docs/layout.md).
            for a in &ahead {
                if fetched < a.len() {
                    _mm_prefetch::<_MM_HINT_T0>(a.as_ptr().add(fetched).cast());
                }
            }
            fetched += 64;
            let (i0, i1) = (taps.index[d][0] as usize * C, taps.index[d + 1][0] as usize * C);
            // The (w0, w1) pairs of pixels d and d + 1: one per 128-bit half.
            let pair = weights.add(d).cast::<i64>().read_unaligned();
            let w = _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(_mm_set1_epi64x(pair)), spread);
            for r in 0..R {
                let p0 = _mm_loadl_epi64(src[r].as_ptr().add(i0).cast());
                let p1 = _mm_loadl_epi64(src[r].as_ptr().add(i1).cast());
                let bytes = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(p0), p1);
                let sums = _mm256_srai_epi32::<4>(_mm256_madd_epi16(_mm256_shuffle_epi8(bytes, mask2), w));
                // Per 128-bit half, the 4 sums of one pixel as 16-bit values in its low 64 bits.
                let packed = _mm256_packs_epi32(sums, sums);
                let o = out[r].as_mut_ptr();
                _mm_storel_epi64(o.add(d * C).cast(), _mm256_castsi256_si128(packed));
                _mm_storel_epi64(o.add((d + 1) * C).cast(), _mm256_extracti128_si256::<1>(packed));
            }
            d += 2;
        }
        while d < n && fits(d) {
            let w = taps.weight[d];
            let weights = _mm_set1_epi32((w[0] as u16 as i32) | ((w[1] as i32) << 16));
            for r in 0..R {
                let bytes = _mm_loadl_epi64(src[r].as_ptr().add(taps.index[d][0] as usize * C).cast());
                let sums = _mm_srai_epi32::<4>(_mm_madd_epi16(_mm_shuffle_epi8(bytes, mask), weights));
                _mm_storel_epi64(out[r].as_mut_ptr().add(d * C).cast(), _mm_packs_epi32(sums, sums));
            }
            d += 1;
        }
    }
    for r in 0..R {
        horizontal_linear_from::<C>(d, src[r], taps, &mut *out[r]);
    }
}

/// The farthest `four_steps`' 16-byte windows let a pair's second source
/// pixel lie from its first for `C`-byte pixels: both pixels' pairs inside.
const fn near_reach(c: usize) -> usize {
    16 / c - 2
}

/// `four_steps`' byte shuffles for a 128-bit lane whose first pixel is the
/// window's and whose second is `k` pixels on. Their eight 32-bit lanes (the
/// first shuffle's four, then the second's) hold a channel of a pixel and of
/// the next as two 16-bit values: the first pixel's `C` channels, then the
/// second's, then (3-byte pixels) two zeros, so that the sums pack in the
/// order the row stores them.
const fn near_lane<const C: usize>(k: usize) -> [[u8; 16]; 2] {
    let mut masks = [[0x80u8; 16]; 2];
    let mut slot = 0;
    while slot < 2 * C {
        let (at, mask, lane) = ((slot / C) * k * C + slot % C, slot / 4, slot % 4);
        masks[mask][4 * lane] = at as u8;
        masks[mask][4 * lane + 2] = (at + C) as u8;
        slot += 1;
    }
    masks
}

/// `four_steps`' shuffles for `C`-byte pixels by the distances of the
/// step's second and fourth pixels from the first and third (0 to
/// `near_reach(C)`): entry `(near_reach(C) + 1) k0 + k1`, the first shuffle
/// and the second, each with the low lane's bytes then the high lane's.
const fn near_masks<const C: usize>() -> [[[u8; 32]; 2]; 16] {
    let ways = near_reach(C) + 1;
    let mut masks = [[[0x80u8; 32]; 2]; 16];
    let mut e = 0;
    while e < ways * ways {
        let (low, high) = (near_lane::<C>(e / ways), near_lane::<C>(e % ways));
        let mut m = 0;
        while m < 2 {
            let mut j = 0;
            while j < 16 {
                masks[e][m][j] = low[m][j];
                masks[e][m][16 + j] = high[m][j];
                j += 1;
            }
            m += 1;
        }
        e += 1;
    }
    masks
}

const NEAR_MASKS_3: [[[u8; 32]; 2]; 16] = near_masks::<3>();
const NEAR_MASKS_4: [[[u8; 32]; 2]; 16] = near_masks::<4>();

/// `four_steps`' dword permutes of 32-byte windows by the distances of the
/// step's second and fourth pixels from the first and third (0 to 6): entry
/// 7 k0 + k1 puts a pixel and the next, then the pixel k0 (k1) on and its
/// next, in the low (high) lane.
const SPREAD_PICKS: [[u32; 8]; 49] = {
    let mut picks = [[0u32; 8]; 49];
    let mut e = 0;
    while e < 49 {
        let (k0, k1) = ((e / 7) as u32, (e % 7) as u32);
        picks[e] = [0, 1, k0, k0 + 1, 0, 1, k1, k1 + 1];
        e += 1;
    }
    picks
};

/// The bilinear x pass of 3- and 4-byte pixels
/// (`resample::horizontal_linear::<C>`, exactly) from destination pixel
/// `d`, four a step while each pair of neighbours reads source pixels close
/// enough: a window from each pair's first source pixel, one in each
/// 128-bit lane; two shuffles set each channel's two source bytes side by
/// side, a `pmaddwd` each by their (w0, w1) pairs, one pack puts each
/// lane's two pixels in the row's order (3-byte pixels: 6 values and two
/// that the next store overwrites). Without `SPREAD` the windows are 16
/// bytes, the neighbours at most `near_reach(C)` apart (2 for 4-byte pixels:
/// any shrink by 2 or less; 3 for 3-byte ones, by 3 or less), the shuffles
/// chosen by the two distances (`near_masks`). With `SPREAD` (4-byte pixels
/// up to six apart, a shrink by up to 6) they are 32 bytes, and a dword
/// permute of each by the two distances (`SPREAD_PICKS`) and a blend set
/// the pairs as a distance of two has them: a permute a window more. Two
/// pixels a step (the loop after it) take a load and an insert each, and
/// twice the shuffles a pixel. Returns where it stopped: the destination
/// pixel, the bytes of `ahead` prefetched.
#[inline(always)]
fn four_steps<const C: usize, const R: usize, const SPREAD: bool>(
    first: usize,
    fetched: usize,
    src: [&[u8]; R],
    taps: &Linear,
    out: &mut [&mut [i16]; R],
    ahead: [&[u8]; R],
) -> (usize, usize) {
    let n = taps.index.len();
    let shortest = src.iter().map(|s| s.len()).min().unwrap_or(0);
    let masks = if C == 4 { &NEAR_MASKS_4 } else { &NEAR_MASKS_3 };
    let (reach, window_bytes) = if SPREAD { (6, 32) } else { (near_reach(C), 16) };
    let (mut d, mut fetched) = (first, fetched);
    assert!((C == 4 || C == 3 && !SPREAD) && taps.weight.len() == n);
    assert!(out.iter().all(|o| o.len() >= n * C + 2 * (4 - C)));
    // SAFETY: the callers are compiled with AVX2. A step reads the taps
    // d..d + 4 <= n and, from each row, the `window_bytes` bytes at C times
    // the first and the third pixel's first index (inside every row: checked
    // on the third, and the first is not past it, checked); the shuffles
    // name bytes of those 16 (the second and fourth pixels' pairs start at
    // most `reach` pixels on, checked, and end by byte (reach + 2) C <= 16),
    // or the permutes dwords of those 32 (by byte 4 (reach + 2) <= 32) and
    // the shuffles bytes of each lane. It writes the 4 C values C d.. of each
    // `out`, and 3-byte pixels 2 more (C n + 2 (4 - C) long at least).
    // Prefetches name bytes of `ahead` (and could not fault if they did not).
    unsafe {
        // Each 32-bit lane's weight pair: its pixel's (lanes past 2 C: the zeros').
        let pick = |slot: i32| if slot / C as i32 == 0 { 0 } else { 1 };
        let (of_first, of_second) = (
            _mm256_setr_epi32(pick(0), pick(1), pick(2), pick(3), 2 + pick(0), 2 + pick(1), 2 + pick(2), 2 + pick(3)),
            _mm256_setr_epi32(pick(4), pick(5), pick(6), pick(7), 2 + pick(4), 2 + pick(5), 2 + pick(6), 2 + pick(7)),
        );
        // 4-byte pixels' shuffles at distances of two (the pairs as `SPREAD`'s permutes set them).
        let fixed = NEAR_MASKS_4[3 * 2 + 2].map(|m| _mm256_loadu_si256(m.as_ptr().cast()));
        let index = taps.index.as_ptr();
        while d + 4 <= n {
            let at = |k: usize| (*index.add(d + k))[0] as usize;
            let (i0, i1, i2, i3) = (at(0), at(1), at(2), at(3));
            let (k0, k1) = (i1.wrapping_sub(i0), i3.wrapping_sub(i2));
            if k0 > reach || k1 > reach || i2 < i0 || C * i2 + window_bytes > shortest {
                break;
            }
            // A line a step: 4 C bytes a destination pixel, at least a row's C a source pixel at these shrinks.
            for a in &ahead {
                if fetched < a.len() {
                    _mm_prefetch::<_MM_HINT_T0>(a.as_ptr().add(fetched).cast());
                }
            }
            fetched += 64;
            // 4-byte pixels' first shuffle is the same at every distance, and with `SPREAD` the second too.
            let (firsts, seconds) = if SPREAD {
                (fixed[0], fixed[1])
            } else {
                let step = &masks[(reach + 1) * k0 + k1];
                let load = |m: &[u8; 32]| _mm256_loadu_si256(m.as_ptr().cast());
                (if C == 4 { fixed[0] } else { load(&step[0]) }, load(&step[1]))
            };
            let picks = if SPREAD { _mm256_loadu_si256(SPREAD_PICKS[7 * k0 + k1].as_ptr().cast()) } else { firsts };
            let pairs = _mm256_castsi128_si256(_mm_loadu_si128(taps.weight.as_ptr().add(d).cast()));
            let (w_first, w_second) =
                (_mm256_permutevar8x32_epi32(pairs, of_first), _mm256_permutevar8x32_epi32(pairs, of_second));
            for r in 0..R {
                let row = src[r].as_ptr();
                let window = if SPREAD {
                    let low = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(row.add(4 * i0).cast()), picks);
                    let high = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(row.add(4 * i2).cast()), picks);
                    _mm256_blend_epi32::<0xF0>(low, high)
                } else {
                    _mm256_loadu2_m128i(row.add(C * i2).cast(), row.add(C * i0).cast())
                };
                let sums = |mask: __m256i, w: __m256i| {
                    _mm256_srai_epi32::<4>(_mm256_madd_epi16(_mm256_shuffle_epi8(window, mask), w))
                };
                // Per 128-bit lane: the first (third) pixel's C sums, then the second (fourth) pixel's.
                let packed = _mm256_packs_epi32(sums(firsts, w_first), sums(seconds, w_second));
                let o = out[r].as_mut_ptr().add(C * d);
                if C == 4 {
                    _mm256_storeu_si256(o.cast(), packed);
                } else {
                    _mm_storeu_si128(o.cast(), _mm256_castsi256_si128(packed));
                    _mm_storeu_si128(o.add(2 * C).cast(), _mm256_extracti128_si256::<1>(packed));
                }
            }
            d += 4;
        }
    }
    (d, fetched)
}

/// The 2 bytes at `base + at(k)` as word k of a vector, k in 0..8: put
/// together in general registers, four to a 64-bit one, which leaves the
/// vector shuffle units (the x pass's bottleneck) two moves and one unpack
/// (`vpgatherdd`, or inserting each load, was slower on Zen 3).
#[inline(always)]
unsafe fn words8(base: &[u8], at: impl Fn(usize) -> usize) -> __m128i {
    let word = |k: usize| u64::from(base.as_ptr().add(at(k)).cast::<u16>().read_unaligned());
    let four = |k: usize| (word(k) | word(k + 1) << 16 | word(k + 2) << 32 | word(k + 3) << 48) as i64;
    _mm_set_epi64x(four(4), four(0))
}

/// `dword(k)` as 32-bit lane k, k in 0..8, put together as `words8` does.
#[inline(always)]
unsafe fn dwords8(dword: impl Fn(usize) -> u32) -> __m256i {
    let two = |k: usize| (u64::from(dword(k)) | u64::from(dword(k + 1)) << 32) as i64;
    _mm256_set_epi64x(two(6), two(4), two(2), two(0))
}

/// The pixel of a step in each 32-bit lane of `yuv_rows`.
const LANE: [usize; 8] = [0, 1, 4, 5, 2, 3, 6, 7];

/// The cache lines of some byte rows, fetched a few at a time: a share of
/// them each step of a loop of `steps`, so that all are asked for by its end.
struct Prefetch<'a> {
    rows: &'a [&'a [u8]],
    row: usize,
    at: usize,
    per_step: usize,
}

impl<'a> Prefetch<'a> {
    fn new(rows: &'a [&'a [u8]], steps: usize) -> Prefetch<'a> {
        let lines: usize = rows.iter().map(|r| r.len().div_ceil(64)).sum();
        Prefetch { rows, row: 0, at: 0, per_step: lines.div_ceil(steps.max(1)) }
    }

    #[inline(always)]
    fn step(&mut self) {
        for _ in 0..self.per_step {
            while self.row < self.rows.len() && self.at >= self.rows[self.row].len() {
                (self.row, self.at) = (self.row + 1, 0);
            }
            let Some(row) = self.rows.get(self.row) else { return };
            // SAFETY: `at` < row.len(): the address lies inside the row (and a prefetch cannot fault anyway).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(row.as_ptr().add(self.at).cast()) };
            self.at += 64;
        }
    }
}

/// `Resample::yuv_linear` for AVX2 (and AVX-512, compiled with its
/// features): 8 destination pixels a step. Each lane gathers the 4 Y bytes
/// at its first source pixel (the pixel and the next are its two) and the 4
/// chroma bytes of their pairs (NV12: U, V of the first pixel's pair and of
/// the next pair; I420: 4 of each plane), decodes both pixels in 32-bit
/// lanes as `nv12_rows` does (the second pixel's chroma shifted down by a
/// per-lane shift where the first pixel is odd), puts each channel's two
/// values side by side as 16-bit words, clamped to 0..=255 (the decoders'
/// saturation), and weighs them with one `pmaddwd`: the sums of
/// `horizontal_linear::<4>` over the decoded row, exactly. `SWAP`: R, G, B
/// at positions 2, 1, 0 (NV21's `YuvOut`). `PAD`: a pad other than 0 (a
/// resize decodes with 0).
#[inline(always)]
fn yuv_rows<const ROWS: usize, const SWAP: bool, const PAD: bool>(
    y: [&[u8]; 2],
    chroma: Chroma<'_>,
    taps: &YuvTaps,
    out: [&mut [i16]; 2],
    yuv: &YuvOut,
    ahead: &[&[u8]],
) {
    let n = taps.start.len();
    assert!(taps.linear.index.len() == n && taps.linear.weight.len() == n);
    assert!(out[..ROWS].iter().all(|o| o.len() >= 4 * n));
    let luma = y[..ROWS].iter().map(|r| r.len()).min().unwrap_or(0);
    let chroma_len = match chroma {
        Chroma::Interleaved(c) => c.len(),
        Chroma::Planar(u, v) => u.len().min(v.len()),
    };
    // A lane reads 2 Y bytes at its first pixel, and its chroma (`dwords8`).
    let fits = |x: u32| {
        let x = x as usize;
        let chroma_end = match chroma {
            Chroma::Interleaved(_) => (x & !1) + 4,
            Chroma::Planar(..) => x / 2 + 2,
        };
        x + 2 <= luma && chroma_end <= chroma_len
    };
    let vectors = taps.start.partition_point(|&x| fits(x));
    // The next call's rows lie past these (rows apart where the shrink along y
    // is strong), where the hardware prefetchers would start cold: their
    // lines spread over the steps.
    let mut prefetch = Prefetch::new(ahead, vectors.div_ceil(8));
    let k = yuv.k;
    let mut d = 0;
    // SAFETY: the callers are compiled with AVX2. Every lane's loads lie
    // inside the Y rows and the chroma (`fits`, for the steps' pixels
    // d..d + 8 <= `vectors`: the starts never decrease); the weights and
    // starts are read at d..d + 8 <= n; each step stores 32 values at 4d,
    // inside every row of `out` (4n values, checked above).
    unsafe {
        let lane = _mm256_loadu_si256(LANE.map(|k| k as i32).as_ptr().cast());
        let offset = _mm_set1_epi8(k.y_offset as i8);
        // Y, U and V multiplied by `vpmaddwd` as the row decoders do (`luma_products`, `add_chroma`).
        let cy = _mm256_set1_epi32(<Avx2>::luma_factor(k.cy));
        let [cvr, cvg, cug, cub] = [k.cvr, k.cvg, k.cug, k.cub].map(|c| _mm256_set1_epi32(<Avx2>::chroma_factor(c)));
        // The rounding half, less what those products add.
        let (luma_bias, chroma_bias) = (<Avx2>::luma_bias(k.cy), <Avx2>::chroma_bias);
        let bias = [chroma_bias(k.cvr), chroma_bias(k.cvg) + chroma_bias(k.cug), chroma_bias(k.cub)]
            .map(|b| _mm256_set1_epi32(HALF - luma_bias - b));
        let signed = _mm256_set1_epi32(0x8000);
        let words = |x: __m256i, mask: __m256i| _mm256_xor_si256(_mm256_shuffle_epi8(x, mask), signed);
        let mask = |b: usize| _mm256_loadu_si256(in_dword(b).as_ptr().cast());
        let (first_byte, second_byte) = (mask(0), mask(1));
        let pad = _mm256_set1_epi16(i16::from(yuv.pad));
        let (zero, max) = (_mm256_setzero_si256(), _mm256_set1_epi16(255));
        // A channel's sums of the first pixels (even) and of the second (odd):
        // their bytes as the words of each lane, weighed.
        let weigh = |even: __m256i, odd: __m256i, w: __m256i| {
            let words = _mm256_srai_epi16::<4>(_mm256_blend_epi16::<0xAA>(_mm256_srli_epi32::<16>(even), odd));
            let bytes = _mm256_min_epi16(_mm256_max_epi16(words, zero), max);
            _mm256_srai_epi32::<4>(_mm256_madd_epi16(bytes, w))
        };
        // `acc` plus the products of `vpmaddwd` words (as `add_chroma`).
        let add = |acc: __m256i, x: __m256i, factor: __m256i| _mm256_add_epi32(acc, _mm256_madd_epi16(x, factor));
        // The three chroma terms (with the bias) of U, V as `vpmaddwd` words.
        let terms =
            |u: __m256i, v: __m256i| [add(bias[0], v, cvr), add(add(bias[1], v, cvg), u, cug), add(bias[2], u, cub)];
        loop {
            if d + 8 > vectors {
                // The last step ends at the last pixel it may read (again writing the same values for some).
                if vectors < 8 || d >= vectors {
                    break;
                }
                d = vectors - 8;
            }
            prefetch.step();
            // Lane k holds pixel d + LANE[k]: the two unpacks of the store then leave pixels in order.
            let starts = taps.start.as_ptr().add(d);
            let start = |k: usize| *starts.add(LANE[k]) as usize;
            let x = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(starts.cast()), lane);
            let w = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(taps.linear.weight.as_ptr().add(d).cast()), lane);
            // Each lane's low bit, moved to bit 31, then down to a shift of 16 or 8.
            let odd = _mm256_slli_epi32::<31>(x);
            // Each lane's chroma bytes: NV12's U, V pairs of its two pixels
            // (one pair if the first is even), or I420's two U then two V;
            // the second pixel's are the first's shifted down where the first is odd.
            // V is the second byte of an NV12 pair, the third of I420's U, U, V, V.
            let (q, v_byte, odd_shift) = match chroma {
                Chroma::Interleaved(c) => {
                    let read = |k: usize| c.as_ptr().add(start(k) & !1).cast::<u32>().read_unaligned();
                    (dwords8(read), 1, _mm256_srli_epi32::<27>(odd))
                }
                Chroma::Planar(u, v) => {
                    let pair =
                        |p: &[u8], k: usize| u32::from(p.as_ptr().add(start(k) / 2).cast::<u16>().read_unaligned());
                    (dwords8(|k| pair(u, k) | pair(v, k) << 16), 2, _mm256_srli_epi32::<28>(odd))
                }
            };
            let q1 = _mm256_srlv_epi32(q, odd_shift);
            let v_byte = if v_byte == 1 { second_byte } else { mask(2) };
            let (u0, v0) = (words(q, first_byte), words(q, v_byte));
            let (u1, v1) = (words(q1, first_byte), words(q1, v_byte));
            let (t0, t1) = (terms(u0, v0), terms(u1, v1));
            let p16 =
                if PAD { _mm256_slli_epi32::<16>(_mm256_srai_epi32::<4>(_mm256_madd_epi16(pad, w))) } else { pad };
            for r in 0..ROWS {
                // The Y pair of each lane's pixels, less the offset (floored at 0), as [Y0, Y1, 0, 0].
                let l = _mm256_cvtepu16_epi32(_mm_subs_epu8(words8(y[r], start), offset));
                let l0 = _mm256_madd_epi16(words(l, first_byte), cy);
                let l1 = _mm256_madd_epi16(words(l, second_byte), cy);
                let ch = |c: usize| weigh(_mm256_add_epi32(l0, t0[c]), _mm256_add_epi32(l1, t1[c]), w);
                let (first, last) = if SWAP { (ch(2), ch(0)) } else { (ch(0), ch(2)) };
                // Slots 0, 1 and 2, 3 as the words of 32-bit lanes (every sum is in
                // 0..2^15: a shift and an or, no shuffle), then interleaved.
                let (fg, lp) = (
                    _mm256_or_si256(first, _mm256_slli_epi32::<16>(ch(1))),
                    if PAD { _mm256_or_si256(last, p16) } else { last },
                );
                let o = out[r].as_mut_ptr().add(4 * d);
                _mm256_storeu_si256(o.cast(), _mm256_unpacklo_epi32(fg, lp));
                _mm256_storeu_si256(o.add(16).cast(), _mm256_unpackhi_epi32(fg, lp));
            }
            d += 8;
        }
    }
    yuv_linear_from::<ROWS>(d, y, chroma, &taps.linear, out, yuv);
}
