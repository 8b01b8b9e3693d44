//! The detector's errors: a sentence for a person, and whether the output's
//! shape fits no YOLO family (`Layout`) or a value is wrong (`Value`).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The outputs' shapes fit no family (or not the one asked for).
    Layout,
    /// Any other bad argument: thresholds, quantization, strides, sizes.
    Value,
    /// Memory for the results could not be had (MemoryError).
    Memory,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetectError {
    pub kind: ErrorKind,
    pub message: String,
}

impl DetectError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        DetectError { kind, message: message.into() }
    }
}

impl fmt::Display for DetectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DetectError {}

pub type Result<T> = std::result::Result<T, DetectError>;

/// `return Err(...)`: a value error with a formatted message.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::detect::DetectError::new($crate::detect::ErrorKind::Value, format!($($arg)*)))
    };
}
/// `return Err(...)`: a layout error with a formatted message.
macro_rules! bail_layout {
    ($($arg:tt)*) => {
        return Err($crate::detect::DetectError::new($crate::detect::ErrorKind::Layout, format!($($arg)*)))
    };
}
pub(crate) use {bail, bail_layout};

/// `Err(...)` of a value error (for callers outside this module).
pub fn bail_value<T>(message: &str) -> Result<T> {
    Err(DetectError::new(ErrorKind::Value, message))
}

/// An empty vector with room for `len` values, or a `Memory` error naming
/// `what` (never an abort on a failed allocation).
pub fn try_vec<T>(len: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        DetectError::new(
            ErrorKind::Memory,
            format!("not enough memory for {what} ({len} values of {} bytes)", std::mem::size_of::<T>()),
        )
    })?;
    Ok(v)
}

/// `len` copies of `value`, allocated as [`try_vec`] does.
pub fn try_filled<T: Clone>(value: T, len: usize, what: &str) -> Result<Vec<T>> {
    let mut v = try_vec(len, what)?;
    v.resize(len, value);
    Ok(v)
}

/// `a * b` for sizes, or a value error naming `what` where it overflows.
pub fn area(a: usize, b: usize, what: &str) -> Result<usize> {
    a.checked_mul(b).ok_or_else(|| DetectError::new(ErrorKind::Value, format!("{what} ({a} x {b}) is too large")))
}
