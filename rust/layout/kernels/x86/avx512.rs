//! AVX-512 F/BW/DQ/VL, with or without VBMI byte permutes (and AVX512-BF16
//! where present): [`Simd`] and the other kernel traits for [`Avx512`], 16
//! pixels a step, and its kernels stamped. What it shares with AVX2 (the
//! fixed-point luma split, the masks) comes from avx2.rs and tables.rs.
//!
//! # Safety (all `unsafe fn` here)
//! As in avx2.rs: the caller checked the CPU has the level's features;
//! pointers are valid for the bytes each method says it reads or writes.

use std::arch::x86_64::*;

use super::super::resample::{pair_means, pair_sums, ColumnSum, Linear, Resample};
use super::super::vector::{bf16_high, Fast16, Job, Quads, Quantise, Simd, Words, BF16_NATIVE, F16};
use super::avx2::{arithmetic, fast16_arithmetic, rows_from, Avx2};
use super::tables::{
    chroma_422_mask, luma_422_mask, CHROMA_PLANE_WORDS, INTERLEAVE_BLEND, INTERLEAVE_PLACES, PAIR_WORDS,
    PIXELS_OF_CHANNEL_BYTES,
};

crate::layout::kernels::stamp_kernels!(Avx512<false>, ["avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c"]: conversion, quads, words, int8, fast);

/// The kernels with VBMI byte permutes.
pub(super) mod vbmi {
    use super::Avx512;
    crate::layout::kernels::stamp_kernels!(Avx512<true>, ["avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx2,fma,f16c"]: conversion, quads, int8, fast);
}

/// VBMI kernels with the AVX512-BF16 conversion instruction (`BF16_NATIVE`).
pub(super) mod vbmi_bf16 {
    use super::Avx512;
    crate::layout::kernels::stamp_kernels!(Avx512<true>, ["avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx512bf16,avx2,fma,f16c"]: conversion);
}

/// AVX-512 F/BW/DQ/VL: 16 pixels a step. Without VBMI, source bytes are
/// gathered by in-lane shuffles and widening; with it (`VBMI`), by one
/// whole-register byte permute per vector (`Plan::permutes`).
#[derive(Clone, Copy)]
pub(super) struct Avx512<const VBMI: bool>;

pub(super) struct Avx512Tables {
    /// `shuffle_epi8` mask, the same in every 16-byte lane (without VBMI).
    shuffle: __m512i,
    /// VBMI byte permutes (`Permutes`); for YUV rows, the chroma's
    /// `shuffle_epi8` masks (`tables::PAIR_WORDS`, `chroma_422_mask`).
    index: [__m512i; 4],
    /// The pad, where it goes in a 32-bit lane.
    pad: __m512i,
    /// The pad as 16 16-bit floats, and as the f32 whose bf16 it is.
    pad_16: __m256i,
    pad_f32: __m512,
    /// Word indices interleaving R, G, B and pad words (`store_rgbx16`).
    words: [__m512i; 2],
}

#[inline(always)]
unsafe fn all_lanes(mask: [u8; 16]) -> __m512i {
    _mm512_broadcast_i32x4(_mm_loadu_si128(mask.as_ptr().cast()))
}

#[inline(always)]
unsafe fn table(bytes: &[u8; 64]) -> __m512i {
    _mm512_loadu_si512(bytes.as_ptr().cast())
}

/// Word indices (as bytes) interleaving [R 0-15 | G 0-15] and [B 0-15 | pad]
/// into 8 pixels of R, G, B, pad: pixels 0-7, then 8-15.
const INTERLEAVE_WORDS: [[u8; 64]; 2] = {
    let mut index = [[0u8; 64]; 2];
    let mut w = 0;
    while w < 64 {
        let (half, p, k) = (w / 32, w % 32 / 4, w % 4);
        let word = if k == 3 { 48 } else { 16 * k + 8 * half + p } as u16;
        index[half][2 * (w % 32)] = word as u8;
        index[half][2 * (w % 32) + 1] = (word >> 8) as u8;
        w += 1;
    }
    index
};

/// The R, G, B bytes of 16 4-byte pixels.
const COLOUR_BYTES: u64 = 0x7777_7777_7777_7777;

impl<const VBMI: bool> Avx512<VBMI> {
    /// 16 pixels to 64 bytes, without VBMI: 4-byte pixels or channel runs in
    /// each 16-byte lane, as `shuffle` says.
    #[inline(always)]
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

    /// The four 16-byte lanes of `v` widened to 32-bit lanes.
    #[inline(always)]
    unsafe fn widen_lanes(v: __m512i) -> [__m512i; 4] {
        [
            _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32::<0>(v)),
            _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32::<1>(v)),
            _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32::<2>(v)),
            _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32::<3>(v)),
        ]
    }

    /// With VBMI: the 16 * C source bytes of 16 pixels (a masked load: never past them).
    #[inline(always)]
    unsafe fn window<const C: usize>(src: *const u8) -> __m512i {
        let mask: u64 = if C == 4 { u64::MAX } else { (1u64 << (16 * C)) - 1 };
        _mm512_maskz_loadu_epi8(mask, src.cast())
    }

    /// With VBMI: bytes of `window` picked by `index`, where index
    /// `Permutes::zero(C)` gives 0: one permute, no masking.
    #[inline(always)]
    unsafe fn gather<const C: usize>(window: __m512i, index: __m512i) -> __m512i {
        if C == 4 {
            _mm512_permutex2var_epi8(window, index, _mm512_setzero_si512())
        } else {
            _mm512_permutexvar_epi8(index, window)
        }
    }

    /// 16 f32 as 16-bit floats of `KIND` (not `BF16_NATIVE`).
    #[inline(always)]
    unsafe fn narrow16<const KIND: u8>(f: __m512) -> __m256i {
        match KIND {
            F16 => _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f),
            _ => _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(bf16_high::<Self, KIND>(f))),
        }
    }
}

impl<const VBMI: bool> Simd for Avx512<VBMI> {
    const LANES: usize = 16;
    type I = __m512i;
    type F = __m512;
    type Tables = Avx512Tables;

    #[inline(always)]
    unsafe fn tables<const C: usize>(job: Job<'_>) -> Avx512Tables {
        let zero = _mm512_setzero_si512();
        let mut t = Avx512Tables {
            shuffle: zero,
            index: [zero; 4],
            pad: zero,
            pad_16: _mm256_setzero_si256(),
            pad_f32: _mm512_setzero_ps(),
            words: [zero; 2],
        };
        match job {
            Job::Bytes(plan) => {
                if VBMI {
                    t.index[0] = table(&plan.permutes.packed_bytes);
                } else {
                    t.shuffle = all_lanes(plan.permutes.lane_pixels);
                }
                t.pad = _mm512_set1_epi32((plan.pad << 24) as i32);
            }
            Job::Planar(plan) | Job::Packed16(plan) => {
                if VBMI {
                    for (k, lanes) in plan.permutes.planar_lanes.iter().enumerate() {
                        t.index[k] = table(lanes);
                    }
                } else {
                    t.shuffle = all_lanes(plan.permutes.lane_channels);
                }
                if let Job::Packed16(_) = job {
                    t.words = [table(&INTERLEAVE_WORDS[0]), table(&INTERLEAVE_WORDS[1])];
                    t.pad_16 = _mm256_set1_epi16(plan.pad as i16);
                    t.pad_f32 = _mm512_set1_ps(f32::from_bits(plan.pad << 16));
                }
            }
            Job::Quads(plan) => {
                if VBMI {
                    for (k, lanes) in plan.permutes.packed_lanes.iter().enumerate() {
                        t.index[k] = table(lanes);
                    }
                } else {
                    t.shuffle = all_lanes(plan.permutes.lane_pixels);
                }
            }
            Job::Yuv422 { pad, swapped, y_first } => {
                t.index[0] = all_lanes(chroma_422_mask(y_first, swapped, false));
                t.index[1] = all_lanes(chroma_422_mask(y_first, swapped, true));
                t.pad = _mm512_set1_epi16(i16::from(pad));
            }
            Job::Nv12 { swapped, pad } => {
                // U then V (or V then U, `swapped`).
                t.index[0] = table(&PAIR_WORDS[usize::from(swapped)]);
                t.index[1] = table(&PAIR_WORDS[usize::from(!swapped)]);
                t.pad = _mm512_set1_epi16(i16::from(pad));
            }
        }
        t
    }

    arithmetic!(
        __m512,
        __m512i,
        _mm512_set1_ps,
        _mm512_set1_epi32,
        _mm512_cvtepi32_ps,
        _mm512_sub_ps,
        _mm512_mul_ps,
        _mm512_div_ps,
        _mm512_fmadd_ps,
        _mm512_fnmadd_ps,
        _mm512_castps_si512,
        _mm512_add_epi32,
        _mm512_and_si512,
        _mm512_mullo_epi32,
        _mm512_srli_epi32
    );

    #[inline(always)]
    unsafe fn rgbx_u8<const C: usize>(t: &Avx512Tables, src: *const u8, dst: *mut u8) {
        let v = if VBMI {
            _mm512_mask_permutexvar_epi8(t.pad, COLOUR_BYTES, t.index[0], Self::window::<C>(src))
        } else {
            _mm512_or_si512(Self::load16::<C>(src, t.shuffle), t.pad)
        };
        _mm512_storeu_si512(dst.cast(), v);
    }

    #[inline(always)]
    unsafe fn channels<const C: usize, const PACKED: bool>(t: &Avx512Tables, src: *const u8) -> [__m512i; 3] {
        if VBMI {
            let w = Self::window::<C>(src);
            return [
                Self::gather::<C>(w, t.index[0]),
                Self::gather::<C>(w, t.index[1]),
                Self::gather::<C>(w, t.index[2]),
            ];
        }
        // Lane k of the result: channel k of all 16 pixels.
        let gather = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        let [r, g, b, _] = Self::widen_lanes(_mm512_permutexvar_epi32(gather, Self::load16::<C>(src, t.shuffle)));
        [r, g, b]
    }

    #[inline(always)]
    unsafe fn store_f32(out: *mut u8, f: __m512) {
        _mm512_storeu_ps(out.cast(), f)
    }
    #[inline(always)]
    unsafe fn store_f16(out: *mut u8, f: __m512) {
        _mm256_storeu_si256(out.cast(), _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f))
    }

    /// R and G, B and pad as two vectors of 32 words, interleaved by two
    /// word permutes. `BF16_NATIVE` converts them with the AVX512-BF16
    /// instruction (the kernel's features must include it), which rounds to
    /// nearest even but flushes subnormals: a plan uses it only where it
    /// reproduces the reference.
    #[inline(always)]
    unsafe fn store_rgbx16<const KIND: u8>(t: &Avx512Tables, out: *mut u8, rgb: [__m512; 3]) {
        let [r, g, b] = rgb;
        let (rg, bp): (__m512i, __m512i) = if KIND == BF16_NATIVE {
            // 32 bf16 to 32 words: both are 64 bytes of plain bits.
            let words = |v: __m512bh| std::mem::transmute::<__m512bh, __m512i>(v);
            (words(_mm512_cvtne2ps_pbh(g, r)), words(_mm512_cvtne2ps_pbh(t.pad_f32, b)))
        } else {
            let [r, g, b] = [Self::narrow16::<KIND>(r), Self::narrow16::<KIND>(g), Self::narrow16::<KIND>(b)];
            (
                _mm512_inserti64x4::<1>(_mm512_castsi256_si512(r), g),
                _mm512_inserti64x4::<1>(_mm512_castsi256_si512(b), t.pad_16),
            )
        };
        for (h, idx) in t.words.iter().enumerate() {
            _mm512_storeu_si512(out.add(64 * h).cast(), _mm512_permutex2var_epi16(rg, *idx, bp));
        }
    }

    #[inline(always)]
    unsafe fn luma_pairs(y: *const u8, offset: u8) -> [__m512i; 2] {
        let even_odd = _mm256_setr_epi8(
            0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
        );
        let l = _mm256_shuffle_epi8(
            _mm256_subs_epu8(_mm256_loadu_si256(y.cast()), _mm256_set1_epi8(offset as i8)),
            even_odd,
        );
        // Per lane even then odd; then even 0-15, odd 0-15.
        let l = _mm256_permute4x64_epi64::<0b11_01_10_00>(l);
        [_mm512_cvtepu8_epi32(_mm256_castsi256_si128(l)), _mm512_cvtepu8_epi32(_mm256_extracti128_si256::<1>(l))]
    }
    /// As AVX2's (`vpmaddwd` on `256 (Y - 128)` and `Y`): lanes 0, 1 hold
    /// luma bytes 0-15 and lanes 2, 3 bytes 16-31, so lane j's shuffle
    /// reaches pixels 8j to 8j + 7 (pairs 4j to 4j + 3, as `chroma`'s lane j).
    #[inline(always)]
    unsafe fn luma_products(y: *const u8, offset: u8, factor: __m512i) -> [__m512i; 2] {
        let l = _mm512_castsi256_si512(_mm256_subs_epu8(_mm256_loadu_si256(y.cast()), _mm256_set1_epi8(offset as i8)));
        let l = _mm512_shuffle_i64x2::<0b01_01_00_00>(l, l);
        let z = -128;
        #[rustfmt::skip]
        let even = _mm512_set_epi8(
            z, 14, 14, z, z, 12, 12, z, z, 10, 10, z, z, 8, 8, z,
            z, 6, 6, z, z, 4, 4, z, z, 2, 2, z, z, 0, 0, z,
            z, 14, 14, z, z, 12, 12, z, z, 10, 10, z, z, 8, 8, z,
            z, 6, 6, z, z, 4, 4, z, z, 2, 2, z, z, 0, 0, z,
        );
        let odd = _mm512_add_epi8(even, _mm512_set1_epi32(0x0001_0100));
        let signed = _mm512_set1_epi32(0x8000);
        let product = |mask: __m512i| _mm512_madd_epi16(_mm512_xor_si512(_mm512_shuffle_epi8(l, mask), signed), factor);
        [product(even), product(odd)]
    }
    fn luma_factor(cy: i32) -> i32 {
        <Avx2>::luma_factor(cy)
    }
    fn luma_bias(cy: i32) -> i32 {
        <Avx2>::luma_bias(cy)
    }
    /// As AVX2's (`vpmaddwd` on `256 (c - 128)` and `c`).
    #[inline(always)]
    unsafe fn add_chroma(acc: __m512i, x: __m512i, factor: __m512i) -> __m512i {
        _mm512_add_epi32(acc, _mm512_madd_epi16(x, factor))
    }
    fn chroma_factor(c: i32) -> i32 {
        <Avx2>::chroma_factor(c)
    }
    fn chroma_bias(c: i32) -> i32 {
        <Avx2>::chroma_bias(c)
    }
    #[inline(always)]
    unsafe fn chroma_planes(a: *const u8, b: *const u8) -> [__m512i; 2] {
        let mask = table(&CHROMA_PLANE_WORDS);
        let words = |p: *const u8| {
            let bytes = _mm512_broadcast_i32x4(_mm_loadu_si128(p.cast()));
            _mm512_xor_si512(_mm512_shuffle_epi8(bytes, mask), _mm512_set1_epi32(0x8000))
        };
        [words(a), words(b)]
    }
    /// Lanes 0, 1 hold chroma bytes 0-15 and lanes 2, 3 bytes 16-31, so
    /// lane j's shuffle reaches pairs 4j to 4j + 3.
    #[inline(always)]
    unsafe fn chroma(t: &Avx512Tables, uv: *const u8) -> [__m512i; 2] {
        let pairs = _mm512_castsi256_si512(_mm256_loadu_si256(uv.cast()));
        let pairs = _mm512_shuffle_i64x2::<0b01_01_00_00>(pairs, pairs);
        let words = |mask: __m512i| _mm512_xor_si512(_mm512_shuffle_epi8(pairs, mask), _mm512_set1_epi32(0x8000));
        [words(t.index[0]), words(t.index[1])]
    }
    /// As AVX2's: 64 bytes are 16 pixel pairs, 4 to a lane.
    #[inline(always)]
    unsafe fn luma_products_422<const Y_FIRST: bool>(row: *const u8, offset: u8, factor: __m512i) -> [__m512i; 2] {
        let q = _mm512_loadu_si512(row.cast());
        let offset = _mm512_set1_epi32(i32::from(offset) * 0x0001_0100);
        let signed = _mm512_set1_epi32(0x8000);
        let product = |mask: [u8; 16]| {
            let words = _mm512_xor_si512(_mm512_subs_epu8(_mm512_shuffle_epi8(q, all_lanes(mask)), offset), signed);
            _mm512_madd_epi16(words, factor)
        };
        [product(const { luma_422_mask(Y_FIRST, false) }), product(const { luma_422_mask(Y_FIRST, true) })]
    }
    #[inline(always)]
    unsafe fn chroma_422(t: &Avx512Tables, row: *const u8) -> [__m512i; 2] {
        let q = _mm512_loadu_si512(row.cast());
        let words = |mask: __m512i| _mm512_xor_si512(_mm512_shuffle_epi8(q, mask), _mm512_set1_epi32(0x8000));
        [words(t.index[0]), words(t.index[1])]
    }
    const RGB_ORDER: bool = true;
    fn nv12_positions(pos: [usize; 3]) -> bool {
        pos == [0, 1, 2] || pos == [2, 1, 0]
    }
    /// As AVX2's (`pixels_of_sums`), then the lanes (pixels 0-3, 8-11, ...
    /// and 4-7, 12-15, ...) put in order; with VBMI, the pixels straight
    /// from the channel bytes (`pixels_of_bytes`).
    #[inline(always)]
    unsafe fn store_rgbx_sums(t: &Avx512Tables, out: *mut u8, even: [__m512i; 3], odd: [__m512i; 3]) {
        if VBMI {
            let [first, second] = Self::pixels_of_bytes(t, even, odd, 0);
            _mm512_storeu_si512(out.cast(), first);
            _mm512_storeu_si512(out.add(64).cast(), second);
            return;
        }
        let [lo, hi] = Self::pixels_of_sums(t, even, odd);
        let first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
        let second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
        _mm512_storeu_si512(out.cast(), _mm512_permutex2var_epi64(lo, first, hi));
        _mm512_storeu_si512(out.add(64).cast(), _mm512_permutex2var_epi64(lo, second, hi));
    }
    /// As `store_rgbx_sums` up to its lanes' order, then each lane's pads
    /// dropped (3 pixels' dwords of 4) and the 24 dwords of 32 pixels taken
    /// in order from both by two dword permutes: 64 + 32 bytes; with VBMI,
    /// the 96 bytes straight from the channel bytes.
    #[inline(always)]
    unsafe fn store_rgb_sums(t: &Avx512Tables, out: *mut u8, even: [__m512i; 3], odd: [__m512i; 3]) {
        if VBMI {
            let [head, tail] = Self::pixels_of_bytes(t, even, odd, 2);
            _mm512_storeu_si512(out.cast(), head);
            _mm256_storeu_si256(out.add(64).cast(), _mm512_castsi512_si256(tail));
            return;
        }
        // Pixels 4q to 4q + 3 are lane q / 2 of `lo` (q even) or of `hi` (dwords 16-31), its first 3 dwords.
        const DWORDS: [[i32; 16]; 2] = {
            let mut d = [[0i32; 16]; 2];
            let mut i = 0;
            while i < 24 {
                let q = i / 3;
                d[i / 16][i % 16] = (16 * (q % 2) + 4 * (q / 2) + i % 3) as i32;
                i += 1;
            }
            d
        };
        let [lo, hi] = Self::pixels_of_sums(t, even, odd);
        let drop_pad =
            _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -128, -128, -128, -128));
        let (lo, hi) = (_mm512_shuffle_epi8(lo, drop_pad), _mm512_shuffle_epi8(hi, drop_pad));
        let index = |k: usize| _mm512_loadu_si512(DWORDS[k].as_ptr().cast());
        _mm512_storeu_si512(out.cast(), _mm512_permutex2var_epi32(lo, index(0), hi));
        _mm256_storeu_si256(out.add(64).cast(), _mm512_castsi512_si256(_mm512_permutex2var_epi32(lo, index(1), hi)));
    }
}

impl<const VBMI: bool> Avx512<VBMI> {
    /// As `Avx2::pixels_of_sums`, in four lanes: `[pixels 0-3 | 8-11 | 16-19 |
    /// 24-27]` and `[4-7 | 12-15 | 20-23 | 28-31]`.
    #[inline(always)]
    unsafe fn pixels_of_sums(t: &Avx512Tables, even: [__m512i; 3], odd: [__m512i; 3]) -> [__m512i; 2] {
        let [rb, gp] = Self::channel_bytes(t, even, odd);
        let (rg, bp) = (_mm512_unpacklo_epi8(rb, gp), _mm512_unpackhi_epi8(rb, gp));
        [_mm512_unpacklo_epi16(rg, bp), _mm512_unpackhi_epi16(rg, bp)]
    }
    /// As `Avx2::channel_bytes`, in four lanes: `[R 0-7, B 0-7 | R 8-15, B
    /// 8-15 | ...]` and `[G 0-7, pad | ...]`.
    #[inline(always)]
    unsafe fn channel_bytes(t: &Avx512Tables, even: [__m512i; 3], odd: [__m512i; 3]) -> [__m512i; 2] {
        let words = |e: __m512i, o: __m512i| {
            _mm512_srai_epi16::<4>(_mm512_mask_blend_epi16(0xAAAA_AAAA, _mm512_srli_epi32::<16>(e), o))
        };
        let [r, g, b] = [words(even[0], odd[0]), words(even[1], odd[1]), words(even[2], odd[2])];
        [_mm512_packus_epi16(r, b), _mm512_packus_epi16(g, t.pad)]
    }
    /// VBMI: pixels (`tables::PIXELS_OF_CHANNEL_BYTES` `[first]` and
    /// `[first + 1]`) straight from the channel bytes, one `vpermt2b` each.
    #[inline(always)]
    unsafe fn pixels_of_bytes(t: &Avx512Tables, even: [__m512i; 3], odd: [__m512i; 3], first: usize) -> [__m512i; 2] {
        let [rb, gp] = Self::channel_bytes(t, even, odd);
        let idx = |k: usize| table(&PIXELS_OF_CHANNEL_BYTES[k]);
        [_mm512_permutex2var_epi8(rb, idx(first), gp), _mm512_permutex2var_epi8(rb, idx(first + 1), gp)]
    }
}

impl<const VBMI: bool> Quads for Avx512<VBMI> {
    #[inline(always)]
    unsafe fn quads<const C: usize>(t: &Avx512Tables, src: *const u8) -> [__m512i; 4] {
        if VBMI {
            let w = Self::window::<C>(src);
            let [i0, i1, i2, i3] = t.index;
            [Self::gather::<C>(w, i0), Self::gather::<C>(w, i1), Self::gather::<C>(w, i2), Self::gather::<C>(w, i3)]
        } else {
            Self::widen_lanes(Self::load16::<C>(src, t.shuffle))
        }
    }

    #[inline(always)]
    unsafe fn four_times(values: [f32; 4]) -> __m512 {
        _mm512_broadcast_f32x4(_mm_loadu_ps(values.as_ptr()))
    }

    #[inline(always)]
    unsafe fn store_quads16<const KIND: u8>(out: *mut u8, q: [__m512; 4]) {
        if KIND == F16 {
            for (j, f) in q.into_iter().enumerate() {
                _mm256_storeu_si256(out.add(32 * j).cast(), _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f));
            }
            return;
        }
        let high = |f: __m512| _mm512_srli_epi32::<16>(bf16_high::<Self, KIND>(f));
        let r = [high(q[0]), high(q[1]), high(q[2]), high(q[3])];
        // packus pairs lane L of both: pixels L and 4 + L; the permute restores order.
        let order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
        for h in 0..2 {
            let packed = _mm512_packus_epi32(r[2 * h], r[2 * h + 1]);
            _mm512_storeu_si512(out.add(64 * h).cast(), _mm512_permutexvar_epi64(order, packed));
        }
    }
}

impl<const VBMI: bool> Words for Avx512<VBMI> {
    #[inline(always)]
    unsafe fn words10<const LOW: bool>(p: *const u8) -> [__m512i; 2] {
        let x = _mm512_loadu_si512(p.cast());
        if LOW {
            let ten = _mm512_set1_epi32(0x3FF);
            [_mm512_and_si512(x, ten), _mm512_and_si512(_mm512_srli_epi32::<16>(x), ten)]
        } else {
            [_mm512_srli_epi32::<22>(_mm512_slli_epi32::<16>(x)), _mm512_srli_epi32::<22>(x)]
        }
    }
}

impl<const VBMI: bool> Quantise for Avx512<VBMI> {
    #[inline(always)]
    unsafe fn round_even(f: __m512) -> __m512i {
        let f = _mm512_min_ps(_mm512_max_ps(f, _mm512_set1_ps(-32768.0)), _mm512_set1_ps(32767.0));
        _mm512_cvtps_epi32(f)
    }
    /// As AVX2's, four lanes of 4 pixels.
    #[inline(always)]
    unsafe fn store_i8<const BYTES: usize>(out: *mut u8, rgb: [__m512i; 3], pad: __m512i) {
        let bytes = _mm512_packs_epi16(_mm512_packs_epi32(rgb[0], rgb[1]), _mm512_packs_epi32(rgb[2], pad));
        if BYTES == 4 {
            let m = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
            _mm512_storeu_si512(out.cast(), _mm512_shuffle_epi8(bytes, m));
        } else {
            let m = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, -128, -128, -128, -128));
            let gather = _mm512_setr_epi32(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 15, 15, 15, 15);
            let packed = _mm512_permutexvar_epi32(gather, _mm512_shuffle_epi8(bytes, m));
            _mm256_storeu_si256(out.cast(), _mm512_castsi512_si256(packed));
            _mm_storeu_si128(out.add(32).cast(), _mm512_extracti32x4_epi32::<2>(packed));
        }
    }
}

/// AVX-512 without VBMI resizes with AVX2's row loops (`Resample for Avx2`: its bilinear x pass and integer shrinks).
type RowLoops = Avx2;

/// The resize row loops of AVX-512 without VBMI, compiled with AVX-512's features (as they always were: no F16C).
pub(crate) mod resample {
    crate::layout::kernels::stamp_kernels!(super::RowLoops, ["avx512f,avx512bw,avx512dq,avx512vl,avx2,fma"]: resample);
}

/// The resize row loops with VBMI: AVX2's, but for a bilinear x pass of
/// 3- and 4-byte pixels eight destination pixels a step (`permuted_steps`).
pub(super) struct VbmiRows;

impl Resample for VbmiRows {
    #[inline(always)]
    fn horizontal_linear<const C: usize>(src: &[u8], taps: &Linear, out: &mut [i16], ahead: &[u8]) {
        let mut out = [out];
        let (d, fetched) = if C > 1 { permuted_steps::<C, 1>([src], taps, &mut out, [ahead]) } else { (0, 0) };
        rows_from::<C, 1>(d, fetched, [src], taps, out, [ahead])
    }

    #[inline(always)]
    fn horizontal_linear2<const C: usize>(src: [&[u8]; 2], taps: &Linear, out: [&mut [i16]; 2], ahead: [&[u8]; 2]) {
        let mut out = out;
        let (d, fetched) = if C > 1 { permuted_steps::<C, 2>(src, taps, &mut out, ahead) } else { (0, 0) };
        rows_from::<C, 2>(d, fetched, src, taps, out, ahead)
    }

    #[inline(always)]
    fn blocks<const C: usize, S: ColumnSum>(acc: &[S], kx: usize, area: u32, out: &mut [u8]) {
        <Avx2 as Resample>::blocks::<C, S>(acc, kx, area, out)
    }

    /// 3-byte pixels: the portable loop, which LLVM vectorises with VBMI's
    /// byte permutes into a faster loop than AVX2's 12-byte windows.
    #[inline(always)]
    fn pair_sums<const C: usize>(row: &[u8], sums: &mut [u16]) {
        if C == 3 {
            pair_sums::<C>(row, sums)
        } else {
            <Avx2 as Resample>::pair_sums::<C>(row, sums)
        }
    }

    #[inline(always)]
    fn pair_means<const C: usize>(row: &[u8], sums: &[u16], out: &mut [u8]) {
        if C == 3 {
            pair_means::<C>(row, sums, out)
        } else {
            <Avx2 as Resample>::pair_means::<C>(row, sums, out)
        }
    }
}

/// The resize row loops of AVX-512 with VBMI.
pub(crate) mod resample_vbmi {
    crate::layout::kernels::stamp_kernels!(super::VbmiRows, ["avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx2,fma"]: resample);
}

/// Byte j of `permuted_steps`' index vectors, one a half step: the byte, in
/// the taps' 32-bit values, of the source pixel of 32-bit lane j / 4
/// (pixel 2 (j / 16) of the step in the first half, 2 (j / 16) + 1 in the
/// second; 8 bytes a pixel, its two indices).
const STEP_PICKS: [[u8; 64]; 2] = {
    let mut picks = [[0u8; 64]; 2];
    let mut j = 0;
    while j < 64 {
        picks[0][j] = (16 * (j / 16)) as u8;
        picks[1][j] = (16 * (j / 16) + 8) as u8;
        j += 1;
    }
    picks
};

/// Added to the picked pixel offsets for `C`-byte pixels: 32-bit lane k's
/// two 16-bit values read channel k % 4 of the pixel and of the next (`C`
/// bytes on; a 3-byte pixel's fourth channel is a byte of the next pixel,
/// weighed and dropped).
const fn step_channels(c: usize) -> [u8; 64] {
    let mut channels = [0u8; 64];
    let mut j = 0;
    while j < 64 {
        let k = ((j / 4) % 4) as u8;
        channels[j] = match j % 4 {
            0 => k,
            2 => c as u8 + k,
            _ => 0,
        };
        j += 1;
    }
    channels
}

/// A step's 32 sums of 3-byte pixels (4 a pixel, in order) without each
/// pixel's fourth: 16-bit value j of the result is value 4 (j / 3) + j % 3.
const STEP_THREE: [u16; 32] = {
    let mut keep = [0u16; 32];
    let mut j = 0;
    while j < 24 {
        keep[j] = (4 * (j / 3) + j % 3) as u16;
        j += 1;
    }
    keep
};

/// The bilinear x pass of 3- and 4-byte pixels
/// (`resample::horizontal_linear::<C>`, exactly), eight destination pixels
/// a step while their source pixels lie within 128 bytes: two loads, and
/// for each half of the step (pixels 0, 2, 4, 6 and 1, 3, 5, 7) one
/// two-register byte permute that puts each channel's two source bytes side
/// by side as 16-bit values, one `pmaddwd` by the (w0, w1) pairs, a shift;
/// one pack puts the halves back in order (3-byte pixels: a word permute
/// drops each pixel's fourth sum, a masked store writes 24). The permute's
/// indices are made from the step's taps once for all `R` rows. (AVX2's
/// loops take four pixels a step from 16- or 32-byte windows, or two from a
/// load each.) Returns where it stopped (the destination pixel, the bytes of
/// `ahead` prefetched): from a step whose source spans more than 128 bytes
/// (a shrink by more than 30 / 7 for 4-byte pixels), or the row's end,
/// AVX2's loop goes on.
#[inline(always)]
fn permuted_steps<const C: usize, const R: usize>(
    src: [&[u8]; R],
    taps: &Linear,
    out: &mut [&mut [i16]; R],
    ahead: [&[u8]; R],
) -> (usize, usize) {
    let n = taps.index.len();
    let shortest = src.iter().map(|s| s.len()).min().unwrap_or(0);
    let (mut d, mut fetched) = (0, 0);
    assert!((C == 3 || C == 4) && out.iter().all(|o| o.len() >= n * C) && taps.weight.len() == n);
    // SAFETY: the callers are compiled with AVX-512 F/BW/VBMI. A step at d
    // reads the taps d..d + 8 <= n (64 bytes of indices, 32 of weights) and,
    // from each row, the 128 bytes at `base`, the first index times C, which
    // lie inside every row (checked). The permutes pick bytes of those two
    // registers only: each byte a permute names is at most C + 3 past its
    // pixel's first, and the last pixel's first at most 120 bytes past
    // `base` (checked; indices never decrease), so the ones the sums need. It
    // writes the 8 C values C d.. of each `out` (C n long at least).
    // Prefetches name bytes of `ahead` (and could not fault if they did not).
    unsafe {
        let load = |bytes: &[u8; 64]| _mm512_loadu_si512(bytes.as_ptr().cast());
        let (first, second) = (load(&STEP_PICKS[0]), load(&STEP_PICKS[1]));
        let channel = load(&const { step_channels(C) });
        let three = _mm512_loadu_si512(STEP_THREE.as_ptr().cast());
        let even = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
        let odd = _mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7);
        const LOW_BYTES: __mmask64 = 0x5555_5555_5555_5555;
        const THREE_BYTE_SUMS: __mmask32 = 0x00FF_FFFF;
        while d + 8 <= n {
            let base = taps.index[d][0] as usize * C;
            if taps.index[d + 7][0] as usize * C + 8 > base + 128 || base + 128 > shortest {
                break;
            }
            for a in &ahead {
                for line in [fetched, fetched + 64] {
                    if line < a.len() {
                        _mm_prefetch::<_MM_HINT_T0>(a.as_ptr().add(line).cast());
                    }
                }
            }
            fetched += 128;
            // Each pixel's first index, times C, less the window's start: its byte in the window.
            let index = _mm512_loadu_si512(taps.index.as_ptr().add(d).cast());
            let times = if C == 4 {
                _mm512_slli_epi32::<2>(index)
            } else {
                _mm512_add_epi32(_mm512_slli_epi32::<1>(index), index)
            };
            let offsets = _mm512_sub_epi32(times, _mm512_set1_epi32(base as i32));
            let picks = [first, second].map(|half| _mm512_add_epi8(_mm512_permutexvar_epi8(half, offsets), channel));
            let pairs = _mm512_castsi256_si512(_mm256_loadu_si256(taps.weight.as_ptr().add(d).cast()));
            let weights = [even, odd].map(|lanes| _mm512_permutexvar_epi32(lanes, pairs));
            for r in 0..R {
                let window = src[r].as_ptr().add(base);
                let (low, high) = (_mm512_loadu_si512(window.cast()), _mm512_loadu_si512(window.add(64).cast()));
                let sums = [0, 1].map(|h| {
                    let values = _mm512_maskz_permutex2var_epi8(LOW_BYTES, low, picks[h], high);
                    _mm512_srai_epi32::<4>(_mm512_madd_epi16(values, weights[h]))
                });
                // Per 128-bit lane k: pixel 2 k's 4 sums, then pixel 2 k + 1's.
                let packed = _mm512_packs_epi32(sums[0], sums[1]);
                let o = out[r].as_mut_ptr().add(C * d);
                if C == 4 {
                    _mm512_storeu_si512(o.cast(), packed);
                } else {
                    _mm512_mask_storeu_epi16(o, THREE_BYTE_SUMS, _mm512_permutexvar_epi16(three, packed));
                }
            }
            d += 8;
        }
    }
    (d, fetched)
}

// The fast rounding's 16-bit lanes (`vector::nv12_pair_fast`): 64 pixels a
// step, the AVX2 operations at twice the width (serving both AVX-512 levels).
impl<const VBMI: bool> Fast16 for Avx512<VBMI> {
    type V = __m512i;
    const WORDS: usize = 32;
    #[inline(always)]
    unsafe fn load(p: *const u8) -> __m512i {
        // SAFETY: the kernel's loop guard bounds the 64 bytes read.
        unsafe { _mm512_loadu_si512(p.cast()) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut u8, v: __m512i) {
        // SAFETY: the kernel's loop guard bounds the 64 bytes written.
        unsafe { _mm512_storeu_si512(p.cast(), v) }
    }
    fast16_arithmetic!(__m512i:
        xor(a, b) = _mm512_xor_si512;
        and(a, b) = _mm512_and_si512;
        shl8(a) = _mm512_slli_epi16::<8>;
        subs_u8(a, b) = _mm512_subs_epu8;
        unpack_lo8(a, b) = _mm512_unpacklo_epi8;
        unpack_hi8(a, b) = _mm512_unpackhi_epi8;
        unpack_lo16(a, b) = _mm512_unpacklo_epi16;
        unpack_hi16(a, b) = _mm512_unpackhi_epi16;
        mulhrs(a, b) = _mm512_mulhrs_epi16;
        add16(a, b) = _mm512_add_epi16;
        adds16(a, b) = _mm512_adds_epi16;
        sra6(a) = _mm512_srai_epi16::<6>;
        packus(a, b) = _mm512_packus_epi16;
    );
    #[inline(always)]
    unsafe fn splat8(x: i8) -> __m512i {
        _mm512_set1_epi8(x)
    }
    #[inline(always)]
    unsafe fn splat16(x: i16) -> __m512i {
        _mm512_set1_epi16(x)
    }
    #[inline(always)]
    unsafe fn group_index() -> __m512i {
        _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15)
    }
    #[inline(always)]
    unsafe fn groups(a: __m512i, index: __m512i) -> __m512i {
        _mm512_permutexvar_epi32(index, a)
    }
    /// The 32 bytes widened to words in order, shifted into the high bytes.
    #[inline(always)]
    unsafe fn plane_words<const GROUPS: bool>(p: *const u8, index: __m512i) -> __m512i {
        // SAFETY: the kernel's loop guard bounds the 32 bytes read.
        let bytes = unsafe { _mm256_loadu_si256(p.cast()) };
        let words = _mm512_xor_si512(_mm512_slli_epi16::<8>(_mm512_cvtepu8_epi16(bytes)), _mm512_set1_epi16(i16::MIN));
        if GROUPS {
            // SAFETY: AVX-512 as above.
            unsafe { Self::groups(words, index) }
        } else {
            words
        }
    }
    /// With VBMI, each 64 output bytes by one two-source byte permute (`vpermt2b`)
    /// of B and of R and G's 32 pixels around them (one 128-bit block shuffle);
    /// without, OpenCV's interleave in each lane and the lanes' chunks put in order.
    #[inline(always)]
    unsafe fn store3(p: *mut u8, h: [(__m512i, __m512i); 3]) {
        let (c0, c1, c2) = (
            _mm512_packus_epi16(h[0].0, h[0].1),
            _mm512_packus_epi16(h[1].0, h[1].1),
            _mm512_packus_epi16(h[2].0, h[2].1),
        );
        // Output byte t of vector j: pixel (64 j + t) / 3, channel (64 j + t) % 3; R and G from
        // `[c0, c1]` blocks j, j + 1 (pixels 16 j to 16 j + 31), B from the second source.
        const fn index(j: usize) -> [u8; 64] {
            let mut m = [0u8; 64];
            let mut t = 0;
            while t < 64 {
                let (p, c) = ((64 * j + t) / 3, (64 * j + t) % 3);
                m[t] = if c == 2 { 64 + p } else { 32 * c + p - 16 * j } as u8;
                t += 1;
            }
            m
        }
        const INDEX: [[u8; 64]; 3] = [index(0), index(1), index(2)];
        if VBMI {
            // SAFETY: VBMI kernels are stamped with avx512vbmi; the kernel's loop guard bounds the 192 bytes written.
            unsafe {
                let rg = [
                    _mm512_shuffle_i64x2::<0x44>(c0, c1),
                    _mm512_shuffle_i64x2::<0x99>(c0, c1),
                    _mm512_shuffle_i64x2::<0xEE>(c0, c1),
                ];
                for (j, rg) in rg.into_iter().enumerate() {
                    let index = _mm512_loadu_si512(INDEX[j].as_ptr().cast());
                    _mm512_storeu_si512(p.add(64 * j).cast(), _mm512_permutex2var_epi8(rg, index, c2));
                }
            }
            return;
        }
        // Without VBMI, OpenCV's interleave in each of the four lanes (`tables::INTERLEAVE_PLACES`), blending
        // by mask registers (`vpblendmb`); then the lanes' chunks in order, by qword permutes (`OUT`) of Kk
        // (chunk k of lanes 0-3), T = [K1 0, K1 1, K2 0, K2 1] and V = [K0 2, K0 3, K1 2, K1 3].
        const fn lanes(l: [u64; 4]) -> [u64; 8] {
            [2 * l[0], 2 * l[0] + 1, 2 * l[1], 2 * l[1] + 1, 2 * l[2], 2 * l[2] + 1, 2 * l[3], 2 * l[3] + 1]
        }
        // Output vector i's lanes: the first source's 0-3, the second's 4-7.
        const OUT: [[u64; 8]; 3] = [lanes([0, 4, 6, 1]), lanes([1, 3, 4, 6]), lanes([6, 1, 3, 7])];
        // SAFETY: the permutes' table is 64 bytes; the kernel's loop guard bounds the 192 bytes written.
        unsafe {
            let placed = |c: _, i: usize| _mm512_shuffle_epi8(c, all_lanes(INTERLEAVE_PLACES[i]));
            let s = [placed(c0, 0), placed(c1, 1), placed(c2, 2)];
            let chunk = |k: usize| {
                let [second, third] = INTERLEAVE_BLEND;
                _mm512_mask_blend_epi8(third, _mm512_mask_blend_epi8(second, s[k], s[(k + 1) % 3]), s[(k + 2) % 3])
            };
            let k = [chunk(0), chunk(1), chunk(2)];
            let t = _mm512_shuffle_i64x2::<0x44>(k[1], k[2]);
            let v = _mm512_shuffle_i64x2::<0xEE>(k[0], k[1]);
            let out = |i: usize| _mm512_loadu_si512(OUT[i].as_ptr().cast());
            _mm512_storeu_si512(p.cast(), _mm512_permutex2var_epi64(k[0], out(0), t));
            _mm512_storeu_si512(p.add(64).cast(), _mm512_permutex2var_epi64(t, out(1), v));
            _mm512_storeu_si512(p.add(128).cast(), _mm512_permutex2var_epi64(v, out(2), k[2]));
        }
    }
}
