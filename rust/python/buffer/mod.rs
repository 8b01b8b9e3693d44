//! Python types over the buffer core, one module per module of `rust/buffer/`:
//!
//! * `dmabuf`: `DmaBuf`, its numpy views (`map`), close, and `CpuAccess`,
//!   the CPU-access bracket.
//! * `view`: `_Mapping`, the base object that keeps a view's mapping alive.
//! * `heap`: `alloc`, `heaps`, `auto_plan`.
//! * `transfer`: `send_fds` / `recv_fds`.
//! * `pool`: `BufferPool` and `PoolSlot`.

use pyo3::prelude::*;

use crate::buffer;

mod dmabuf;
mod heap;
mod pool;
mod transfer;
mod view;

pub use dmabuf::PyDmaBuf;
pub use pool::PyBufferPool;

use dmabuf::PyCpuAccess;
use heap::{alloc, auto_plan, heaps, PyHeapInfo};
use pool::PySlot;
use transfer::{recv_fds, send_fds};
use view::PyMapping;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDmaBuf>()?;
    m.add_class::<PyMapping>()?;
    m.add_class::<PyCpuAccess>()?;
    m.add_class::<PyHeapInfo>()?;
    m.add_class::<PyBufferPool>()?;
    m.add_class::<PySlot>()?;
    m.add_function(wrap_pyfunction!(alloc, m)?)?;
    m.add_function(wrap_pyfunction!(heaps, m)?)?;
    m.add_function(wrap_pyfunction!(auto_plan, m)?)?;
    m.add_function(wrap_pyfunction!(send_fds, m)?)?;
    m.add_function(wrap_pyfunction!(recv_fds, m)?)?;
    m.add("PAGE_SIZE", buffer::page_size())?;
    Ok(())
}
