//! The way back, for the buffers a model writes: quantisation and
//! dequantisation, 16-bit floats to f32, planar <-> packed, and top-k, each
//! reading its source in place and writing into a caller's buffer.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::error::{bail, Result};
use super::format::ElementType;
use crate::simd::{
    bf16_slice_to_f32, bf16_to_f32, f16_slice_to_f32, f16_to_f32, f32_slice_to_bf16, f32_slice_to_f16, f32_to_bf16,
    f32_to_f16, stamp, SimdLevel,
};

/// An 8-bit integer type of quantised tensors.
pub trait QuantInt: Copy + Send + Sync + 'static {
    const MIN: i32;
    const MAX: i32;
    const NAME: &'static str;
    fn to_i32(self) -> i32;
    /// From a value already within `MIN..=MAX`.
    fn from_i32(v: i32) -> Self;
}

impl QuantInt for u8 {
    const MIN: i32 = 0;
    const MAX: i32 = 255;
    const NAME: &'static str = "uint8";
    #[inline(always)]
    fn to_i32(self) -> i32 {
        self as i32
    }
    #[inline(always)]
    fn from_i32(v: i32) -> u8 {
        v as u8
    }
}

impl QuantInt for i8 {
    const MIN: i32 = -128;
    const MAX: i32 = 127;
    const NAME: &'static str = "int8";
    #[inline(always)]
    fn to_i32(self) -> i32 {
        self as i32
    }
    #[inline(always)]
    fn from_i32(v: i32) -> i8 {
        v as i8
    }
}

/// Affine quantisation `real = (q - zero_point) * scale`: one scale and zero
/// point for the whole tensor, or one per channel. With `channels` C > 1 and
/// `inner` elements per channel run, element i belongs to channel
/// `(i / inner) % C` (a C-contiguous tensor whose channel axis is followed by
/// `inner` elements).
#[derive(Debug, Clone)]
pub struct Quantization {
    pub scale: Vec<f32>,
    pub zero_point: Vec<i32>,
    pub inner: usize,
}

impl Quantization {
    pub fn per_tensor(scale: f32, zero_point: i32) -> Self {
        Quantization { scale: vec![scale], zero_point: vec![zero_point], inner: 1 }
    }

    fn check<Q: QuantInt>(&self, len: usize) -> Result<()> {
        let channels = self.scale.len();
        if channels == 0 {
            bail!("no scale given: quantisation needs one scale, or one per channel");
        }
        if self.zero_point.len() != channels && self.zero_point.len() != 1 {
            bail!("{} zero points for {channels} scales: give one zero point, or one per scale", self.zero_point.len());
        }
        if let Some(s) = self.scale.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
            bail!("scale {s} is not a positive finite number: quantisation scales must be");
        }
        if let Some(z) = self.zero_point.iter().find(|z| !(Q::MIN..=Q::MAX).contains(*z)) {
            bail!("zero point {z} is outside the {} range {}..={}", Q::NAME, Q::MIN, Q::MAX);
        }
        if channels > 1 && !channels.checked_mul(self.inner).is_some_and(|tile| tile > 0 && len.is_multiple_of(tile)) {
            bail!(
                "{channels} per-channel scales with {} elements per channel run do not tile a tensor of {len} elements; \
                 check the channel axis",
                self.inner
            );
        }
        Ok(())
    }

    /// Calls `f(start, end, scale, zero_point)` for each run of one channel.
    fn for_each_run(&self, len: usize, mut f: impl FnMut(usize, usize, f32, i32)) {
        let zp = |c: usize| self.zero_point[if self.zero_point.len() == 1 { 0 } else { c }];
        if self.scale.len() == 1 {
            return f(0, len, self.scale[0], zp(0));
        }
        for (run, start) in (0..len).step_by(self.inner).enumerate() {
            let c = run % self.scale.len();
            f(start, start + self.inner, self.scale[c], zp(c));
        }
    }
}

/// `q = clamp(round_half_even(x / scale) + zero_point)`, saturating; NaN
/// becomes the zero point (the quantised 0).
pub fn quantize<Q: QuantInt>(src: &[f32], dst: &mut [Q], q: &Quantization, simd: Option<SimdLevel>) -> Result<()> {
    same_length(src.len(), dst.len())?;
    q.check::<Q>(src.len())?;
    let level = SimdLevel::resolve(simd)?;
    q.for_each_run(src.len(), |start, end, scale, zp| {
        let run = stamp!(
            for level,
            fn body<Q: QuantInt>(src: &[f32], dst: &mut [Q], scale: f32, zp: i32) {
                // Clamp first (rounding commutes with clamping to integers), so
                // that the magic-number rounding below stays in its exact range.
                let (lo, hi) = ((Q::MIN - zp) as f32, (Q::MAX - zp) as f32);
                // Adding then subtracting 1.5 * 2^23 rounds |v| < 2^22 to an
                // integer, ties to even, in the default rounding mode.
                const ROUND: f32 = 12_582_912.0;
                for (d, &x) in dst.iter_mut().zip(src) {
                    let v = x / scale;
                    // NaN is the real 0 (the zero point); max/min keep the rest in range.
                    let v = if v.is_nan() { 0.0 } else { v.max(lo).min(hi) };
                    let rounded = (v + ROUND) - ROUND;
                    // SAFETY: `rounded` is a finite whole number within lo..=hi,
                    // well inside i32 (a plain `as` would check that per element
                    // and keep LLVM from vectorising the loop).
                    let q = unsafe { rounded.to_int_unchecked::<i32>() };
                    *d = Q::from_i32(q + zp);
                }
            }
        );
        run(&src[start..end], &mut dst[start..end], scale, zp)
    });
    Ok(())
}

/// `x = (q - zero_point) * scale` in f32.
pub fn dequantize<Q: QuantInt>(src: &[Q], dst: &mut [f32], q: &Quantization, simd: Option<SimdLevel>) -> Result<()> {
    same_length(src.len(), dst.len())?;
    q.check::<Q>(src.len())?;
    let level = SimdLevel::resolve(simd)?;
    q.for_each_run(src.len(), |start, end, scale, zp| {
        let run = stamp!(
            for level,
            fn body<Q: QuantInt>(src: &[Q], dst: &mut [f32], scale: f32, zp: i32) {
                for (d, &x) in dst.iter_mut().zip(src) {
                    *d = (x.to_i32() - zp) as f32 * scale;
                }
            }
        );
        run(&src[start..end], &mut dst[start..end], scale, zp)
    });
    Ok(())
}

fn same_length(src: usize, dst: usize) -> Result<()> {
    if src != dst {
        bail!("the source has {src} elements but the destination {dst}: they must have the same number");
    }
    Ok(())
}

/// A tensor element read from or written to native-endian bytes.
trait Elem {
    const SIZE: usize;
    fn load(bytes: &[u8]) -> f32;
    fn store(value: f32, out: &mut [u8]);
}

/// f32 to an integer element: round half to even, saturate, NaN to 0.
#[inline(always)]
fn saturate(value: f32, lo: f32, hi: f32) -> i32 {
    value.clamp(lo, hi).round_ties_even() as i32
}

macro_rules! elem {
    ($name:ident, $size:expr, |$b:ident| $load:expr, |$v:ident, $o:ident| $store:expr) => {
        struct $name;
        impl Elem for $name {
            const SIZE: usize = $size;
            #[inline(always)]
            fn load($b: &[u8]) -> f32 {
                $load
            }
            #[inline(always)]
            fn store($v: f32, $o: &mut [u8]) {
                $store
            }
        }
    };
}

elem!(U8, 1, |b| b[0] as f32, |v, o| o[0] = saturate(v, 0.0, 255.0) as u8);
elem!(I8, 1, |b| b[0] as i8 as f32, |v, o| o[0] = saturate(v, -128.0, 127.0) as i8 as u8);
elem!(Bf16, 2, |b| bf16_to_f32(u16::from_ne_bytes([b[0], b[1]])), |v, o| o[..2]
    .copy_from_slice(&f32_to_bf16(v).to_ne_bytes()));
elem!(F16, 2, |b| f16_to_f32(u16::from_ne_bytes([b[0], b[1]])), |v, o| o[..2]
    .copy_from_slice(&f32_to_f16(v).to_ne_bytes()));
elem!(F32, 4, |b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]), |v, o| o[..4].copy_from_slice(&v.to_ne_bytes()));

fn element_size(element: ElementType) -> usize {
    match element {
        ElementType::U8 | ElementType::I8 => 1,
        ElementType::Bf16 | ElementType::F16 => 2,
        ElementType::F32 => 4,
    }
}

/// Runs `$body` with `$T` the `Elem` type of `$element`.
macro_rules! with_elem {
    ($element:expr, $T:ident => $body:expr) => {
        match $element {
            ElementType::U8 => {
                type $T = U8;
                $body
            }
            ElementType::I8 => {
                type $T = I8;
                $body
            }
            ElementType::Bf16 => {
                type $T = Bf16;
                $body
            }
            ElementType::F16 => {
                type $T = F16;
                $body
            }
            ElementType::F32 => {
                type $T = F32;
                $body
            }
        }
    };
}

/// Every element of `src` (native-endian bytes of `element`) as f32: exact
/// for each type (bf16, f16, u8 and i8 values all have an f32 twin).
pub fn to_float32(src: &[u8], element: ElementType, dst: &mut [f32], simd: Option<SimdLevel>) -> Result<()> {
    let size = element_size(element);
    same_length(src.len() / size, dst.len())?;
    let level = SimdLevel::resolve(simd)?;
    match element {
        ElementType::Bf16 | ElementType::F16 => {
            let bits: Vec<u16>;
            let words: &[u16] = match bytemuck_u16(src) {
                Some(words) => words,
                None => {
                    // Unaligned source (rare: numpy aligns): decode through a copy of the bits.
                    bits = src.chunks_exact(2).map(|b| u16::from_ne_bytes([b[0], b[1]])).collect();
                    &bits
                }
            };
            if element == ElementType::Bf16 {
                bf16_slice_to_f32(words, dst, level)
            } else {
                f16_slice_to_f32(words, dst, level)
            }
        }
        _ => with_elem!(element, T => {
            for (d, b) in dst.iter_mut().zip(src.chunks_exact(T::SIZE)) {
                *d = T::load(b);
            }
        }),
    }
    Ok(())
}

/// f32 to bf16 or f16 (round to nearest even), or to u8/i8 (round half to
/// even, saturate, NaN to 0), into native-endian bytes.
pub fn from_float32(src: &[f32], dst: &mut [u8], element: ElementType, simd: Option<SimdLevel>) -> Result<()> {
    let size = element_size(element);
    same_length(src.len(), dst.len() / size)?;
    let level = SimdLevel::resolve(simd)?;
    match (element, bytemuck_u16_mut(dst)) {
        (ElementType::Bf16, Some(words)) => f32_slice_to_bf16(src, words, level),
        (ElementType::F16, Some(words)) => f32_slice_to_f16(src, words, level),
        _ => with_elem!(element, T => {
            for (&s, d) in src.iter().zip(dst.chunks_exact_mut(T::SIZE)) {
                T::store(s, d);
            }
        }),
    }
    Ok(())
}

fn bytemuck_u16(bytes: &[u8]) -> Option<&[u16]> {
    // SAFETY: every bit pattern is a valid u16; align_to only returns an
    // aligned middle part, and we accept it only when it is all of `bytes`.
    let (head, words, tail) = unsafe { bytes.align_to::<u16>() };
    (head.is_empty() && tail.is_empty()).then_some(words)
}

fn bytemuck_u16_mut(bytes: &mut [u8]) -> Option<&mut [u16]> {
    // SAFETY: as in `bytemuck_u16`; the borrow of `bytes` is moved into the result.
    let (head, words, tail) = unsafe { bytes.align_to_mut::<u16>() };
    (head.is_empty() && tail.is_empty()).then_some(words)
}

/// `pixels` packed pixels of `channels` values of `element` (native-endian
/// bytes) to `planes` planes of f32: plane k holds channel k of each pixel.
pub fn packed_to_planar(
    src: &[u8],
    element: ElementType,
    channels: usize,
    dst: &mut [f32],
    planes: usize,
) -> Result<()> {
    let size = element_size(element);
    if planes == 0 || planes > channels {
        bail!("cannot make {planes} planes from pixels of {channels} channels: use 1 to {channels} planes");
    }
    let Some(pixel) = channels.checked_mul(size) else {
        bail!("pixels of {channels} {element:?} values do not fit in memory");
    };
    if !src.len().is_multiple_of(pixel) || !dst.len().is_multiple_of(planes) || src.len() / pixel != dst.len() / planes
    {
        bail!(
            "{} bytes of {channels}-channel pixels do not match {} values in {planes} planes: \
             the source must be (pixels, {channels}) and the destination ({planes}, pixels)",
            src.len(),
            dst.len()
        );
    }
    let pixels = dst.len() / planes;
    if pixels == 0 {
        return Ok(()); // no pixel: nothing to write (and no plane to split)
    }
    with_elem!(element, T => {
        for (k, plane) in dst.chunks_exact_mut(pixels).enumerate() {
            for (d, px) in plane.iter_mut().zip(src.chunks_exact(pixel)) {
                *d = T::load(&px[k * T::SIZE..]);
            }
        }
    });
    Ok(())
}

/// `planes` planes of f32 to packed pixels of `channels` values of `element`;
/// channels beyond the planes get `pad`.
pub fn planar_to_packed(
    src: &[f32],
    planes: usize,
    dst: &mut [u8],
    element: ElementType,
    channels: usize,
    pad: f32,
) -> Result<()> {
    let size = element_size(element);
    if planes == 0 || planes > channels {
        bail!("cannot pack {planes} planes into pixels of {channels} channels: a pixel needs a channel per plane");
    }
    let Some(pixel) = channels.checked_mul(size) else {
        bail!("pixels of {channels} {element:?} values do not fit in memory");
    };
    if !src.len().is_multiple_of(planes) || !dst.len().is_multiple_of(pixel) || src.len() / planes != dst.len() / pixel
    {
        bail!(
            "{} values in {planes} planes do not match {} bytes of {channels}-channel pixels: \
             the source must be ({planes}, pixels) and the destination (pixels, {channels})",
            src.len(),
            dst.len()
        );
    }
    let pixels = src.len() / planes;
    with_elem!(element, T => {
        for (i, px) in dst.chunks_exact_mut(pixel).enumerate() {
            for k in 0..channels {
                let v = if k < planes { src[k * pixels + i] } else { pad };
                T::store(v, &mut px[k * T::SIZE..]);
            }
        }
    });
    Ok(())
}

/// One candidate of a top-k: its value and index.
#[derive(Clone, Copy, Debug)]
struct Ranked(f32, usize);

impl Ranked {
    /// Greater is better: a higher value, then a lower index; NaN ranks below
    /// every number (what `argsort(-x, kind="stable")` gives).
    fn rank(&self, other: &Self) -> Ordering {
        match (self.0.is_nan(), other.0.is_nan()) {
            (true, true) => other.1.cmp(&self.1),
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            _ => self.0.partial_cmp(&other.0).unwrap().then(other.1.cmp(&self.1)),
        }
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.rank(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: the heap's top is the worst of the best k so far.
        other.rank(self)
    }
}

/// The `k` largest values of each row of `row_len` elements of `src` (native
/// bytes of `element`), best first: indices within the row and values as
/// f32. Ties go to the lower index; NaN ranks last. Reads `src` in place and
/// keeps only k candidates per row.
pub fn topk(src: &[u8], element: ElementType, row_len: usize, k: usize) -> Result<(Vec<usize>, Vec<f32>)> {
    let size = element_size(element);
    let row_bytes = row_len.checked_mul(size).filter(|&b| b > 0);
    let Some(row_bytes) = row_bytes.filter(|&b| src.len().is_multiple_of(b)) else {
        bail!("{} bytes do not hold whole rows of {row_len} {element:?} values", src.len());
    };
    if k == 0 || k > row_len {
        bail!("k = {k} but each row has {row_len} values: k must be from 1 to {row_len}");
    }
    let rows = src.len() / row_bytes;
    let (mut indices, mut values) = (Vec::with_capacity(rows * k), Vec::with_capacity(rows * k));
    with_elem!(element, T => {
        let mut heap = BinaryHeap::with_capacity(k + 1);
        for row in src.chunks_exact(row_bytes) {
            heap.clear();
            for (i, b) in row.chunks_exact(T::SIZE).enumerate() {
                let candidate = Ranked(T::load(b), i);
                if heap.len() < k {
                    heap.push(candidate);
                } else if candidate.rank(heap.peek().unwrap()) == Ordering::Greater {
                    heap.pop();
                    heap.push(candidate);
                }
            }
            // Ascending in `Ord` is best first.
            for Ranked(v, i) in std::mem::take(&mut heap).into_sorted_vec() {
                indices.push(i);
                values.push(v);
            }
        }
    });
    Ok((indices, values))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_that_wrap_or_divide_by_zero_are_errors_not_panics() {
        let huge = 1usize << 62;
        assert!(packed_to_planar(&[], ElementType::F32, huge, &mut [], 1).is_err());
        assert!(packed_to_planar(&[], ElementType::F32, 3, &mut [], 3).is_ok()); // no pixel: nothing to do
        assert!(planar_to_packed(&[], 1, &mut [], ElementType::F32, huge, 0.0).is_err());
        assert!(topk(&[], ElementType::F32, huge, 1).is_err());
        assert!(topk(&[], ElementType::F32, usize::MAX, usize::MAX).is_err());
        let q = Quantization { scale: vec![1.0, 2.0], zero_point: vec![0], inner: huge };
        assert!(quantize(&[0.0f32; 4], &mut [0i8; 4], &q, None).is_err());
        assert!(dequantize(&[0i8; 4], &mut [0.0f32; 4], &q, None).is_err());
    }

    #[test]
    fn quantize_rounds_half_to_even_and_saturates() {
        let src =
            [0.5f32, 1.5, 2.5, -0.5, -1.5, 1000.0, -1000.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.49999997];
        let mut q = [0i8; 11];
        quantize(&src, &mut q, &Quantization::per_tensor(1.0, 3), Some(SimdLevel::Scalar)).unwrap();
        assert_eq!(q, [3, 5, 5, 3, 1, 127, -128, 3, 127, -128, 3]);
        for level in SimdLevel::available() {
            let mut again = [0i8; 11];
            quantize(&src, &mut again, &Quantization::per_tensor(1.0, 3), Some(level)).unwrap();
            assert_eq!(again, q, "{level}");
        }
    }

    #[test]
    fn per_channel_runs_follow_the_axis() {
        // Shape (2, 3, 2) with the channel axis 1: runs of 2.
        let src: Vec<u8> = (0..12).collect();
        let q = Quantization { scale: vec![1.0, 2.0, 4.0], zero_point: vec![0, 1, 2], inner: 2 };
        let mut out = vec![0f32; 12];
        dequantize(&src, &mut out, &q, None).unwrap();
        assert_eq!(out, [0., 1., 2., 4., 8., 12., 6., 7., 14., 16., 32., 36.]);
        let bad = Quantization { inner: 5, ..q };
        assert!(dequantize(&src, &mut out, &bad, None).unwrap_err().message.contains("tile"));
    }

    #[test]
    fn topk_prefers_high_values_then_low_indices_and_puts_nan_last() {
        let v = [1.0f32, f32::NAN, 3.0, 3.0, -0.0, 0.0];
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
        let (i, x) = topk(&bytes, ElementType::F32, 6, 6).unwrap();
        assert_eq!(i, [2, 3, 0, 4, 5, 1]);
        assert_eq!(&x[..3], &[3.0, 3.0, 1.0]);
        assert!(topk(&bytes, ElementType::F32, 6, 7).is_err());
    }

    #[test]
    fn planar_and_packed_round_trip() {
        let planes = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let mut packed = vec![0u8; 2 * 4 * 2];
        planar_to_packed(&planes, 3, &mut packed, ElementType::Bf16, 4, 9.0).unwrap();
        let mut back = vec![0f32; 8];
        packed_to_planar(&packed, ElementType::Bf16, 4, &mut back, 4).unwrap();
        assert_eq!(back, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 9.0, 9.0]);
    }

    #[test]
    fn slice_paths_agree_with_scalar() {
        let values: Vec<f32> = (0..5000u32)
            .map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761)))
            .chain([f32::NAN, -0.0, f32::MIN_POSITIVE / 3.0, 65520.0, 65519.0])
            .collect();
        for level in SimdLevel::available() {
            let mut bf = vec![0u16; values.len()];
            f32_slice_to_bf16(&values, &mut bf, level);
            let mut h = vec![0u16; values.len()];
            f32_slice_to_f16(&values, &mut h, level);
            for (i, &x) in values.iter().enumerate() {
                assert_eq!(bf[i], f32_to_bf16(x), "{level} bf16 of {x:e}");
                if !x.is_nan() {
                    assert_eq!(h[i], f32_to_f16(x), "{level} f16 of {x:e}");
                }
            }
            let mut back = vec![0f32; values.len()];
            f16_slice_to_f32(&h, &mut back, level);
            for (i, &b) in h.iter().enumerate() {
                assert_eq!(back[i].to_bits(), f16_to_f32(b).to_bits(), "{level} f16 {b:#x}");
            }
        }
    }

    /// Every f16 bit pattern (NaN payloads, subnormals, both zeros) to f32
    /// and back, and f32 NaNs with payloads to f16, on every level: the bits
    /// the portable conversions give.
    #[test]
    fn f16_slices_are_exact_for_every_half_and_nan_payload() {
        let all: Vec<u16> = (0..=u16::MAX).collect();
        let nans: Vec<f32> =
            [0x7F80_0001u32, 0x7F80_2000, 0x7FA0_0000, 0x7FC0_0000, 0x7FC0_1FFF, 0x7FD5_5555, 0x7FFF_FFFF]
                .into_iter()
                .flat_map(|b| [f32::from_bits(b), f32::from_bits(b | 0x8000_0000)])
                .collect();
        for level in SimdLevel::available() {
            let mut wide = vec![0f32; all.len()];
            f16_slice_to_f32(&all, &mut wide, level);
            for (&h, w) in all.iter().zip(&wide) {
                assert_eq!(w.to_bits(), f16_to_f32(h).to_bits(), "{level} f32 of f16 {h:#06x}");
            }
            let mut narrow = vec![0u16; all.len()];
            f32_slice_to_f16(&wide, &mut narrow, level);
            for (i, (&h, &n)) in all.iter().zip(&narrow).enumerate() {
                assert_eq!(n, f32_to_f16(wide[i]), "{level} f16 of f32 {:#010x}", wide[i].to_bits());
                // Every half survives the round trip, but signalling NaNs come back quiet.
                let quieted = if h & 0x7C00 == 0x7C00 && h & 0x3FF != 0 { h | 0x200 } else { h };
                assert_eq!(n, quieted, "{level} round trip of {h:#06x}");
            }
            let mut from_nans = vec![0u16; nans.len()];
            f32_slice_to_f16(&nans, &mut from_nans, level);
            for (x, h) in nans.iter().zip(from_nans) {
                assert_eq!(h, f32_to_f16(*x), "{level} f16 of NaN {:#010x}", x.to_bits());
            }
        }
    }
}
