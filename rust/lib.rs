//! npu_zc: the Rust core of a zero-copy NPU inference pipeline.
//!
//! * [`analytics`] counts over a stream's tracks: lines crossed, zones entered and
//!   left, dwell (supervision's rules).
//! * [`buffer`] owns every syscall: DMA-BUF allocation (dma-buf heaps, udmabuf,
//!   memfd), import/export, fd passing, mmap, CPU-access sync and pools.
//! * [`capture`] brings camera frames in: V4L2 capture straight into DMA-BUFs.
//! * [`detect`] decodes YOLO detectors' outputs in place (threshold, NMS, masks)
//!   and tracks what they find (ByteTrack).
//! * [`layout`] owns every hot loop: conversion of frames into the packed
//!   layouts NPUs read (RGBx u8, RGBx_BF16, RGBx_FP16) and back.
//! * [`simd`]: the instruction sets those loops run (the level, stamping code
//!   written once per instruction set, the 16-bit floats), for `layout` and `detect`.
//!
//! The Python bindings live in `python` behind the `python` cargo feature, so
//! the core builds, tests and benches without a Python interpreter.

pub mod analytics;
pub mod buffer;
pub mod capture;
pub mod detect;
pub mod layout;
pub mod simd;

#[cfg(feature = "python")]
mod python;
