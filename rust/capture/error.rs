//! Errors of the capture core: the buffer core's error shape with the
//! capture's own kinds. Each says which device, what went wrong and what to
//! do; the Python layer maps each kind to a class of `npu_zc.errors` (a
//! `CameraError` that is also the matching built-in).

use std::fmt;

use crate::buffer;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// No such device node (FileNotFoundError).
    NotFound,
    /// The node exists but this user may not open it (PermissionError).
    PermissionDenied,
    /// The node is not a V4L2 video capture device with streaming (ValueError).
    NotACamera,
    /// Format, size, memory mode or buffer the device cannot take (ValueError).
    Unsupported,
    /// Another process (or file handle) owns the device's buffers (OSError EBUSY).
    Busy,
    /// No frame arrived within the timeout (TimeoutError).
    Timeout,
    /// Every buffer is held by the application, none came back within the
    /// timeout (TimeoutError).
    FramesHeld,
    /// The device went away mid-stream (OSError ENODEV).
    Disconnected,
    /// The camera was closed already (ValueError).
    Closed,
    /// Anything else the kernel said (OSError).
    Os,
    /// An error of the buffer core (allocation, mapping), kept as it was.
    Buffer(buffer::ErrorKind),
}

/// The capture core's error: `buffer::Error`'s shape, the capture's kinds.
pub type Error = buffer::Error<ErrorKind>;

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A syscall's failure: the kind follows the errno unless `kind` is given.
    pub fn os(errno: rustix::io::Errno, kind: Option<ErrorKind>, context: impl fmt::Display) -> Self {
        use rustix::io::Errno;
        let kind = kind.unwrap_or(match errno {
            Errno::NOENT => ErrorKind::NotFound,
            Errno::NODEV | Errno::NXIO => ErrorKind::Disconnected,
            Errno::ACCESS | Errno::PERM => ErrorKind::PermissionDenied,
            Errno::BUSY => ErrorKind::Busy,
            Errno::TIMEDOUT => ErrorKind::Timeout,
            Errno::NOMEM => ErrorKind::Buffer(buffer::ErrorKind::OutOfMemory),
            _ => ErrorKind::Os,
        });
        let message = format!("{context}: {}", buffer::errno_text(errno));
        Error { kind, errno: Some(errno.raw_os_error()), message }
    }
}

impl From<buffer::Error> for Error {
    fn from(e: buffer::Error) -> Self {
        Error { kind: ErrorKind::Buffer(e.kind), errno: e.errno, message: e.message }
    }
}
