//! The kernel's DMA-BUF interfaces: dma-heap allocation, DMA_BUF_IOCTL_SYNC,
//! DMA_BUF_SET_NAME and UDMABUF_CREATE. Numbers and struct layouts are those of
//! <linux/dma-heap.h>, <linux/dma-buf.h> and <linux/udmabuf.h>.

use rustix::fd::{BorrowedFd, FromRawFd, OwnedFd};
use rustix::io::{Errno, Result};
use rustix::ioctl::{ioctl, opcode, IntegerSetter, Ioctl, IoctlOutput, Opcode, Setter, Updater};

/// `struct dma_heap_allocation_data`
#[repr(C)]
#[derive(Default)]
struct DmaHeapAllocationData {
    len: u64,
    fd: u32,
    fd_flags: u32,
    heap_flags: u64,
}

/// `struct dma_buf_sync`
#[repr(C)]
struct DmaBufSync {
    flags: u64,
}

/// `struct udmabuf_create`
#[repr(C)]
struct UdmabufCreate {
    memfd: u32,
    flags: u32,
    offset: u64,
    size: u64,
}

const DMA_HEAP_IOCTL_ALLOC: Opcode = opcode::read_write::<DmaHeapAllocationData>(b'H', 0x0);
const DMA_BUF_IOCTL_SYNC: Opcode = opcode::write::<DmaBufSync>(b'b', 0);
// DMA_BUF_SET_NAME is declared with a `const char *` argument: the size field
// is that of a pointer, and the argument is the pointer itself.
const DMA_BUF_SET_NAME: Opcode = opcode::write::<*const u8>(b'b', 1);
const UDMABUF_CREATE: Opcode = opcode::write::<UdmabufCreate>(b'u', 0x42);

pub const SYNC_READ: u64 = 1;
pub const SYNC_WRITE: u64 = 2;
pub const SYNC_START: u64 = 0;
pub const SYNC_END: u64 = 4;

const O_RDWR: u32 = 0o2;
const O_CLOEXEC: u32 = 0o2000000;
const UDMABUF_FLAGS_CLOEXEC: u32 = 0x01;

/// Allocates `len` bytes from an open dma-heap; returns the new DMA-BUF fd.
pub fn dma_heap_alloc(heap: BorrowedFd<'_>, len: u64) -> Result<OwnedFd> {
    let mut data = DmaHeapAllocationData { len, fd_flags: O_RDWR | O_CLOEXEC, ..Default::default() };
    // SAFETY: DMA_HEAP_IOCTL_ALLOC reads and writes exactly one
    // `dma_heap_allocation_data`, whose layout the struct above reproduces.
    unsafe { ioctl(heap, Updater::<DMA_HEAP_IOCTL_ALLOC, _>::new(&mut data))? };
    // SAFETY: on success the kernel installed a new fd that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(data.fd as i32) })
}

/// DMA_BUF_IOCTL_SYNC, retried on EINTR and EAGAIN as libcamera's DmaSyncer does.
pub fn dma_buf_sync(fd: BorrowedFd<'_>, flags: u64) -> Result<()> {
    loop {
        // SAFETY: DMA_BUF_IOCTL_SYNC reads one `struct dma_buf_sync` (a u64).
        let r = unsafe { ioctl(fd, Setter::<DMA_BUF_IOCTL_SYNC, _>::new(DmaBufSync { flags })) };
        match r {
            Err(Errno::INTR) | Err(Errno::AGAIN) => continue,
            other => return other,
        }
    }
}

/// Names a DMA-BUF (visible in /sys/kernel/debug/dma_buf/bufinfo and fdinfo).
/// The kernel keeps at most 32 bytes including the NUL.
pub fn dma_buf_set_name(fd: BorrowedFd<'_>, name: &str) -> Result<()> {
    let mut bytes: Vec<u8> = name.bytes().filter(|&b| b != 0).take(31).collect();
    bytes.push(0);
    // SAFETY: the argument is a pointer to a NUL-terminated string that lives
    // until the ioctl returns; the kernel copies it (strndup_user).
    unsafe { ioctl(fd, IntegerSetter::<DMA_BUF_SET_NAME>::new_pointer(bytes.as_ptr() as *mut _)) }
}

/// UDMABUF_CREATE: a DMA-BUF over `size` bytes of a sealed memfd.
pub fn udmabuf_create(dev: BorrowedFd<'_>, memfd: BorrowedFd<'_>, size: u64) -> Result<OwnedFd> {
    use rustix::fd::AsRawFd;
    let mut arg = UdmabufCreate { memfd: memfd.as_raw_fd() as u32, flags: UDMABUF_FLAGS_CLOEXEC, offset: 0, size };
    // SAFETY: UDMABUF_CREATE reads one `struct udmabuf_create` (the layout
    // above) and returns a new fd as the ioctl's result.
    let raw = unsafe { ioctl(dev, ReturnsFd::<UDMABUF_CREATE, _>(&mut arg))? };
    // SAFETY: a successful UDMABUF_CREATE returns a new fd that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// An ioctl that reads a struct and returns a new fd as its result (rustix's
/// `Setter` discards the result).
struct ReturnsFd<'a, const OPCODE: Opcode, T>(&'a mut T);

// SAFETY: the ioctl only reads `T` (IS_MUTATING = false) and its non-negative
// result is the output.
unsafe impl<const OPCODE: Opcode, T> Ioctl for ReturnsFd<'_, OPCODE, T> {
    type Output = i32;
    const IS_MUTATING: bool = false;
    fn opcode(&self) -> Opcode {
        OPCODE
    }
    fn as_ptr(&mut self) -> *mut core::ffi::c_void {
        (self.0 as *mut T).cast()
    }
    unsafe fn output_from_ptr(out: IoctlOutput, _: *mut core::ffi::c_void) -> Result<i32> {
        Ok(out)
    }
}

/// The size of a DMA-BUF: defined by `lseek(fd, 0, SEEK_END)` (fstat may say 0).
pub fn fd_size(fd: BorrowedFd<'_>) -> Result<u64> {
    let end = rustix::fs::seek(fd, rustix::fs::SeekFrom::End(0))?;
    // Put the offset back: the fd may be shared with code that reads it.
    let _ = rustix::fs::seek(fd, rustix::fs::SeekFrom::Start(0));
    Ok(end)
}

/// The kernel's page size.
pub fn page_size() -> usize {
    rustix::param::page_size()
}

pub fn round_up_to_page(size: usize) -> Option<usize> {
    let page = page_size();
    size.checked_add(page - 1).map(|s| s / page * page)
}
