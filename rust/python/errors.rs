//! Maps core errors to the exception classes of `npu_zc.errors`: subclasses of
//! `npu_zc.Error` that are also the matching built-in (polars-style: one class
//! per kind of error). The classes live in Python, where multiple inheritance
//! from built-ins is natural.

use pyo3::prelude::*;

use crate::buffer::{Error, ErrorKind};
use crate::capture;

fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::NotFound => "HeapNotFoundError",
        ErrorKind::PermissionDenied => "HeapPermissionError",
        ErrorKind::OutOfMemory => "OutOfMemoryError",
        ErrorKind::InvalidInput => "InvalidArgumentError",
        ErrorKind::Busy => "BufferInUseError",
        ErrorKind::Timeout => "PoolExhaustedError",
        ErrorKind::FenceTimeout => "FenceTimeoutError",
        ErrorKind::Closed => "BufferClosedError",
        ErrorKind::Protocol => "PeerError",
        ErrorKind::Os => "BufferOSError",
    }
}

pub fn to_py(err: Error) -> PyErr {
    make(class_name(err.kind), err.message, err.errno)
}

fn capture_class_name(kind: capture::ErrorKind) -> &'static str {
    use capture::ErrorKind as K;
    match kind {
        K::NotFound => "CameraNotFoundError",
        K::PermissionDenied => "CameraPermissionError",
        K::NotACamera => "NotACameraError",
        K::Unsupported => "CameraFormatError",
        K::Busy => "CameraBusyError",
        K::Timeout => "CameraTimeoutError",
        K::FramesHeld => "FramesHeldError",
        K::Disconnected => "CameraDisconnectedError",
        K::Closed => "CameraClosedError",
        K::Os => "CameraOSError",
        K::Buffer(kind) => class_name(kind),
    }
}

/// Capture errors: `npu_zc.CameraError` subclasses (buffer errors keep their classes).
pub fn capture_to_py(err: capture::Error) -> PyErr {
    make(capture_class_name(err.kind), err.message, err.errno)
}

fn make(class: &str, message: String, errno: Option<i32>) -> PyErr {
    Python::attach(|py| {
        let made = py
            .import("npu_zc.errors")
            .and_then(|m| m.getattr(class))
            .and_then(|cls| cls.call1((message, errno)));
        match made {
            Ok(instance) => PyErr::from_value(instance),
            // The errors module itself failed to import: still say what happened.
            Err(import_error) => import_error,
        }
    })
}

/// `?` on core results inside PyO3 functions.
pub trait IntoPyResult<T> {
    fn py_err(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, Error> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

pub fn invalid(message: impl Into<String>) -> PyErr {
    to_py(Error::invalid(message))
}

pub fn error(kind: ErrorKind, message: impl Into<String>) -> PyErr {
    to_py(Error::new(kind, message))
}
