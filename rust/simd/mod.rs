//! The instruction sets the hot loops run, shared by the layout engine and
//! the YOLO decode:
//!
//! * [`SimdLevel`]: which instruction set, picked once from the CPU (or
//!   `NPU_ZC_SIMD`), or per call.
//! * `stamp!`: code written once, compiled per instruction set with its
//!   `#[target_feature]`s (the layout engine's kernel families build on it).
//! * The 16-bit floats: scalar bf16/f16 conversions (the reference) and the
//!   slice conversions that run a given level's instructions.
//!
//! Nothing here knows a frame or a tensor: `layout` and `detect` use this
//! room, never the other way round.

mod float;
mod level;
#[cfg(target_arch = "aarch64")]
pub(crate) mod neon;
mod slices;
mod stamp;

pub use float::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
pub use level::{LevelError, SimdLevel};
pub use slices::{bf16_slice_to_f32, f16_slice_to_f32, f32_slice_to_bf16, f32_slice_to_f16};
pub(crate) use stamp::stamp;
