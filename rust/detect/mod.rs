//! YOLO detectors' outputs decoded where the model wrote them.
//!
//! * [`tensor`]: views of an output buffer in any element type (f32, f16,
//!   bf16, quantized int8/u8) and any strides, checked once, read in place.
//! * [`layout`]: the families (anchor-free, end-to-end, classic YOLOv5) and
//!   tasks (detect, segment, pose, obb) of Ultralytics' exports.
//! * [`scan`]: each anchor's best class score, SIMD, in place.
//! * [`decode`]: threshold, best class, sort and NMS by Ultralytics' rules.
//! * [`decoder`]: one frame's whole decode (boxes, masks, keypoints, to the
//!   frame), its settings checked once: what the Python binding calls.
//! * [`nms`]: greedy NMS as torchvision runs it, rotated fast NMS with probiou.
//! * [`geometry`]: boxes, keypoints and rotated boxes back to frame pixels.
//! * [`mask`]: segmentation masks of the boxes kept (Ultralytics' `process_mask`).
//! * [`track`]: ByteTrack over a stream's detections (Ultralytics' `BYTETracker`).

pub mod decode;
pub mod decoder;
mod error;
pub mod geometry;
pub mod layout;
pub mod mask;
pub mod nms;
pub mod scan;
pub mod tensor;
pub mod track;

pub use decode::{decode, Decoded, Params};
pub use decoder::{Decoder, Output};
pub use error::{bail_value, DetectError, ErrorKind, Result};
pub use geometry::Geometry;
pub use layout::{Family, Layout, Task};
pub use tensor::{Element, Matrix, Tensor};

#[cfg(test)]
mod tests;
