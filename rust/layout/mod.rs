//! Layout engine: frames into the layouts NPUs read natively, and results back.
//!
//! * [`convert`]: a u8 frame (BGR, RGB, BGRA, RGBA, GRAY, NV12) into packed HW
//!   layouts (RGBx, BGRx, RGBx_BF16, RGBx_FP16) or CPU layouts (planar
//!   RGBP_FLOAT, RGBP_FP16, BGRP_FLOAT, BGRP_FP16; packed RGB, BGR, RGB_FLOAT,
//!   BGR_FLOAT), with per-channel `(x - mean) / scale` fused into the same
//!   pass, written into a caller's buffer at any row pitch.
//! * The way back: [`quantize`]/[`dequantize`], 16-bit floats to and from f32,
//!   planar <-> packed, and [`topk`] over an output buffer read in place.
//! * [`select_format`]: which destination format a model input needs.
//!
//! Every result is bit-exact with the scalar reference (numpy / ml_dtypes
//! arithmetic in f32); SIMD paths (AVX2, AVX-512, NEON) are chosen at run time.

mod colour;
mod convert;
mod error;
mod format;
mod frame;
mod kernels;
mod output;
mod parallel;
mod plan;
mod recent;
mod resize;

pub use colour::{Colour, Matrix, Range, Rounding};
pub use convert::{convert, describe, describe_resize, Options};
pub use error::{LayoutError, Result};
pub use format::{
    frame_geometry, frame_nbytes, select_format, Channel, Element, ElementType, Format, FrameGeometry, TensorLayout,
};
pub use frame::{check_destination_size, Destination, Rows, RowsMut, Source, SourcePixels};
pub use output::{
    dequantize, from_float32, packed_to_planar, planar_to_packed, quantize, to_float32, topk, QuantInt, Quantization,
};
pub use parallel::memcpy_seconds;
pub use resize::{Fit, Interpolation, Rect, Resize, Transform};
// The instruction set and the 16-bit floats are the `simd` room's; the layout
// API takes and gives them, so they are named here too.
pub use crate::simd::{
    bf16_slice_to_f32, bf16_to_f32, f16_slice_to_f32, f16_to_f32, f32_slice_to_bf16, f32_slice_to_f16, f32_to_bf16,
    f32_to_f16, SimdLevel,
};
