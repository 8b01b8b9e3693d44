//! Maps core errors to the exception classes of `npu_zc.errors`: subclasses of
//! `npu_zc.Error` that are also the matching built-in (polars-style: one class
//! per kind of error). The classes live in Python, where multiple inheritance
//! from built-ins is natural; `_core` takes a handle to each when it is
//! imported and checks its bases then, so that a class renamed or re-parented
//! in Python fails `import npu_zc` (and so every test), never a user's error path.
//!
//! A new kind of error: a variant of the core's `ErrorKind`, a class in
//! `python/npu_zc/errors.py`, a line in `classes!` below and an arm in
//! `class_of` (the compiler asks for it).

use pyo3::exceptions::{
    PyBufferError, PyConnectionError, PyFileNotFoundError, PyMemoryError, PyOSError, PyPermissionError, PyTimeoutError,
    PyValueError,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

use crate::buffer::{Error, ErrorKind};
use crate::capture;

/// The exception classes the core raises: `Class::X` is `npu_zc.errors.<name>`,
/// which must also subclass `<built-in>` (and every one `npu_zc.errors.Error`).
macro_rules! classes {
    ($($class:ident => $name:literal, $builtin:ty;)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Class { $($class),* }

        /// Name and built-in base of each class, in `Class`'s order.
        const CLASSES: &[(&str, fn(Python<'_>) -> Bound<'_, PyType>)] =
            &[$(($name, |py| py.get_type::<$builtin>())),*];
    };
}

classes! {
    HeapNotFound => "HeapNotFoundError", PyFileNotFoundError;
    HeapPermission => "HeapPermissionError", PyPermissionError;
    BufferPermission => "BufferPermissionError", PyPermissionError;
    OutOfMemory => "OutOfMemoryError", PyMemoryError;
    InvalidArgument => "InvalidArgumentError", PyValueError;
    BufferInUse => "BufferInUseError", PyBufferError;
    PoolExhausted => "PoolExhaustedError", PyTimeoutError;
    PeerTimeout => "PeerTimeoutError", PyTimeoutError;
    FenceTimeout => "FenceTimeoutError", PyTimeoutError;
    BufferClosed => "BufferClosedError", PyValueError;
    Peer => "PeerError", PyConnectionError;
    BufferOS => "BufferOSError", PyOSError;
    CameraNotFound => "CameraNotFoundError", PyFileNotFoundError;
    CameraPermission => "CameraPermissionError", PyPermissionError;
    NotACamera => "NotACameraError", PyValueError;
    CameraFormat => "CameraFormatError", PyValueError;
    CameraBusy => "CameraBusyError", PyOSError;
    CameraTimeout => "CameraTimeoutError", PyTimeoutError;
    FramesHeld => "FramesHeldError", PyTimeoutError;
    CameraDisconnected => "CameraDisconnectedError", PyOSError;
    CameraClosed => "CameraClosedError", PyValueError;
    CameraOS => "CameraOSError", PyOSError;
    Aliasing => "AliasingError", PyValueError;
    Detect => "DetectError", PyValueError;
    DetectLayout => "DetectLayoutError", PyValueError;
}

fn class_of(kind: ErrorKind) -> Class {
    match kind {
        ErrorKind::NotFound => Class::HeapNotFound,
        ErrorKind::HeapPermission => Class::HeapPermission,
        ErrorKind::PermissionDenied => Class::BufferPermission,
        ErrorKind::OutOfMemory => Class::OutOfMemory,
        ErrorKind::InvalidInput => Class::InvalidArgument,
        ErrorKind::Busy => Class::BufferInUse,
        ErrorKind::PoolExhausted => Class::PoolExhausted,
        ErrorKind::PeerTimeout => Class::PeerTimeout,
        ErrorKind::FenceTimeout => Class::FenceTimeout,
        ErrorKind::Closed => Class::BufferClosed,
        ErrorKind::Protocol => Class::Peer,
        ErrorKind::Os => Class::BufferOS,
    }
}

fn capture_class_of(kind: capture::ErrorKind) -> Class {
    use capture::ErrorKind as K;
    match kind {
        K::NotFound => Class::CameraNotFound,
        K::PermissionDenied => Class::CameraPermission,
        K::NotACamera => Class::NotACamera,
        K::Unsupported => Class::CameraFormat,
        K::Busy => Class::CameraBusy,
        K::Timeout => Class::CameraTimeout,
        K::FramesHeld => Class::FramesHeld,
        K::Disconnected => Class::CameraDisconnected,
        K::Closed => Class::CameraClosed,
        K::Os => Class::CameraOS,
        K::Buffer(kind) => class_of(kind),
    }
}

/// The classes, in `CLASSES`' order, taken from `npu_zc.errors` once.
static TYPES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

/// Takes a handle to every class and checks that each is still an
/// `npu_zc.errors.Error` and its built-in. Called when `_core` is imported:
/// a mismatch is an ImportError that names the class.
pub fn register(py: Python<'_>) -> PyResult<()> {
    types(py).map(|_| ())
}

fn types(py: Python<'_>) -> PyResult<&Vec<Py<PyType>>> {
    TYPES.get_or_try_init(py, || {
        let module = py.import("npu_zc.errors")?;
        let base = module.getattr("Error")?;
        CLASSES
            .iter()
            .map(|(name, builtin)| {
                let missing = |why: String| {
                    pyo3::exceptions::PyImportError::new_err(format!(
                        "npu_zc._core raises npu_zc.errors.{name}, which {why}: \
                         rust/python/errors.rs and python/npu_zc/errors.py must name the same classes"
                    ))
                };
                let class = module
                    .getattr(*name)
                    .map_err(|_| missing("is not there".into()))?
                    .cast_into::<PyType>()
                    .map_err(|_| missing("is not a class".into()))?;
                let builtin = builtin(py);
                if !class.is_subclass(&base)? || !class.is_subclass(&builtin)? {
                    let builtin = builtin.name()?;
                    return Err(missing(format!("must subclass both npu_zc.errors.Error and {builtin}")));
                }
                Ok(class.unbind())
            })
            .collect()
    })
}

fn make(class: Class, message: String, errno: Option<i32>) -> PyErr {
    Python::attach(|py| {
        let made = types(py).and_then(|types| types[class as usize].bind(py).call1((message, errno)));
        match made {
            Ok(instance) => PyErr::from_value(instance),
            // Only if the classes could not be taken at import: still say what happened.
            Err(e) => e,
        }
    })
}

pub fn to_py(err: Error) -> PyErr {
    make(class_of(err.kind), err.message, err.errno)
}

/// Capture errors: `npu_zc.CameraError` subclasses (buffer errors keep their classes).
pub fn capture_to_py(err: capture::Error) -> PyErr {
    make(capture_class_of(err.kind), err.message, err.errno)
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

/// `npu_zc.DetectLayoutError` (outputs of no known family) or `npu_zc.DetectError` (anything else a detector's
/// outputs or parameters get wrong).
pub fn detect(layout: bool, message: String) -> PyErr {
    make(if layout { Class::DetectLayout } else { Class::Detect }, message, None)
}

/// `npu_zc.AliasingError` (an InvalidArgumentError): a call's arguments share memory it writes.
pub fn aliasing(message: impl Into<String>) -> PyErr {
    make(Class::Aliasing, message.into(), None)
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
