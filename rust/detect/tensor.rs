//! Views of a model's output where it lies: any element type, any strides.
//!
//! A [`Tensor`] is a byte slice plus shape and byte strides (negative ones
//! too, as numpy makes them). Construction checks that every element it can
//! address lies inside the slice, so reads never go out of bounds.

use super::error::{bail, Result};
use crate::simd::{bf16_slice_to_f32, f16_slice_to_f32, SimdLevel};

/// How the model wrote its numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Element {
    F32,
    F16,
    Bf16,
    /// `real = (q - zero_point) * scale`
    I8 {
        scale: f32,
        zero_point: i32,
    },
    U8 {
        scale: f32,
        zero_point: i32,
    },
}

impl Element {
    pub fn size(self) -> usize {
        match self {
            Element::F32 => 4,
            Element::F16 | Element::Bf16 => 2,
            Element::I8 { .. } | Element::U8 { .. } => 1,
        }
    }

    /// Parses "f32" | "f16" | "bf16" | "i8" | "u8" (numpy names too); integers need `quant`.
    pub fn parse(name: &str, quant: Option<(f32, i32)>) -> Result<Element> {
        let element = match name.to_ascii_lowercase().as_str() {
            "f32" | "float32" => Element::F32,
            "f16" | "float16" => Element::F16,
            "bf16" | "bfloat16" => Element::Bf16,
            "i8" | "int8" | "u8" | "uint8" => {
                let Some((scale, zero_point)) = quant else {
                    bail!("an {name} output needs quant=(scale, zero_point), the model's dequantization parameters");
                };
                if !scale.is_finite() || scale == 0.0 {
                    bail!("quant scale must be a finite number other than 0, got {scale}");
                }
                if name.starts_with('i') {
                    if !(-128..=127).contains(&zero_point) {
                        bail!("an int8 zero point must lie in -128..=127, got {zero_point}");
                    }
                    Element::I8 { scale, zero_point }
                } else {
                    if !(0..=255).contains(&zero_point) {
                        bail!("a uint8 zero point must lie in 0..=255, got {zero_point}");
                    }
                    Element::U8 { scale, zero_point }
                }
            }
            _ => {
                bail!("outputs of element type {name} cannot be decoded: use float32, float16, bfloat16, int8 or uint8")
            }
        };
        if quant.is_some() && matches!(element, Element::F32 | Element::F16 | Element::Bf16) {
            bail!("quant=(scale, zero_point) is for int8/uint8 outputs, not {name}");
        }
        Ok(element)
    }

    #[inline(always)]
    fn load(self, b: &[u8]) -> f32 {
        match self {
            Element::F32 => f32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            Element::F16 => crate::simd::f16_to_f32(u16::from_ne_bytes([b[0], b[1]])),
            Element::Bf16 => crate::simd::bf16_to_f32(u16::from_ne_bytes([b[0], b[1]])),
            Element::I8 { scale, zero_point } => (b[0] as i8 as i32 - zero_point) as f32 * scale,
            Element::U8 { scale, zero_point } => (b[0] as i32 - zero_point) as f32 * scale,
        }
    }
}

/// An n-dimensional view of elements in `data`.
#[derive(Debug, Clone)]
pub struct Tensor<'a> {
    data: &'a [u8],
    element: Element,
    /// Byte offset of element [0, 0, ...] in `data`.
    origin: usize,
    shape: Vec<usize>,
    /// Byte steps per axis.
    strides: Vec<isize>,
}

impl<'a> Tensor<'a> {
    /// Checks that every element the view can address lies in `data`.
    pub fn new(data: &'a [u8], element: Element, origin: usize, shape: &[usize], strides: &[isize]) -> Result<Self> {
        if shape.len() != strides.len() {
            bail!("a tensor of shape {shape:?} needs {} strides, got {strides:?}", shape.len());
        }
        let size = element.size() as i128;
        let (mut lo, mut hi) = (origin as i128, origin as i128);
        if !shape.contains(&0) {
            for (&n, &s) in shape.iter().zip(strides) {
                let reach = (n as i128 - 1) * s as i128;
                if reach < 0 {
                    lo += reach;
                } else {
                    hi += reach;
                }
            }
            if lo < 0 || hi + size > data.len() as i128 {
                bail!(
                    "a tensor of shape {shape:?} with byte strides {strides:?} reaches bytes {lo}..{} of a {}-byte buffer",
                    hi + size,
                    data.len()
                );
            }
        }
        Ok(Tensor { data, element, origin, shape: shape.to_vec(), strides: strides.to_vec() })
    }

    /// A C-contiguous tensor over the whole of `data`.
    pub fn contiguous(data: &'a [u8], element: Element, shape: &[usize]) -> Result<Self> {
        let mut strides = vec![0isize; shape.len()];
        let mut step = element.size() as isize;
        for (s, &n) in strides.iter_mut().zip(shape).rev() {
            *s = step;
            step *= n.max(1) as isize;
        }
        Self::new(data, element, 0, shape, &strides)
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn element(&self) -> Element {
        self.element
    }

    /// The 2-D matrix left when leading axes of size 1 are dropped (a batch of one).
    pub fn matrix(&self) -> Result<Matrix<'a>> {
        let t = self.squeeze_to(2)?;
        Ok(Matrix {
            data: t.data,
            element: t.element,
            origin: t.origin as isize,
            rows: t.shape[0],
            cols: t.shape[1],
            row_stride: t.strides[0],
            col_stride: t.strides[1],
        })
    }

    /// Drops leading axes of size 1 until `rank` axes are left.
    pub fn squeeze_to(&self, rank: usize) -> Result<Tensor<'a>> {
        let extra = self.shape.len().saturating_sub(rank);
        if self.shape.len() < rank || self.shape[..extra].iter().any(|&n| n != 1) {
            bail!("expected a tensor of {rank} axes (after a batch of 1), got shape {:?}", self.shape);
        }
        Ok(Tensor {
            data: self.data,
            element: self.element,
            origin: self.origin,
            shape: self.shape[extra..].to_vec(),
            strides: self.strides[extra..].to_vec(),
        })
    }

    /// All elements as one f32 slice in C order, when the tensor is packed
    /// f32 (C-contiguous, aligned): read in place.
    pub fn packed_f32(&self) -> Option<&'a [f32]> {
        let mut step = 4isize;
        for (&n, &s) in self.shape.iter().zip(&self.strides).rev() {
            if n > 1 && s != step {
                return None;
            }
            step *= n as isize;
        }
        let len: usize = self.shape.iter().product();
        if self.element != Element::F32 || len == 0 {
            return None;
        }
        // SAFETY: every bit pattern is a valid f32; only a whole aligned span is used.
        let (head, values, _) = unsafe { self.data.get(self.origin..self.origin + len * 4)?.align_to::<f32>() };
        (head.is_empty() && values.len() == len).then_some(values)
    }

    pub(crate) fn byte_offset(&self, index: &[usize]) -> usize {
        let mut at = self.origin as isize;
        for (&i, &s) in index.iter().zip(&self.strides) {
            at += i as isize * s;
        }
        at as usize
    }

    pub(crate) fn get(&self, index: &[usize]) -> f32 {
        let at = self.byte_offset(index);
        self.element.load(&self.data[at..at + self.element.size()])
    }
}

/// A 2-D view: `get(r, c)` reads the element at row r, column c.
#[derive(Debug, Clone, Copy)]
pub struct Matrix<'a> {
    data: &'a [u8],
    element: Element,
    origin: isize,
    pub rows: usize,
    pub cols: usize,
    row_stride: isize,
    col_stride: isize,
}

/// Element types any bit pattern of which is a value: what [`Matrix::packed`] may view bytes as.
///
/// # Safety
/// Every bit pattern of the type's size must be a valid value.
pub unsafe trait Packed: Copy {}
// SAFETY: every bit pattern is an f32 (NaNs included) and a u16.
unsafe impl Packed for f32 {}
// SAFETY: as above.
unsafe impl Packed for u16 {}

/// Elements converted to f32 per call of [`Matrix::row_chunks`].
pub const CHUNK: usize = 512;

impl<'a> Matrix<'a> {
    #[inline(always)]
    pub fn get(&self, r: usize, c: usize) -> f32 {
        let at = (self.origin + r as isize * self.row_stride + c as isize * self.col_stride) as usize;
        self.element.load(&self.data[at..at + self.element.size()])
    }

    /// The same elements with rows and columns swapped.
    pub fn transposed(&self) -> Matrix<'a> {
        Matrix { rows: self.cols, cols: self.rows, row_stride: self.col_stride, col_stride: self.row_stride, ..*self }
    }

    /// Calls `f(start, values)` over row `r`, columns in order, in chunks of
    /// up to [`CHUNK`] values converted to f32 (SIMD conversion where the row
    /// is packed: the hot path of the threshold scan).
    #[inline]
    pub fn row_chunks(&self, r: usize, scratch: &mut [f32; CHUNK], f: impl FnMut(usize, &[f32])) {
        self.row_chunks_in(r, 0..self.cols, scratch, f)
    }

    pub fn element(&self) -> Element {
        self.element
    }

    /// Rows `first..first + count`, columns `start..start + width` as one
    /// slice of `T` (f32, or u16 for the bits of f16 and bf16) and its row
    /// stride in elements, when the matrix holds elements of `T`'s size,
    /// packed along rows, with aligned rows: read in place, no conversion.
    pub fn packed<T: Packed>(
        &self,
        first: usize,
        start: usize,
        count: usize,
        width: usize,
    ) -> Option<(&'a [T], usize)> {
        let size = std::mem::size_of::<T>() as isize;
        let stride = self.row_stride / size;
        if self.element.size() as isize != size || self.col_stride != size || self.row_stride % size != 0 || stride < 0
        {
            return None;
        }
        if count == 0 || width == 0 || first + count > self.rows || start + width > self.cols {
            return None;
        }
        let at = (self.origin + first as isize * self.row_stride + start as isize * size) as usize;
        let len = (count - 1) * stride as usize + width;
        // SAFETY: every bit pattern is a valid T (Packed); align_to returns only
        // the aligned middle, accepted when it is the whole span.
        let (head, values, _) = unsafe { self.data.get(at..at + len * size as usize)?.align_to::<T>() };
        (head.is_empty() && values.len() == len).then_some((values, stride as usize))
    }

    /// [`Matrix::row_chunks`] over columns `cols` only.
    #[inline]
    pub fn row_chunks_in(
        &self,
        r: usize,
        cols: std::ops::Range<usize>,
        scratch: &mut [f32; CHUNK],
        mut f: impl FnMut(usize, &[f32]),
    ) {
        let size = self.element.size();
        let packed = self.col_stride == size as isize;
        let (first, count) = (cols.start, cols.end.min(self.cols).saturating_sub(cols.start));
        if packed && self.element == Element::F32 && count > 0 {
            let at = (self.origin + r as isize * self.row_stride + first as isize * 4) as usize;
            // SAFETY: every bit pattern is a valid f32; align_to returns only the
            // aligned middle, accepted when it is the whole range (numpy aligns).
            let (head, row, _) = unsafe { self.data[at..at + count * 4].align_to::<f32>() };
            if head.is_empty() && row.len() == count {
                f(first, row);
                return;
            }
        }
        let aligned16 = |bytes: &'a [u8]| {
            // SAFETY: every bit pattern is a valid u16; only a whole aligned middle is used.
            let (head, words, tail) = unsafe { bytes.align_to::<u16>() };
            (head.is_empty() && tail.is_empty()).then_some(words)
        };
        let mut bits = [0u16; CHUNK];
        let level = SimdLevel::default_level();
        for start in (first..first + count).step_by(CHUNK) {
            let n = CHUNK.min(first + count - start);
            let out = &mut scratch[..n];
            if packed {
                let at = (self.origin + r as isize * self.row_stride + start as isize * self.col_stride) as usize;
                let bytes = &self.data[at..at + n * size];
                match self.element {
                    Element::F32 => {
                        for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                            *o = f32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
                        }
                    }
                    Element::F16 | Element::Bf16 => {
                        let words = match aligned16(bytes) {
                            Some(words) => words,
                            None => {
                                for (w, b) in bits.iter_mut().zip(bytes.chunks_exact(2)) {
                                    *w = u16::from_ne_bytes([b[0], b[1]]);
                                }
                                &bits[..n]
                            }
                        };
                        if self.element == Element::F16 {
                            f16_slice_to_f32(words, out, level);
                        } else {
                            bf16_slice_to_f32(words, out, level);
                        }
                    }
                    Element::I8 { scale, zero_point } => {
                        for (o, &b) in out.iter_mut().zip(bytes) {
                            *o = (b as i8 as i32 - zero_point) as f32 * scale;
                        }
                    }
                    Element::U8 { scale, zero_point } => {
                        for (o, &b) in out.iter_mut().zip(bytes) {
                            *o = (b as i32 - zero_point) as f32 * scale;
                        }
                    }
                }
            } else {
                for (k, o) in out.iter_mut().enumerate() {
                    *o = self.get(r, start + k);
                }
            }
            f(start, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_element_type_and_checks_bounds() {
        let data: Vec<u8> = [1.5f32, -2.0, 3.25, 4.0].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let t = Tensor::contiguous(&data, Element::F32, &[1, 2, 2]).unwrap();
        let m = t.matrix().unwrap();
        assert_eq!((m.get(0, 1), m.get(1, 0)), (-2.0, 3.25));
        assert_eq!(m.transposed().get(0, 1), 3.25);
        assert!(Tensor::new(&data, Element::F32, 0, &[2, 2], &[8, 8]).is_err());
        assert!(Tensor::new(&data, Element::F32, 0, &[2, 2], &[-4, 8]).is_err());
        let flipped = Tensor::new(&data, Element::F32, 4, &[2, 2], &[-4, 8]).unwrap().matrix().unwrap();
        assert_eq!(flipped.get(1, 1), 3.25);
        let q = Tensor::contiguous(&[0u8, 255], Element::U8 { scale: 0.5, zero_point: 1 }, &[1, 2]).unwrap();
        assert_eq!(q.matrix().unwrap().get(0, 1), 127.0);
        let q = Tensor::contiguous(&[0x80u8, 3], Element::I8 { scale: 0.25, zero_point: -1 }, &[2, 1]).unwrap();
        assert_eq!(q.matrix().unwrap().get(0, 0), -31.75);
    }

    #[test]
    fn quant_params_are_checked() {
        assert!(Element::parse("int8", None).is_err());
        assert!(Element::parse("int8", Some((0.0, 0))).is_err());
        assert!(Element::parse("int8", Some((0.1, 200))).is_err());
        assert!(Element::parse("float32", Some((0.1, 0))).is_err());
        assert!(Element::parse("uint8", Some((f32::NAN, 0))).is_err());
        assert_eq!(Element::parse("uint8", Some((0.5, 3))).unwrap(), Element::U8 { scale: 0.5, zero_point: 3 });
    }
}
