//! The layout engine's one error: a bad argument, told as a sentence that says
//! what is wrong, why, and what to do. Every check runs before the first byte
//! is written, so an error never leaves a half-written destination.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutError {
    pub message: String,
    /// The memory a conversion needs could not be had (MemoryError), rather
    /// than a bad argument.
    pub out_of_memory: bool,
}

impl LayoutError {
    pub fn new(message: impl Into<String>) -> Self {
        LayoutError { message: message.into(), out_of_memory: false }
    }

    pub fn out_of_memory(message: impl Into<String>) -> Self {
        LayoutError { message: message.into(), out_of_memory: true }
    }
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LayoutError {}

/// An instruction set this CPU cannot run is a bad argument of the call.
impl From<crate::simd::LevelError> for LayoutError {
    fn from(e: crate::simd::LevelError) -> Self {
        LayoutError::new(e.0)
    }
}

pub type Result<T> = std::result::Result<T, LayoutError>;

/// `return Err(...)` with a formatted message.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::layout::LayoutError::new(format!($($arg)*)))
    };
}
pub(crate) use bail;
