//! One rule for every timeout argument (docs/safety.md): a number of seconds,
//! 0 or more. None, inf, and anything longer than a `Duration` holds (1e20,
//! 10**400) wait for ever; NaN and negative numbers are InvalidArgumentError;
//! anything that is not a number is a TypeError. Never a panic, never a raw
//! OverflowError.
//!
//! And one rule for every wait: it wakes at least every [`SLICE`] to let
//! Python run its signal handlers, so Ctrl-C stops a wait that has no end.

use std::time::{Duration, Instant};

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;

use super::errors::invalid;

/// How often a long wait checks for signals (Ctrl-C).
pub(crate) const SLICE: Duration = Duration::from_millis(50);

/// A timeout argument: `None` waits for ever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timeout(pub Option<Duration>);

impl Timeout {
    /// Seconds from Python (any real number, an int of any size, or None).
    pub(crate) fn from_py(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Timeout> {
        if value.is_none() {
            return Ok(Timeout(None));
        }
        let seconds = match value.extract::<f64>() {
            Ok(t) => t,
            // An int too large for a float: only its sign matters.
            Err(e) if e.is_instance_of::<PyOverflowError>(value.py()) => {
                if value.lt(0)? {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }
            }
            Err(_) => {
                return Err(PyTypeError::new_err(format!(
                    "{what} must be a number of seconds or None, not {}",
                    value.get_type().name()?
                )))
            }
        };
        Timeout::from_seconds(seconds, what)
    }

    pub(crate) fn from_seconds(seconds: f64, what: &str) -> PyResult<Timeout> {
        if seconds.is_nan() || seconds < 0.0 {
            return Err(invalid(format!("{what} must be a number of seconds >= 0 (or None: no limit), got {seconds}")));
        }
        // Past what a Duration (or a deadline from now) holds is for ever.
        Ok(Timeout(Duration::try_from_secs_f64(seconds).ok().filter(|d| Instant::now().checked_add(*d).is_some())))
    }

    /// The deadline of a wait that starts now (None: no deadline).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.0.and_then(|d| Instant::now().checked_add(d))
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for Timeout {
    type Error = PyErr;

    fn extract(value: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Timeout::from_py(&value, "timeout")
    }
}

/// The next slice of a wait until `deadline` (None: for ever): at most
/// [`SLICE`]; None when the deadline has passed.
pub(crate) fn next_slice(deadline: Option<Instant>) -> Option<Duration> {
    match deadline {
        None => Some(SLICE),
        Some(deadline) => {
            let left = deadline.saturating_duration_since(Instant::now());
            (!left.is_zero()).then(|| left.min(SLICE))
        }
    }
}
