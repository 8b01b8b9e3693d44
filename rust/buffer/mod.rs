//! The buffer core: every syscall npu_zc makes.
//!
//! * [`heap`]: allocation from dma-buf heaps, udmabuf and memfd, and `auto`.
//! * [`DmaBuf`]: an owned buffer fd; import, export, map, CPU-access sync.
//! * `fence`: waiting for the fences a device attached to a DMA-BUF (poll).
//! * [`Mapping`]: an mmap of a buffer, unmapped on drop.
//! * [`transfer`]: fds and metadata between processes over a Unix socket.
//! * [`BufferPool`]: a ring of buffers that are never handed out while in flight.

mod dmabuf;
mod error;
mod fence;
pub mod heap;
mod mapping;
mod pool;
mod sys;
pub mod transfer;

pub use dmabuf::{classify, CpuAccess, DmaBuf, FdClass, Kind, SyncMode};
pub use error::{errno_text, Error, ErrorKind, Result};
pub use heap::{alloc, heaps, HeapInfo, HeapSpec};
pub use mapping::{Access, Mapping};
pub use pool::{BufferPool, Lease, SlotState, Wait};
pub use sys::page_size;

#[cfg(test)]
mod tests;
