//! The SIMD kernels, each written once over [`Simd`]: a small vector
//! abstraction that the x86 home (x86/avx2.rs, x86/avx512.rs) implements for
//! AVX2 and AVX-512 (with and without VBMI) and neon.rs for NEON. What really differs per instruction set stays
//! there, explicit and small: how a step of source pixels is gathered into
//! 32-bit lanes, how 16-bit floats are interleaved and stored, how NV12's
//! bytes are packed. The loops, the normalisation, the bf16 rounding and the
//! tails are here.
//!
//! A kernel here is `#[inline(always)]` and generic; `stamp_kernels!` (stamp.rs)
//! instantiates it per instruction set inside a `#[target_feature]` function, so the
//! trait's methods (also `#[inline(always)]`) and the intrinsics they call
//! are compiled into one loop with that instruction set's features.
//!
//! # Safety (all `unsafe fn` here and in the `Simd` implementations)
//! The caller must have checked that the CPU supports the instruction set of
//! `S` (`SimdLevel::is_supported`); the plan only holds kernels of such a
//! level. Loop guards bound every load by the source slice (`Simd::src_bytes`)
//! and every store by the destination slice, whatever lengths the caller
//! passes; the tail of a row goes to the scalar kernels.

use super::super::colour::{Coefficients, HALF};
use super::super::plan::{Chroma, Plan, YuvOut};
use super::scalar;

/// 16-bit float kinds of the packed kernels. BF16 rounds to nearest even;
/// BF16_FAST rounds ties away from zero (fewer instructions), so a plan takes
/// it only where no value of the 256 lands on a tie (BF16_NATIVE only where
/// flushing subnormals changes nothing); F16 is IEEE half, rounded to nearest
/// even.
pub(crate) const BF16: u8 = 0;
pub(crate) const F16: u8 = 1;
pub(crate) const BF16_FAST: u8 = 2;
/// bf16 by the AVX512-BF16 instruction: to nearest even, subnormals flushed.
#[cfg(target_arch = "x86_64")]
pub(crate) const BF16_NATIVE: u8 = 3;

/// How a kernel computes `(x - mean) / scale`; a plan takes the first, in
/// this order, that reproduces the reference for its parameters.
/// `x * (1 / scale) + (-mean / scale)`: one fused multiply-add.
pub(crate) const FMA: u8 = 0;
/// The quotient from the reciprocal, corrected once by its exact remainder
/// (`r = t - q * scale`, then `q + r * (1 / scale)`): two fused multiply-adds and a
/// multiply, usually the correctly rounded quotient, faster than dividing.
pub(crate) const REFINED: u8 = 1;
/// A true division, IEEE-exact like the reference.
pub(crate) const DIV: u8 = 2;

/// The constants per destination slot that `normalise::<ARITH>` takes:
/// `[bias, inv_scale, -]` for `FMA`, else `[mean, scale, inv_scale]`.
pub(crate) fn affine<const ARITH: u8>(plan: &Plan) -> [[f32; 4]; 3] {
    match ARITH {
        FMA => [plan.bias, plan.inv_scale, plan.inv_scale],
        _ => [plan.mean, plan.scale, plan.inv_scale],
    }
}

/// What a row's [`Simd::Tables`] are for: the kernel, and where it needs them,
/// its plan.
#[derive(Clone, Copy)]
pub(crate) enum Job<'a> {
    /// `Simd::rgbx_u8`.
    Bytes(&'a Plan),
    /// `Simd::channels::<C, false>` (pixel order).
    Planar(&'a Plan),
    /// `Simd::channels::<C, true>` and `Simd::store_rgbx16` (an order of
    /// lanes that suits the interleaving store).
    Packed16(&'a Plan),
    /// `Quads::quads` and `Quads::store_quads16`.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Quads(&'a Plan),
    /// NV12: R, G, B (`swapped`: B, G, R) and the pad. With
    /// `Simd::RGB_ORDER`, `swapped` has `chroma` read each pair as V, U instead.
    Nv12 { pad: u8, swapped: bool },
    /// The same for packed 4:2:2 rows (`chroma_422`): YUYV with `y_first`, else UYVY.
    Yuv422 { pad: u8, swapped: bool, y_first: bool },
}

/// One instruction set's vectors of `LANES` 32-bit lanes, and the operations
/// the kernels use on them.
pub(crate) trait Simd: Copy {
    /// Pixels per step: the lanes of `I` and `F`.
    const LANES: usize;
    /// `LANES` i32.
    type I: Copy;
    /// `LANES` f32.
    type F: Copy;
    /// Shuffle masks, pad values and the like, set up once per row for a [`Job`].
    type Tables;

    unsafe fn tables<const C: usize>(job: Job<'_>) -> Self::Tables;
    /// Bytes a step of `LANES` `C`-channel pixels may read (AVX2 reads 32
    /// for 24); a loop takes a step only where they lie in the source.
    fn src_bytes<const C: usize>() -> usize {
        Self::LANES * C
    }

    unsafe fn splat(x: f32) -> Self::F;
    unsafe fn splat_i(x: i32) -> Self::I;
    unsafe fn to_f32(x: Self::I) -> Self::F;
    unsafe fn sub(a: Self::F, b: Self::F) -> Self::F;
    unsafe fn mul(a: Self::F, b: Self::F) -> Self::F;
    unsafe fn div(a: Self::F, b: Self::F) -> Self::F;
    /// `a * b + c`, fused.
    unsafe fn mul_add(a: Self::F, b: Self::F, c: Self::F) -> Self::F;
    /// `c - a * b`, fused.
    unsafe fn neg_mul_add(a: Self::F, b: Self::F, c: Self::F) -> Self::F;
    unsafe fn bits(f: Self::F) -> Self::I;
    unsafe fn add_i(a: Self::I, b: Self::I) -> Self::I;
    unsafe fn and_i(a: Self::I, b: Self::I) -> Self::I;
    /// The low 32 bits of the product.
    unsafe fn mul_i(a: Self::I, b: Self::I) -> Self::I;
    /// Logical shift right by 16.
    unsafe fn shr16(a: Self::I) -> Self::I;

    /// `LANES` source pixels as 4-byte pixels in destination order, the pad
    /// byte the plan's: stores `4 * LANES` bytes (`Job::Bytes`).
    unsafe fn rgbx_u8<const C: usize>(t: &Self::Tables, src: *const u8, dst: *mut u8);
    /// `LANES` source pixels widened to 32-bit lanes, one vector per
    /// destination channel (`Job::Planar`, or `Job::Packed16` with `PACKED`).
    unsafe fn channels<const C: usize, const PACKED: bool>(t: &Self::Tables, src: *const u8) -> [Self::I; 3];
    /// `LANES` f32 at `out`.
    unsafe fn store_f32(out: *mut u8, f: Self::F);
    /// `LANES` f32 as IEEE half (nearest even) at `out`.
    unsafe fn store_f16(out: *mut u8, f: Self::F);
    /// `LANES` pixels of R, G, B (from `channels::<C, true>`) and the plan's
    /// pad, as 16-bit floats of `KIND`: `8 * LANES` bytes at `out`.
    unsafe fn store_rgbx16<const KIND: u8>(t: &Self::Tables, out: *mut u8, rgb: [Self::F; 3]);

    /// `2 * LANES` luma bytes less `offset`, floored at 0: the even pixels
    /// (0, 2, 4, ...), then the odd ones, so that lane j of each goes with
    /// chroma pair j.
    unsafe fn luma_pairs(y: *const u8, offset: u8) -> [Self::I; 2];
    /// `luma_pairs` times `cy`, exactly, plus `luma_bias(cy)`: `factor` is
    /// `luma_factor(cy)` splatted (an instruction set may split `cy` to
    /// multiply in 16-bit halves, which costs a constant that the chroma
    /// terms give back).
    unsafe fn luma_products(y: *const u8, offset: u8, factor: Self::I) -> [Self::I; 2] {
        let [even, odd] = Self::luma_pairs(y, offset);
        [Self::mul_i(even, factor), Self::mul_i(odd, factor)]
    }
    fn luma_factor(cy: i32) -> i32 {
        cy
    }
    fn luma_bias(_cy: i32) -> i32 {
        0
    }
    /// `acc + x * c` exactly for a lane `x` of `chroma`, `chroma_planes` or
    /// `chroma_422`, plus `chroma_bias(c)`: `factor` is `chroma_factor(c)`
    /// splatted (as `luma_products`, an instruction set may load the chroma
    /// as 16-bit halves and multiply them by `c`'s).
    unsafe fn add_chroma(acc: Self::I, x: Self::I, factor: Self::I) -> Self::I {
        Self::add_i(acc, Self::mul_i(x, factor))
    }
    fn chroma_factor(c: i32) -> i32 {
        c
    }
    fn chroma_bias(_c: i32) -> i32 {
        0
    }
    /// `LANES` chroma pairs (`2 * LANES` bytes) as U - 128 and V - 128 (with
    /// `RGB_ORDER`, as V - 128 and U - 128 where `Job::Nv12` says `swapped`),
    /// in the form `add_chroma` multiplies.
    unsafe fn chroma(t: &Self::Tables, uv: *const u8) -> [Self::I; 2];
    /// `LANES` bytes at `a` and `LANES` at `b` (I420's U and V rows), each
    /// less 128, lane j from byte j: as `chroma` has a pair's two bytes (in
    /// the same form).
    unsafe fn chroma_planes(a: *const u8, b: *const u8) -> [Self::I; 2];
    /// The fixed-point sums of R, G, B (each channel's byte is the sum
    /// `>> colour::SHIFT`, saturated to 0..=255 here) of the even and the
    /// odd pixels, and the pad, as `2 * LANES` 4-byte pixels at `out`
    /// (`Job::Nv12`).
    unsafe fn store_rgbx_sums(t: &Self::Tables, out: *mut u8, even: [Self::I; 3], odd: [Self::I; 3]);
    /// As `store_rgbx_sums`, as `2 * LANES` 3-byte pixels (no pad).
    unsafe fn store_rgb_sums(t: &Self::Tables, out: *mut u8, even: [Self::I; 3], odd: [Self::I; 3]);
    /// `luma_products` and `chroma` of `2 * LANES` pixels of a packed 4:2:2
    /// row (`4 * LANES` bytes): YUYV (`Y_FIRST`) or UYVY (`Job::Yuv422`).
    unsafe fn luma_products_422<const Y_FIRST: bool>(row: *const u8, offset: u8, factor: Self::I) -> [Self::I; 2];
    unsafe fn chroma_422(t: &Self::Tables, row: *const u8) -> [Self::I; 2];
    /// Whether the stores write R, G, B in that order only: B, G, R is then
    /// had as NV21 is, with the chroma bytes' roles exchanged
    /// (`YuvOut::swap_chroma`, `Job::Nv12`'s `swapped`).
    const RGB_ORDER: bool = false;
    /// Whether `store_rgbx_sums` can put R, G, B at `pos` (else NV12 rows
    /// go to the scalar kernel).
    fn nv12_positions(_pos: [usize; 3]) -> bool {
        true
    }
}

/// Instruction sets whose vectors also hold whole pixels: four vectors of
/// `LANES / 4` pixels, each with its 4 channels in 32-bit lanes (the pad lane
/// 0), normalised with each slot's constants.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) trait Quads: Simd {
    /// `LANES` source pixels as 4 such vectors (`Job::Quads`).
    unsafe fn quads<const C: usize>(t: &Self::Tables, src: *const u8) -> [Self::I; 4];
    /// The four per-slot values repeated for every pixel of a vector.
    unsafe fn four_times(values: [f32; 4]) -> Self::F;
    /// 4 such vectors as 16-bit floats of `KIND`: `8 * LANES` bytes at `out`.
    unsafe fn store_quads16<const KIND: u8>(out: *mut u8, q: [Self::F; 4]);
}

/// `(x - mean) / scale` in the arithmetic `ARITH` (see `FMA`), with the
/// constants `affine::<ARITH>` gives.
#[inline(always)]
pub(crate) unsafe fn normalise<S: Simd, const ARITH: u8>(x: S::I, a: S::F, b: S::F, c: S::F) -> S::F {
    let f = S::to_f32(x);
    match ARITH {
        FMA => S::mul_add(f, b, a),
        REFINED => {
            let t = S::sub(f, a);
            let q = S::mul(t, c);
            S::mul_add(S::neg_mul_add(q, b, t), c, q)
        }
        _ => S::div(S::sub(f, a), b),
    }
}

/// The bits of `f` rounded to bf16 in the high half of each lane (the low
/// half is left as it falls), in integer arithmetic: `BF16` to nearest even,
/// `BF16_FAST` ties away from zero. The values come from u8 inputs and finite
/// parameters, never NaN.
#[inline(always)]
pub(crate) unsafe fn bf16_high<S: Simd, const KIND: u8>(f: S::F) -> S::I {
    let bits = S::bits(f);
    if KIND == BF16_FAST {
        S::add_i(bits, S::splat_i(0x8000))
    } else {
        let lsb = S::and_i(S::shr16(bits), S::splat_i(1));
        S::add_i(S::add_i(bits, S::splat_i(0x7FFF)), lsb)
    }
}

/// Per destination channel, the splatted constants of `affine::<ARITH>`.
#[inline(always)]
unsafe fn channel_constants<S: Simd, const ARITH: u8>(plan: &Plan) -> [[S::F; 3]; 3] {
    let splat = |v: [f32; 4]| [S::splat(v[0]), S::splat(v[1]), S::splat(v[2])];
    let [a, b, c] = affine::<ARITH>(plan);
    [splat(a), splat(b), splat(c)]
}

/// RGBx or BGRx bytes with no arithmetic.
#[inline(always)]
pub(crate) unsafe fn packed_u8<S: Simd, const C: usize>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
    let n = dst.len() / 4;
    let t = S::tables::<C>(Job::Bytes(plan));
    let mut i = 0;
    while i + S::LANES <= n && i * C + S::src_bytes::<C>() <= src.len() {
        S::rgbx_u8::<C>(&t, src.as_ptr().add(i * C), dst.as_mut_ptr().add(i * 4));
        i += S::LANES;
    }
    scalar::packed::<u8, C>(plan, &src[(i * C).min(src.len())..], &mut dst[i * 4..]);
}

/// Packed bf16 or f16 (`KIND`), computing only the three colour channels.
#[inline(always)]
pub(crate) unsafe fn packed_16<S: Simd, const C: usize, const KIND: u8, const ARITH: u8>(
    plan: &Plan,
    src: &[u8],
    dst: &mut [u8],
) {
    let n = dst.len() / 8;
    let t = S::tables::<C>(Job::Packed16(plan));
    let [a, b, c] = channel_constants::<S, ARITH>(plan);
    let mut i = 0;
    while i + S::LANES <= n && i * C + S::src_bytes::<C>() <= src.len() {
        let x = S::channels::<C, true>(&t, src.as_ptr().add(i * C));
        let rgb = [
            normalise::<S, ARITH>(x[0], a[0], b[0], c[0]),
            normalise::<S, ARITH>(x[1], a[1], b[1], c[1]),
            normalise::<S, ARITH>(x[2], a[2], b[2], c[2]),
        ];
        S::store_rgbx16::<KIND>(&t, dst.as_mut_ptr().add(i * 8), rgb);
        i += S::LANES;
    }
    tail_16::<C>(plan, src, i, dst);
}

/// Packed bf16 or f16 (`KIND`), whole pixels to a vector (the pad slot
/// computed like the others: 0 normalised to the pad value).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline(always)]
pub(crate) unsafe fn packed_16_quads<S: Quads, const C: usize, const KIND: u8, const ARITH: u8>(
    plan: &Plan,
    src: &[u8],
    dst: &mut [u8],
) {
    let n = dst.len() / 8;
    let t = S::tables::<C>(Job::Quads(plan));
    let [a, b, c] = affine::<ARITH>(plan);
    let [a, b, c] = [S::four_times(a), S::four_times(b), S::four_times(c)];
    let mut i = 0;
    while i + S::LANES <= n && i * C + S::src_bytes::<C>() <= src.len() {
        let [q0, q1, q2, q3] = S::quads::<C>(&t, src.as_ptr().add(i * C));
        let q = [
            normalise::<S, ARITH>(q0, a, b, c),
            normalise::<S, ARITH>(q1, a, b, c),
            normalise::<S, ARITH>(q2, a, b, c),
            normalise::<S, ARITH>(q3, a, b, c),
        ];
        S::store_quads16::<KIND>(dst.as_mut_ptr().add(i * 8), q);
        i += S::LANES;
    }
    tail_16::<C>(plan, src, i, dst);
}

/// Three planes of f32 or (`HALF`) IEEE half.
#[inline(always)]
pub(crate) unsafe fn planar<S: Simd, const C: usize, const HALF: bool, const ARITH: u8>(
    plan: &Plan,
    src: &[u8],
    p0: &mut [u8],
    p1: &mut [u8],
    p2: &mut [u8],
) {
    let size = if HALF { 2 } else { 4 };
    let n = p0.len().min(p1.len()).min(p2.len()) / size;
    let t = S::tables::<C>(Job::Planar(plan));
    let [a, b, c] = channel_constants::<S, ARITH>(plan);
    let mut i = 0;
    while i + S::LANES <= n && i * C + S::src_bytes::<C>() <= src.len() {
        let x = S::channels::<C, false>(&t, src.as_ptr().add(i * C));
        for (k, plane) in [&mut *p0, &mut *p1, &mut *p2].into_iter().enumerate() {
            let f = normalise::<S, ARITH>(x[k], a[k], b[k], c[k]);
            let out = plane.as_mut_ptr().add(i * size);
            if HALF {
                S::store_f16(out, f)
            } else {
                S::store_f32(out, f)
            }
        }
        i += S::LANES;
    }
    let s = &src[(i * C).min(src.len())..];
    let (t0, t1, t2) = (&mut p0[i * size..], &mut p1[i * size..], &mut p2[i * size..]);
    if HALF {
        scalar::planar::<u16, C>(plan, s, t0, t1, t2)
    } else {
        scalar::planar::<f32, C>(plan, s, t0, t1, t2)
    }
}

/// The tail of a row of 16-bit floats, by the scalar tables.
fn tail_16<const C: usize>(plan: &Plan, src: &[u8], i: usize, dst: &mut [u8]) {
    scalar::packed::<u16, C>(plan, &src[(i * C).min(src.len())..], &mut dst[i * 8..]);
}

/// The chroma's share of R, G and B: `cvr v`, `cvg v + cug u` and `cub u`
/// of `chroma`'s lanes, each with the rounding half, less what
/// `add_chroma` and `luma_products` add (`chroma_bias`, `luma_bias`).
struct ChromaTerms<S: Simd> {
    factors: [S::I; 4],
    halves: [S::I; 3],
}

impl<S: Simd> ChromaTerms<S> {
    #[inline(always)]
    unsafe fn new(k: &Coefficients) -> Self {
        let half = HALF - S::luma_bias(k.cy);
        let f = |c: i32| S::splat_i(S::chroma_factor(c));
        let b = S::chroma_bias;
        ChromaTerms {
            factors: [f(k.cvr), f(k.cvg), f(k.cug), f(k.cub)],
            halves: [S::splat_i(half - b(k.cvr)), S::splat_i(half - b(k.cvg) - b(k.cug)), S::splat_i(half - b(k.cub))],
        }
    }

    #[inline(always)]
    unsafe fn of(&self, [u, v]: [S::I; 2]) -> [S::I; 3] {
        let ([cvr, cvg, cug, cub], [hr, hg, hb]) = (self.factors, self.halves);
        [S::add_chroma(hr, v, cvr), S::add_chroma(S::add_chroma(hg, v, cvg), u, cug), S::add_chroma(hb, u, cub)]
    }
}

/// `2 * LANES` pixels of NV12 or I420 a step to `BYTES`-byte pixels (3: R,
/// G, B in some order; 4: and a pad): OpenCV's fixed-point arithmetic
/// (colour.rs) in i32 lanes. The chroma terms, with the rounding half folded
/// in, are computed once per pair of pixels and for `ROWS` (1 or 2) luma
/// rows: the two rows of a pair share their chroma row, NV12's interleaved
/// U,V row or I420's U and V rows, each read where it lies (`Simd::chroma`,
/// `Simd::chroma_planes`: one loop, two loads). The even and the odd pixels
/// are computed apart, against the same terms, and interleaved by the store;
/// saturating packs clamp to 0..=255 as `saturate_cast` does.
#[inline(always)]
pub(crate) unsafe fn nv12_rows<S: Simd, const BYTES: usize, const ROWS: usize>(
    y: [&[u8]; ROWS],
    chroma: Chroma<'_>,
    dst: [&mut [u8]; ROWS],
    out: &YuvOut,
) {
    if !S::nv12_positions(out.pos) || out.bytes != BYTES {
        return tail_420::<ROWS, BYTES>(y, chroma, dst, out, 0);
    }
    let swapped = out.pos == [2, 1, 0];
    let t = S::tables::<4>(Job::Nv12 { pad: out.pad, swapped });
    // Instantiated once per chroma layout, so that each loop has its load inline.
    match chroma {
        Chroma::Interleaved(uv) => {
            rows_420::<S, BYTES, ROWS>(y, chroma, dst, out, &t, |i| S::chroma(&t, uv.as_ptr().add(i)))
        }
        Chroma::Planar(u, v) => {
            // Where the vector stores write R, G, B only (`RGB_ORDER`), B, G, R
            // reads V as U and U as V, as NV21 does (`Job::Nv12`'s `swapped`).
            let (a, b) = if S::RGB_ORDER && swapped { (v, u) } else { (u, v) };
            rows_420::<S, BYTES, ROWS>(y, chroma, dst, out, &t, |i| {
                S::chroma_planes(a.as_ptr().add(i / 2), b.as_ptr().add(i / 2))
            })
        }
    }
}

/// `nv12_rows`' loop, its chroma of pixels `i..i + 2 * LANES` from `load`.
#[inline(always)]
unsafe fn rows_420<S: Simd, const BYTES: usize, const ROWS: usize>(
    y: [&[u8]; ROWS],
    chroma: Chroma<'_>,
    dst: [&mut [u8]; ROWS],
    out: &YuvOut,
    t: &S::Tables,
    load: impl Fn(usize) -> [S::I; 2],
) {
    let n = (0..ROWS).fold(chroma.pixels(), |n, r| n.min(y[r].len()).min(dst[r].len() / BYTES));
    let vector_out = if S::RGB_ORDER && out.pos == [2, 1, 0] { out.swap_chroma() } else { *out };
    let k = vector_out.k;
    // The rounding half, and what the products add, once per chroma pair.
    let (factor, chroma_terms) = (S::splat_i(S::luma_factor(k.cy)), ChromaTerms::<S>::new(&k));
    let step = 2 * S::LANES;
    let mut i = 0;
    while i + step <= n {
        let terms = chroma_terms.of(load(i));
        let sums = |l: S::I| [S::add_i(l, terms[0]), S::add_i(l, terms[1]), S::add_i(l, terms[2])];
        for r in 0..ROWS {
            let [even, odd] = S::luma_products(y[r].as_ptr().add(i), k.y_offset, factor);
            let at = dst[r].as_mut_ptr().add(BYTES * i);
            if BYTES == 3 {
                S::store_rgb_sums(t, at, sums(even), sums(odd));
            } else {
                S::store_rgbx_sums(t, at, sums(even), sums(odd));
            }
        }
        i += step;
    }
    tail_420::<ROWS, BYTES>(y, chroma, dst, out, i);
}

/// Whether every row ends at pixel `i`, where a SIMD loop stopped: then its
/// scalar tail, called for every row or pair of rows, would find nothing.
fn no_pixel_left(rows: &[&[u8]], i: usize) -> bool {
    rows.iter().all(|row| row.len() <= i)
}

/// Pixels `i..` of each row by the scalar decoder.
fn tail_420<const ROWS: usize, const BYTES: usize>(
    y: [&[u8]; ROWS],
    chroma: Chroma<'_>,
    dst: [&mut [u8]; ROWS],
    out: &YuvOut,
    i: usize,
) {
    if no_pixel_left(&y, i) {
        return;
    }
    let chroma = chroma.skip_pixels(i);
    for (y, dst) in y.into_iter().zip(dst) {
        let end = dst.len();
        let (y, dst) = (&y[i.min(y.len())..], &mut dst[(BYTES * i).min(end)..]);
        match chroma {
            Chroma::Interleaved(uv) => scalar::nv12_row(y, uv, dst, out),
            Chroma::Planar(u, v) => scalar::i420_row(y, u, v, dst, out),
        }
    }
}

/// A packed 4:2:2 row, YUYV (`Y_FIRST`) or UYVY, decoded as `nv12_rows`
/// decodes its split bytes, reading luma and chroma from the row itself (no
/// split pass).
#[inline(always)]
pub(crate) unsafe fn yuv422_row<S: Simd, const BYTES: usize, const Y_FIRST: bool>(
    row: &[u8],
    dst: &mut [u8],
    out: &YuvOut,
) {
    let n = (row.len() / 2).min(dst.len() / BYTES);
    let step = 2 * S::LANES;
    let mut i = 0;
    if S::nv12_positions(out.pos) && out.bytes == BYTES {
        let swapped = out.pos == [2, 1, 0];
        let vector_out = if S::RGB_ORDER && swapped { out.swap_chroma() } else { *out };
        let t = S::tables::<4>(Job::Yuv422 { pad: out.pad, swapped, y_first: Y_FIRST });
        let k = vector_out.k;
        let (factor, chroma_terms) = (S::splat_i(S::luma_factor(k.cy)), ChromaTerms::<S>::new(&k));
        while i + step <= n {
            let at = row.as_ptr().add(2 * i);
            let terms = chroma_terms.of(S::chroma_422(&t, at));
            let sums = |l: S::I| [S::add_i(l, terms[0]), S::add_i(l, terms[1]), S::add_i(l, terms[2])];
            let [even, odd] = S::luma_products_422::<Y_FIRST>(at, k.y_offset, factor);
            let to = dst.as_mut_ptr().add(BYTES * i);
            if BYTES == 3 {
                S::store_rgb_sums(&t, to, sums(even), sums(odd));
            } else {
                S::store_rgbx_sums(&t, to, sums(even), sums(odd));
            }
            i += step;
        }
    }
    scalar::yuv422_row::<Y_FIRST>(&row[(2 * i).min(row.len())..], &mut dst[BYTES * i..], out);
}

/// Instruction sets that also write int8 pixels (RGBx_I8, RGB_I8).
pub(crate) trait Quantise: Simd {
    /// Each lane rounded to the nearest integer, ties to even, after
    /// clamping to the i16 range (so that adding a zero point cannot wrap).
    unsafe fn round_even(f: Self::F) -> Self::I;
    /// `LANES` pixels of R, G, B (pixel order, destination channel order),
    /// each saturated to i8, and with `BYTES` 4 the pad (also saturated) in
    /// the fourth byte: `BYTES * LANES` bytes at `out`.
    unsafe fn store_i8<const BYTES: usize>(out: *mut u8, rgb: [Self::I; 3], pad: Self::I);
}

/// Int8 pixels (`BYTES` 3 or 4): `round((x - mean) / scale / q) + zero_point`,
/// saturated. `ARITH` `FMA`: one fused multiply-add with the plan's combined
/// constants (`1 / (scale * q)`, `-mean / (scale * q)`); else two true
/// divisions, as the reference computes. A plan takes the FMA form only where
/// it reproduces the tables.
#[inline(always)]
pub(crate) unsafe fn packed_i8<S: Quantise, const C: usize, const BYTES: usize, const ARITH: u8>(
    plan: &Plan,
    src: &[u8],
    dst: &mut [u8],
) {
    let n = dst.len() / BYTES;
    let t = S::tables::<C>(Job::Planar(plan));
    let (q, zero_point) = plan.quant.expect("an int8 plan has a quantisation");
    let mut a = [S::splat(0.0); 3];
    let mut b = [S::splat(0.0); 3];
    for k in 0..3 {
        if ARITH == FMA {
            let inv = 1.0 / (f64::from(plan.scale[k]) * f64::from(q));
            (a[k], b[k]) = (S::splat(inv as f32), S::splat((-f64::from(plan.mean[k]) * inv) as f32));
        } else {
            (a[k], b[k]) = (S::splat(plan.mean[k]), S::splat(plan.scale[k]));
        }
    }
    let (q, zero_point, pad) = (S::splat(q), S::splat_i(zero_point), S::splat_i(i32::from(plan.pad as u8 as i8)));
    let level = |x: S::I, k: usize| {
        let f = S::to_f32(x);
        let f = if ARITH == FMA { S::mul_add(f, a[k], b[k]) } else { S::div(S::div(S::sub(f, a[k]), b[k]), q) };
        S::add_i(S::round_even(f), zero_point)
    };
    let mut i = 0;
    while i + S::LANES <= n && i * C + S::src_bytes::<C>() <= src.len() {
        let x = S::channels::<C, false>(&t, src.as_ptr().add(i * C));
        S::store_i8::<BYTES>(dst.as_mut_ptr().add(i * BYTES), [level(x[0], 0), level(x[1], 1), level(x[2], 2)], pad);
        i += S::LANES;
    }
    let (s, d) = (&src[(i * C).min(src.len())..], &mut dst[i * BYTES..]);
    if BYTES == 3 {
        scalar::packed3::<u8, C>(plan, s, d)
    } else {
        scalar::packed::<u8, C>(plan, s, d)
    }
}

/// Instruction sets that also read 10-bit samples (P010, I010).
pub(crate) trait Words: Simd {
    /// The `2 * LANES` little-endian u16 at `p` as their 10-bit values (the
    /// top 10 bits, or with `LOW` the low 10): the even-indexed words, then
    /// the odd ones, lane j of each from word pair j.
    unsafe fn words10<const LOW: bool>(p: *const u8) -> [Self::I; 2];
}

/// `2 * LANES` pixels of 10-bit samples a step (P010, or I010 with `LOW`;
/// the U,V row holds U, V pairs of u16) to `BYTES`-byte pixels, as
/// `nv12_row` in `colour::coefficients10`'s arithmetic (`yuv10_to_rgb`):
/// a Y, U or V word pair is one 32-bit lane, so `words10` splits it into
/// the even and the odd samples (or U and V) with two shifts or masks.
#[inline(always)]
pub(crate) unsafe fn yuv10_row<S: Words, const BYTES: usize, const LOW: bool>(
    y: &[u8],
    uv: &[u8],
    dst: &mut [u8],
    out: &YuvOut,
) {
    if !S::nv12_positions(out.pos) || out.bytes != BYTES {
        return scalar::yuv10_row::<LOW>(y, uv, dst, out);
    }
    let n = (y.len() / 2).min(uv.len() / 2).min(dst.len() / BYTES);
    // B, G, R order: as in `nv12_rows` (`Simd::RGB_ORDER`), U and V exchanged below.
    let swapped = out.pos == [2, 1, 0];
    let swap_uv = S::RGB_ORDER && swapped;
    let vector_out = if swap_uv { out.swap_chroma() } else { *out };
    let t = S::tables::<4>(Job::Nv12 { pad: out.pad, swapped: swapped && !S::RGB_ORDER });
    let k = vector_out.k;
    // (Y - offset) * cy + HALF as Y * cy + (HALF - offset * cy): no sum leaves i32 (colour.rs).
    let (cy, bias) = (S::splat_i(k.cy), S::splat_i(HALF - i32::from(k.y_offset) * k.cy));
    let centre = S::splat_i(-512);
    let [cvr, cvg, cug, cub] = [S::splat_i(k.cvr), S::splat_i(k.cvg), S::splat_i(k.cug), S::splat_i(k.cub)];
    let step = 2 * S::LANES;
    let mut i = 0;
    while i + step <= n {
        let [u, v] = S::words10::<LOW>(uv.as_ptr().add(2 * i));
        let (u, v) = if swap_uv { (v, u) } else { (u, v) };
        let (u, v) = (S::add_i(u, centre), S::add_i(v, centre));
        let terms = [S::mul_i(cvr, v), S::add_i(S::mul_i(cvg, v), S::mul_i(cug, u)), S::mul_i(cub, u)];
        let sums = |luma: S::I| {
            let yh = S::add_i(S::mul_i(luma, cy), bias);
            [S::add_i(yh, terms[0]), S::add_i(yh, terms[1]), S::add_i(yh, terms[2])]
        };
        let [even, odd] = S::words10::<LOW>(y.as_ptr().add(2 * i));
        let at = dst.as_mut_ptr().add(BYTES * i);
        if BYTES == 3 {
            S::store_rgb_sums(&t, at, sums(even), sums(odd));
        } else {
            S::store_rgbx_sums(&t, at, sums(even), sums(odd));
        }
        i += step;
    }
    scalar::yuv10_row::<LOW>(&y[2 * i..], &uv[(2 * i).min(uv.len())..], &mut dst[BYTES * i..], out);
}

/// One instruction set's vectors of 16-bit lanes (`WORDS` words, in lanes of
/// 16 bytes) for the fast rounding's decoder (`nv12_pair_fast`): the few
/// operations it uses, each one instruction, and the two that differ in
/// shape per set (`groups`, `plane_words`) and the 3-byte store.
#[cfg(target_arch = "x86_64")]
pub(crate) trait Fast16: Copy {
    type V: Copy;
    /// Words a vector: pixels a step are twice this (32 for AVX2, 64 for AVX-512).
    const WORDS: usize;
    unsafe fn load(p: *const u8) -> Self::V;
    unsafe fn store(p: *mut u8, v: Self::V);
    unsafe fn splat8(x: i8) -> Self::V;
    unsafe fn splat16(x: i16) -> Self::V;
    unsafe fn xor(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn and(a: Self::V, b: Self::V) -> Self::V;
    /// Each word shifted left by 8.
    unsafe fn shl8(a: Self::V) -> Self::V;
    /// Bytes, unsigned, saturating.
    unsafe fn subs_u8(a: Self::V, b: Self::V) -> Self::V;
    /// The low (high) 8 bytes of each 16-byte lane of `a` and `b`, interleaved (`punpcklbw`).
    unsafe fn unpack_lo8(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn unpack_hi8(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn unpack_lo16(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn unpack_hi16(a: Self::V, b: Self::V) -> Self::V;
    /// `(a b + 2^14) >> 15` per word (`pmulhrsw`).
    unsafe fn mulhrs(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn add16(a: Self::V, b: Self::V) -> Self::V;
    /// Signed, saturating.
    unsafe fn adds16(a: Self::V, b: Self::V) -> Self::V;
    /// Each word shifted right by 6, arithmetic (`psraw`).
    unsafe fn sra6(a: Self::V) -> Self::V;
    /// Words to bytes, unsigned saturation, per lane: `a`'s 8 then `b`'s 8 (`packuswb`).
    unsafe fn packus(a: Self::V, b: Self::V) -> Self::V;
    /// The index of `groups`' dword permute.
    unsafe fn group_index() -> Self::V;
    /// The 4-byte groups permuted by `index` (`group_index`): lane L holds
    /// groups L, L + n, L + 2n, L + 3n (n lanes of 16 bytes), which makes
    /// the two stages of unpacks that build 4-byte pixels leave them in order.
    unsafe fn groups(a: Self::V, index: Self::V) -> Self::V;
    /// `WORDS` bytes of one chroma plane at `p` as words `(c - 128) << 8`,
    /// in the order that NV12's pairs take (`groups` applied where `GROUPS`).
    unsafe fn plane_words<const GROUPS: bool>(p: *const u8, index: Self::V) -> Self::V;
    /// 3-byte pixels from the three channels' words (per channel, lane L's
    /// pixels 16 L to 16 L + 7, then 16 L + 8 to 16 L + 15), saturated to
    /// bytes by `packuswb` as the set likes: `3 WORDS * 2` bytes at `p`.
    unsafe fn store3(p: *mut u8, h: [(Self::V, Self::V); 3]);
}

/// Two rows sharing one chroma row in the fast rounding (`colour::Fast`,
/// whose reference `scalar::nv12_pair_fast` also decodes the tails),
/// `2 WORDS` pixels of each row a step in 16-bit lanes: the chroma words
/// of the `WORDS` pairs once for both rows (3 terms, 5 `pmulhrsw`, luma's
/// `128 cy` and the half added, each rounded to levels by an arithmetic
/// `>> 6`), each duplicated for its pair's two pixels by a word unpack; a
/// row's luma by a saturating byte subtraction (the footroom), an xor, two
/// unpacks and two `pmulhrsw` (in levels); per channel and half a
/// saturating add, then a `packuswb` (the clamp). No pixel takes a shift of
/// its own: the arithmetic rounds where it is shared (`colour::Fast`).
/// 4-byte pixels by two stages of byte and word
/// unpacks, the rows and the chroma read with their 4-byte groups permuted
/// (`groups`) so that the pixels come out in order; 3-byte pixels by
/// `store3`. BGR orders (and NV21) exchange the first and last channels.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn nv12_pair_fast<S: Fast16, const BYTES: usize>(
    y: [&[u8]; 2],
    chroma: Chroma<'_>,
    dst: [&mut [u8]; 2],
    out: &YuvOut,
) {
    if out.pos[0] == 2 {
        fast_pair::<S, BYTES, true>(y, chroma, dst, out)
    } else {
        fast_pair::<S, BYTES, false>(y, chroma, dst, out)
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn fast_pair<S: Fast16, const BYTES: usize, const SWAP: bool>(
    y: [&[u8]; 2],
    chroma: Chroma<'_>,
    dst: [&mut [u8]; 2],
    out: &YuvOut,
) {
    let f = super::super::colour::Fast::of(&out.k);
    let step = 2 * S::WORDS;
    let n = y[0].len().min(y[1].len()).min(chroma.pixels()).min(dst[0].len() / BYTES).min(dst[1].len() / BYTES);
    let [d0, d1] = dst;
    let grouped = BYTES == 4;
    // The permute's index out of LLVM's sight: seeing a constant, it splits the
    // one `vpermd` into two shuffles (`vpshufd`, `vpermq`).
    let index = std::hint::black_box(S::group_index());
    let arrange = |x: S::V| if grouped { S::groups(x, index) } else { x };
    let signs = S::splat8(-128);
    let high = S::splat16(-256);
    let zero = S::splat8(0);
    let offset = S::splat8(f.y_offset as i8);
    let cy = S::splat16(f.cy_levels);
    let cy_half = S::splat16(f.cy + 32); // 128 cy in 1/64 levels, and the half that makes the `>> 6` round
    let (cvr, cvg, cug, cub) = (S::splat16(f.cvr), S::splat16(f.cvg), S::splat16(f.cug), S::splat16(f.cub));
    let pad = S::splat8(out.pad as i8);
    let mut i = 0;
    loop {
        let fits = match chroma {
            Chroma::Interleaved(uv) => i + step <= uv.len(),
            Chroma::Planar(u, v) => i / 2 + S::WORDS <= u.len().min(v.len()),
        };
        if !(i + step <= n && fits) {
            break;
        }
        // (C - 128) << 8 as words, one per pair.
        let (u, v) = match chroma {
            Chroma::Interleaved(uv) => {
                let x = S::xor(arrange(S::load(uv.as_ptr().add(i))), signs);
                (S::shl8(x), S::and(x, high))
            }
            Chroma::Planar(u, v) if grouped => (
                S::plane_words::<true>(u.as_ptr().add(i / 2), index),
                S::plane_words::<true>(v.as_ptr().add(i / 2), index),
            ),
            Chroma::Planar(u, v) => (
                S::plane_words::<false>(u.as_ptr().add(i / 2), index),
                S::plane_words::<false>(v.as_ptr().add(i / 2), index),
            ),
        };
        // Each term in levels (`Fast::term`), rounded once a pair.
        let r = S::sra6(S::add16(S::mulhrs(v, cvr), cy_half));
        let g = S::sra6(S::add16(S::add16(S::mulhrs(u, cug), S::mulhrs(v, cvg)), cy_half));
        let b = S::sra6(S::add16(S::mulhrs(u, cub), cy_half));
        let (first, last) = if SWAP { (b, r) } else { (r, b) };
        // Each term for the two pixels of its pair: the low and the high halves of the lanes.
        let terms = [
            (S::unpack_lo16(first, first), S::unpack_hi16(first, first)),
            (S::unpack_lo16(g, g), S::unpack_hi16(g, g)),
            (S::unpack_lo16(last, last), S::unpack_hi16(last, last)),
        ];
        for (row, d) in [(y[0], &mut *d0), (y[1], &mut *d1)] {
            let luma = S::xor(S::subs_u8(arrange(S::load(row.as_ptr().add(i))), offset), signs);
            let lo = S::mulhrs(S::unpack_lo8(zero, luma), cy);
            let hi = S::mulhrs(S::unpack_hi8(zero, luma), cy);
            // Each channel's words, the low and the high halves of the lanes' pixels.
            let mut h = [(zero, zero); 3];
            for (h, t) in h.iter_mut().zip(terms) {
                *h = (S::adds16(lo, t.0), S::adds16(hi, t.1));
            }
            let o = d.as_mut_ptr().add(BYTES * i);
            if BYTES == 4 {
                let c = [S::packus(h[0].0, h[0].1), S::packus(h[1].0, h[1].1), S::packus(h[2].0, h[2].1)];
                let (x_lo, x_hi) = (S::unpack_lo8(c[0], c[1]), S::unpack_hi8(c[0], c[1]));
                let (z_lo, z_hi) = (S::unpack_lo8(c[2], pad), S::unpack_hi8(c[2], pad));
                let w = 2 * S::WORDS; // bytes a vector
                S::store(o, S::unpack_lo16(x_lo, z_lo));
                S::store(o.add(w), S::unpack_hi16(x_lo, z_lo));
                S::store(o.add(2 * w), S::unpack_lo16(x_hi, z_hi));
                S::store(o.add(3 * w), S::unpack_hi16(x_hi, z_hi));
            } else {
                S::store3(o, h);
            }
        }
        i += step;
    }
    if no_pixel_left(&y, i) {
        return;
    }
    let [t0, t1] = [&mut d0[BYTES * i..], &mut d1[BYTES * i..]];
    scalar::nv12_pair_fast([&y[0][i..], &y[1][i..]], chroma.skip_pixels(i), [t0, t1], out);
}
