//! The detector's errors: a sentence for a person, and whether the output's
//! shape fits no YOLO family (`Layout`) or a value is wrong (`Value`).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The outputs' shapes fit no family (or not the one asked for).
    Layout,
    /// Any other bad argument: thresholds, quantization, strides, sizes.
    Value,
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
