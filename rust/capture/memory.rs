//! Where a camera's frame memory comes from (`Camera`'s `memory=`, `heap=`
//! and `pool=`): a caller's buffers, a heap's buffers that we allocate and
//! the driver imports, or the driver's own (mmap, exported); and the
//! fallback to the driver's own when it refuses to import ours.

use std::sync::Arc;

use super::device::{Device, Fourcc};
use super::error::{Error, ErrorKind, Result};
use super::stream::{Buffers, Stream};
use crate::buffer::{self, BufferPool, DmaBuf, HeapSpec};

/// The buffers a camera starts with, chosen before the device is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BufferPlan {
    /// The caller's buffers (every buffer of its pool), imported.
    Caller,
    /// Buffers allocated from `spec`, imported by the driver; with
    /// `fallback`, the driver's own instead when it cannot import them.
    Heap { spec: HeapSpec, fallback: bool },
    /// The driver allocates its buffers (mmap) and exports them.
    Driver,
}

impl BufferPlan {
    /// The plan `memory` ("auto", "dmabuf" or "mmap") and `heap` (a heap
    /// name, or "auto") ask for; `pool`: the caller gives the buffers.
    pub fn choose(memory: &str, heap: &str, pool: bool) -> Result<BufferPlan> {
        Ok(match (memory, pool) {
            ("mmap", true) => return Err(invalid("memory=\"mmap\" has the driver allocate: it cannot take a pool")),
            (_, true) => BufferPlan::Caller,
            ("mmap", false) => BufferPlan::Driver,
            ("dmabuf", false) => match HeapSpec::parse(heap)? {
                HeapSpec::Auto => BufferPlan::Heap {
                    spec: auto_heap().ok_or_else(|| {
                        Error::new(
                            ErrorKind::Unsupported,
                            "memory=\"dmabuf\" needs a dma-heap or udmabuf and this machine has neither usable \
                             (npu_zc.heaps() says why): use memory=\"mmap\" or memory=\"auto\"",
                        )
                    })?,
                    fallback: false,
                },
                HeapSpec::Memfd => {
                    return Err(invalid(
                        "a camera cannot import memfd memory (not a DMA-BUF): use a dma-heap or udmabuf",
                    ))
                }
                spec => BufferPlan::Heap { spec, fallback: false },
            },
            ("auto", false) => match HeapSpec::parse(heap)? {
                HeapSpec::Auto | HeapSpec::Memfd => match auto_heap() {
                    Some(spec) => BufferPlan::Heap { spec, fallback: true },
                    None => BufferPlan::Driver,
                },
                spec => BufferPlan::Heap { spec, fallback: true },
            },
            (other, _) => {
                return Err(invalid(format!("memory must be \"auto\", \"dmabuf\" or \"mmap\", got {other:?}")))
            }
        })
    }
}

/// A bad argument: the buffer core's kind, so that it reads as every other
/// bad argument (InvalidArgumentError in Python).
fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Buffer(buffer::ErrorKind::InvalidInput), message)
}

/// Which heap `memory="auto"` imports from: the first usable dma-heap or
/// udmabuf; None when only memfd is left (then the driver allocates).
pub fn auto_heap() -> Option<HeapSpec> {
    buffer::heap::auto_plan()
        .into_iter()
        .find(|(spec, why)| why.is_none() && *spec != HeapSpec::Memfd)
        .map(|(spec, _)| spec)
}

/// Opens `path` at `width` x `height` in `fourcc` and streams into the
/// buffers `plan` says: `caller`'s (for `BufferPlan::Caller`), `count` of a
/// heap's, or `count` of the driver's. Returns the stream and the heap its
/// buffers came from when we allocated them.
pub fn start(
    path: &str,
    (width, height, fourcc): (u32, u32, Fourcc),
    count: usize,
    plan: &BufferPlan,
    caller: Option<Vec<Arc<DmaBuf>>>,
) -> Result<(Stream, Option<String>)> {
    let dev = Device::open(path)?;
    let fmt = dev.set_format(width, height, fourcc)?;
    if let Some(bufs) = caller {
        return Ok((Stream::start(dev, fmt, Buffers::Import(bufs))?, None));
    }
    let BufferPlan::Heap { spec, fallback } = plan else {
        return Ok((Stream::start(dev, fmt, Buffers::Mmap(count))?, None));
    };
    let pool = BufferPool::new(count, fmt.sizeimage as usize, spec)?;
    let heap = pool.buffers()[0].kind().to_string();
    match Stream::start(dev, fmt, Buffers::Import(pool.buffers().to_vec())) {
        Ok(s) => Ok((s, Some(heap))),
        Err(e) if *fallback && e.kind == ErrorKind::Unsupported => {
            // The driver cannot import these buffers: let it allocate.
            let dev = Device::open(path)?;
            let fmt = dev.set_format(width, height, fourcc)?;
            Ok((Stream::start(dev, fmt, Buffers::Mmap(count))?, None))
        }
        Err(e) => Err(e),
    }
}
