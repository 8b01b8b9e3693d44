//! The thin PyO3 layer: Python types over the Rust core, error mapping, GIL release.

use pyo3::prelude::*;

mod buffer;
mod capture;
mod detect;
mod errors;
mod fence;
mod layout;
mod track;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m.py())?;
    buffer::register(m)?;
    capture::register(m)?;
    detect::register(m)?;
    layout::register(m)?;
    track::register(m)?;
    Ok(())
}
