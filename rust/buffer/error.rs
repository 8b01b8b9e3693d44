//! The error shape of the cores that make syscalls: a kind (what the caller
//! can do about it), the errno when the kernel gave one, and a sentence for a
//! person. The buffer core's kinds are here; the capture core uses the same
//! type with its own kinds (`capture::Error`).

use std::fmt;

/// What went wrong, in terms a caller can act on. The Python layer maps each
/// kind to a subclass of `npu_zc.Error` that is also the matching built-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// No such heap, device or file (FileNotFoundError).
    NotFound,
    /// The heap or device exists but this user may not open it (PermissionError).
    HeapPermission,
    /// The kernel refused an operation on a buffer: EACCES/EPERM, e.g. mapping
    /// for writing an fd opened read-only or sealed against writes (PermissionError).
    PermissionDenied,
    /// The kernel could not find the memory (MemoryError).
    OutOfMemory,
    /// Bad size, fd, range, dtype or shape (ValueError).
    InvalidInput,
    /// The buffer is still in use: views alive, a sync bracket open (BufferError).
    Busy,
    /// A pool had no free buffer within the time allowed (TimeoutError). Only
    /// the pool says this: a kernel's ETIMEDOUT is `Os`.
    PoolExhausted,
    /// Nothing arrived from the peer within the time allowed; the stream is
    /// intact (TimeoutError).
    PeerTimeout,
    /// A device's fence on a DMA-BUF did not signal within the time allowed (TimeoutError).
    FenceTimeout,
    /// The buffer was closed already.
    Closed,
    /// The peer closed the connection, or sent something that is not ours.
    Protocol,
    /// Anything else the kernel said (OSError).
    Os,
}

/// An error of kind `K` (the buffer core's by default).
#[derive(Debug, Clone)]
pub struct Error<K = ErrorKind> {
    pub kind: K,
    pub errno: Option<i32>,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl<K> Error<K> {
    pub fn new(kind: K, message: impl Into<String>) -> Self {
        Error { kind, errno: None, message: message.into() }
    }

    /// The same error with a hint appended (what to do about it).
    pub fn hint(mut self, hint: impl fmt::Display) -> Self {
        self.message = format!("{} ({hint})", self.message);
        self
    }
}

impl Error {
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, message)
    }

    /// An error from a syscall: the kind follows the errno, the message says
    /// what we were doing (`context`) and what the kernel answered.
    pub fn from_errno(errno: rustix::io::Errno, context: impl fmt::Display) -> Self {
        use rustix::io::Errno;
        let kind = match errno {
            Errno::NOENT | Errno::NODEV | Errno::NXIO => ErrorKind::NotFound,
            Errno::ACCESS | Errno::PERM => ErrorKind::PermissionDenied,
            Errno::NOMEM | Errno::NOSPC => ErrorKind::OutOfMemory,
            // EBADF stays an OSError: a closed fd where one was expected is the
            // kernel's answer, not a bad value (callers that validate an fd
            // argument say so themselves).
            Errno::INVAL | Errno::NOTTY | Errno::FBIG | Errno::OVERFLOW => ErrorKind::InvalidInput,
            Errno::BUSY => ErrorKind::Busy,
            _ => ErrorKind::Os,
        };
        Error { kind, errno: Some(errno.raw_os_error()), message: format!("{context}: {}", errno_text(errno)) }
    }
}

/// The kernel's words for an errno ("No such file or directory"), without
/// std's " (os error N)": errors carry the number separately.
pub fn errno_text(errno: rustix::io::Errno) -> String {
    let text = std::io::Error::from_raw_os_error(errno.raw_os_error()).to_string();
    match text.split_once(" (os error") {
        Some((words, _)) => words.to_string(),
        None => text,
    }
}

impl<K> fmt::Display for Error<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<K: fmt::Debug> std::error::Error for Error<K> {}

/// `?` on a bare errno inside a function that has no better context.
pub(crate) trait Context<T> {
    fn context(self, what: impl fmt::Display) -> Result<T>;
}

impl<T> Context<T> for rustix::io::Result<T> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::from_errno(e, what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::io::Errno;

    #[test]
    fn a_kernel_timeout_is_an_os_error_not_an_empty_pool() {
        let e = Error::from_errno(Errno::TIMEDOUT, "ioctl on fd 3");
        assert_eq!(e.kind, ErrorKind::Os);
        assert_eq!(e.errno, Some(Errno::TIMEDOUT.raw_os_error()));
        assert_eq!(e.message, "ioctl on fd 3: Connection timed out");
    }

    #[test]
    fn errno_text_is_the_kernels_words_alone() {
        assert_eq!(errno_text(Errno::NOENT), "No such file or directory");
        assert_eq!(errno_text(Errno::ACCESS), "Permission denied");
    }
}
