//! The capture core: V4L2 cameras that write each frame straight into a
//! DMA-BUF (ours, imported, or the driver's, exported), so that no byte is
//! copied between the sensor and the result.
//!
//! * [`Device`]: a capture node; capabilities, formats, sizes, controls.
//! * [`Stream`]: streaming into DMA-BUFs; frames held until released.
//! * [`cameras`]: the capture nodes of this machine.
//! * [`ImageView`]: where a frame's pixels lie in its buffer, checked.
//! * [`BufferPlan`], [`start`]: where a camera's frame memory comes from,
//!   and the driver's own when it refuses ours.

mod device;
mod error;
mod image;
mod memory;
mod stream;
mod sys;

pub use device::{
    cameras, CameraInfo, ControlInfo, Device, DeviceInfo, Format, FormatInfo, Fourcc, FrameSizes, SOURCE_FORMATS,
};
pub use error::{Error, ErrorKind, Result};
pub use image::ImageView;
pub use memory::{auto_heap, start, BufferPlan};
pub use stream::{Buffers, Frame, Memory, Stream, WhenFull};

#[cfg(test)]
mod tests;
