//! The thin PyO3 layer: Python types over the Rust core, error mapping, GIL release.

use pyo3::prelude::*;

mod alias;
mod analytics;
mod buffer;
mod capture;
mod detect;
mod errors;
mod fence;
mod layout;
mod timeout;
mod track;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m.py())?;
    analytics::register(m)?;
    buffer::register(m)?;
    capture::register(m)?;
    detect::register(m)?;
    layout::register(m)?;
    track::register(m)?;
    m.add_function(wrap_pyfunction!(alias::_shares_memory, m)?)?;
    m.add_function(wrap_pyfunction!(alias::_claim_seconds, m)?)?;
    Ok(())
}
