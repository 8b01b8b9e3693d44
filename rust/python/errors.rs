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
        ErrorKind::HeapPermission => "HeapPermissionError",
        ErrorKind::PermissionDenied => "BufferPermissionError",
        ErrorKind::OutOfMemory => "OutOfMemoryError",
        ErrorKind::InvalidInput => "InvalidArgumentError",
        ErrorKind::Busy => "BufferInUseError",
        ErrorKind::Timeout => "PoolExhaustedError",
        ErrorKind::PeerTimeout => "PeerTimeoutError",
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
        let made =
            py.import("npu_zc.errors").and_then(|m| m.getattr(class)).and_then(|cls| cls.call1((message, errno)));
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

/// `npu_zc.AliasingError` (an InvalidArgumentError): a call's arguments share memory it writes.
pub fn aliasing(message: impl Into<String>) -> PyErr {
    make("AliasingError", message.into(), None)
}

pub fn error(kind: ErrorKind, message: impl Into<String>) -> PyErr {
    to_py(Error::new(kind, message))
}

/// A non-negative integer argument read from Python: a size, count, index or
/// pixel dimension. A negative or too large value is an InvalidArgumentError
/// naming the argument, not PyO3's OverflowError; a non-integer stays a TypeError.
pub fn non_negative(value: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    match value.extract::<usize>() {
        Ok(n) => Ok(n),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(value.py()) => {
            Err(invalid(if value.lt(0).unwrap_or(false) {
                format!("{what} must be 0 or more, got {value}")
            } else {
                format!("{what} {value} is too large (at most {})", usize::MAX)
            }))
        }
        Err(e) => Err(e),
    }
}

/// `non_negative` as an argument type, for functions with many integer arguments.
#[derive(Debug, Clone, Copy)]
pub struct Count(pub usize);

impl<'a, 'py> FromPyObject<'a, 'py> for Count {
    type Error = PyErr;

    fn extract(value: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        non_negative(&value, "an integer argument").map(Count)
    }
}
