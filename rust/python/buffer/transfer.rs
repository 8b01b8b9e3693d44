//! fd passing: buffers and a payload between processes over a Unix socket.

use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyList};
use rustix::fd::{AsFd, BorrowedFd};

use super::dmabuf::PyDmaBuf;
use crate::buffer::{self, DmaBuf};
use crate::python::errors::IntoPyResult;
use crate::python::timeout::Timeout;

/// The fd of a socket object or an int; a closed socket (whose fileno() is -1)
/// or a negative fd is EBADF, as the socket module says it.
fn socket_fd(sock: &Bound<'_, PyAny>) -> PyResult<i32> {
    let fd = if sock.is_instance_of::<PyInt>() {
        sock.clone()
    } else {
        sock.call_method0("fileno")
            .map_err(|_| PyTypeError::new_err(format!("expected a socket or an fd, got {sock}")))?
    };
    match fd.extract::<i32>() {
        Ok(n) if n >= 0 => Ok(n),
        _ => Err(buffer::Error::from_errno(
            rustix::io::Errno::BADF,
            format_args!("fd {fd} is not an open socket (a closed socket's fileno() is -1)"),
        ))
        .py_err(),
    }
}

/// Runs a socket call with the GIL released. A signal that interrupts its
/// wait runs Python's handlers; if one raises (Ctrl-C: KeyboardInterrupt),
/// the call stops and that exception is what Python sees.
fn socket_call<T: Send>(
    py: Python<'_>,
    call: impl FnOnce(buffer::transfer::Interrupted<'_>) -> buffer::Result<T> + Send,
) -> PyResult<T> {
    let mut raised: Option<PyErr> = None;
    let result = py.detach(|| {
        let mut interrupted = || {
            Python::attach(|py| match py.check_signals() {
                Ok(()) => false,
                Err(e) => {
                    raised = Some(e);
                    true
                }
            })
        };
        call(&mut interrupted)
    });
    match raised {
        Some(e) => Err(e),
        None => result.py_err(),
    }
}

/// Sends the buffers' fds and `payload` as one message over a Unix socket.
#[pyfunction]
#[pyo3(signature = (sock, buffers, payload, *, timeout = None))]
pub(super) fn send_fds(
    py: Python<'_>,
    sock: &Bound<'_, PyAny>,
    buffers: Vec<Py<PyDmaBuf>>,
    payload: &[u8],
    timeout: Option<Timeout>,
) -> PyResult<()> {
    let sock = socket_fd(sock)?;
    let timeout = timeout.and_then(|t| t.0);
    let bufs = buffers.iter().map(|b| b.get().buf()).collect::<PyResult<Vec<_>>>()?;
    let payload = payload.to_vec();
    socket_call(py, |interrupted| {
        // SAFETY: the socket fd is borrowed only for this call; a closed or
        // foreign fd makes sendmsg fail with a clear error (EBADF/ENOTSOCK).
        let sock = unsafe { BorrowedFd::borrow_raw(sock) };
        let fds: Vec<BorrowedFd<'_>> = bufs.iter().map(|b| b.fd()).collect();
        buffer::transfer::send_fds_within(sock, &fds, &payload, timeout, interrupted)
    })
}

/// Receives one message sent by `send_fds`: the buffers (imported) and the payload.
#[pyfunction]
#[pyo3(signature = (sock, *, timeout = None, trust_size = false))]
pub(super) fn recv_fds<'py>(
    py: Python<'py>,
    sock: &Bound<'py, PyAny>,
    timeout: Option<Timeout>,
    trust_size: bool,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyBytes>)> {
    let sock = socket_fd(sock)?;
    let timeout = timeout.and_then(|t| t.0);
    let (fds, payload) = socket_call(py, |interrupted| {
        // SAFETY: as in send_fds.
        let sock = unsafe { BorrowedFd::borrow_raw(sock) };
        buffer::transfer::recv_fds_within(sock, timeout, interrupted)
    })?;
    let mut bufs = Vec::with_capacity(fds.len());
    for fd in fds {
        // Whatever the peer sent that is not a buffer is the peer's fault: PeerError, all fds closed.
        let buf = DmaBuf::from_fd(fd.as_fd(), false, trust_size).map_err(|e| buffer::Error {
            kind: buffer::ErrorKind::Protocol,
            message: format!("the sending process sent an fd that is not a buffer: {}", e.message),
            ..e
        });
        bufs.push(PyDmaBuf::wrap(Arc::new(buf.py_err()?), false));
        // `fd` drops here: from_fd kept a dup, so each received fd is closed once.
    }
    let list = PyList::empty(py);
    for b in bufs {
        list.append(Bound::new(py, b)?)?;
    }
    Ok((list, PyBytes::new(py, &payload)))
}
