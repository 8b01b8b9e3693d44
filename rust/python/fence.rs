//! Waiting for a DMA-BUF's fences from Python: `DmaBuf.wait(mode, timeout)` and
//! the wait before `cpu_access(mode, timeout=...)` starts its bracket. The GIL
//! is released while waiting; Ctrl-C interrupts the wait.

use std::time::Duration;

use pyo3::prelude::*;

use super::errors::{invalid, to_py};
use super::timeout::Timeout;
use crate::buffer::{DmaBuf, Error, SyncMode};

/// A timeout argument (timeout.rs): None, inf or too long for a Duration
/// waits as long as the fences take.
pub(crate) fn timeout_arg(timeout: Option<Timeout>) -> Option<Duration> {
    timeout.and_then(|t| t.0)
}

/// "read", "write" or "rw", as for cpu_access.
pub(crate) fn mode_arg(mode: &str) -> PyResult<SyncMode> {
    SyncMode::parse(mode).map_err(|_| invalid(format!("unknown wait mode {mode:?}: use \"read\", \"write\" or \"rw\"")))
}

/// Why a wait ended early: the core's error, or Python's (a pending KeyboardInterrupt).
enum Stop {
    Core(Error),
    Python(PyErr),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Core(e)
    }
}

/// Waits for the fences that make `mode` access safe, without the GIL.
pub(crate) fn wait(py: Python<'_>, buf: &DmaBuf, mode: SyncMode, timeout: Option<Duration>) -> PyResult<()> {
    if !buf.is_dmabuf() {
        return Ok(()); // memfd and files: no fences, nothing to wait for
    }
    let r = py.detach(|| {
        buf.wait_fences_interruptible(mode, timeout, || {
            // A signal woke poll: let Python run its handlers (Ctrl-C raises here).
            Python::attach(|py| py.check_signals()).map_err(Stop::Python)
        })
    });
    match r {
        Ok(()) => Ok(()),
        Err(Stop::Core(e)) => Err(to_py(e)),
        Err(Stop::Python(e)) => Err(e),
    }
}
