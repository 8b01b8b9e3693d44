//! `DmaBuf`: an owned fd of shared memory (a real DMA-BUF, or a memfd on
//! machines without dma-buf heaps), its size, and where it came from.

use std::fmt;

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};

use super::error::{Context, Error, ErrorKind, Result};
use super::mapping::{Access, Mapping};
use super::sys;

/// Where a buffer's memory comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Allocated from `/dev/dma_heap/<name>`.
    DmaHeap(String),
    /// A udmabuf over a sealed memfd.
    Udmabuf,
    /// Plain shared memory; not a DMA-BUF.
    Memfd,
    /// Wrapped from an fd made elsewhere.
    Imported,
    /// Allocated by a device driver and exported by us, e.g. `v4l2:vivid`
    /// (a camera's own buffer, exported with VIDIOC_EXPBUF).
    Device(String),
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::DmaHeap(name) => write!(f, "dma-heap:{name}"),
            Kind::Udmabuf => f.write_str("udmabuf"),
            Kind::Memfd => f.write_str("memfd"),
            Kind::Imported => f.write_str("imported"),
            Kind::Device(name) => f.write_str(name),
        }
    }
}

/// What an fd refers to, as far as sharing memory goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdClass {
    DmaBuf,
    Memfd,
    File,
}

/// CPU access direction of a sync bracket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    Read,
    Write,
    ReadWrite,
}

impl SyncMode {
    pub fn parse(mode: &str) -> Result<Self> {
        match mode {
            "read" | "r" => Ok(SyncMode::Read),
            "write" | "w" => Ok(SyncMode::Write),
            "rw" | "readwrite" | "read-write" => Ok(SyncMode::ReadWrite),
            other => {
                Err(Error::invalid(format!("unknown cpu_access mode {other:?}: use \"read\", \"write\" or \"rw\"")))
            }
        }
    }

    fn flags(self) -> u64 {
        match self {
            SyncMode::Read => sys::SYNC_READ,
            SyncMode::Write => sys::SYNC_WRITE,
            SyncMode::ReadWrite => sys::SYNC_READ | sys::SYNC_WRITE,
        }
    }
}

const DMA_BUF_MAGIC: i64 = 0x444d_4142; // "DMAB", include/uapi/linux/magic.h

#[derive(Debug)]
pub struct DmaBuf {
    fd: OwnedFd,
    size: usize,
    kind: Kind,
    class: FdClass,
    /// Whether mapping is safe from a peer that shrinks the file (see `from_fd`).
    map_safe: bool,
}

impl DmaBuf {
    /// A buffer npu_zc allocated: a DMA-BUF, or a memfd sealed against resizing.
    pub(crate) fn new(fd: OwnedFd, size: usize, kind: Kind, class: FdClass) -> Self {
        DmaBuf { fd, size, kind, class, map_safe: true }
    }

    /// Wraps an fd made elsewhere: a DMA-BUF, a memfd or a regular file. The
    /// fd is duplicated (with CLOEXEC) unless `take_ownership` hands it over.
    /// Pipes, sockets, directories and devices are refused.
    ///
    /// Whoever else holds a memfd or a file can truncate it, and every access
    /// past the new end of a mapping then kills this process with SIGBUS. So
    /// such an fd is only mapped when it is sealed against shrinking
    /// (F_SEAL_SHRINK: npu_zc's own memfds are) or when the caller trusts
    /// every holder not to shrink it (`trust_size`). A DMA-BUF cannot shrink.
    pub fn from_fd(fd: BorrowedFd<'_>, take_ownership: bool, trust_size: bool) -> Result<Self> {
        let class = classify(fd)?;
        let size = sys::fd_size(fd).context(format_args!("cannot size fd {}", raw(fd)))? as usize;
        if size == 0 {
            return Err(Error::invalid(format!("fd {} refers to an empty buffer (size 0)", raw(fd))));
        }
        let map_safe = trust_size || !can_shrink(fd, class);
        let owned = if take_ownership {
            // SAFETY: the caller hands the fd over (take_ownership=True is the
            // documented contract); it was just checked to be open.
            unsafe { <OwnedFd as rustix::fd::FromRawFd>::from_raw_fd(raw(fd)) }
        } else {
            dup(fd)?
        };
        Ok(DmaBuf { fd: owned, size, kind: Kind::Imported, class, map_safe })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    /// True for a real DMA-BUF (a device can import it); false for memfd or file.
    pub fn is_dmabuf(&self) -> bool {
        self.class == FdClass::DmaBuf
    }

    pub fn class(&self) -> FdClass {
        self.class
    }

    /// False for an imported memfd or file that is not sealed against
    /// shrinking and was not trusted: `map` refuses it.
    pub fn map_safe(&self) -> bool {
        self.map_safe
    }

    /// A new fd for the same memory, with CLOEXEC, owned by the caller.
    pub fn export(&self) -> Result<OwnedFd> {
        dup(self.fd.as_fd())
    }

    /// Maps `len` bytes from `offset` (any offset: page alignment is handled).
    pub fn map(&self, offset: usize, len: usize, access: Access) -> Result<Mapping> {
        let end = offset.checked_add(len).filter(|&end| end <= self.size && len > 0);
        if end.is_none() {
            return Err(Error::invalid(format!(
                "cannot map {len} bytes at offset {offset} of a {}-byte buffer",
                self.size
            )));
        }
        if !self.map_safe {
            return Err(Error::invalid(format!(
                "refusing to map this imported {}: it is not sealed against shrinking, so whoever else holds it \
                 could truncate it and crash this process with SIGBUS on the next access. Have the sender seal it \
                 (fcntl F_ADD_SEALS with F_SEAL_SHRINK; npu_zc.alloc's memfds are sealed), send a DMA-BUF, or, \
                 if you trust every holder of the fd, import it with trust_size=True",
                if self.class == FdClass::Memfd { "memfd" } else { "file" }
            )));
        }
        if self.class != FdClass::DmaBuf {
            // A trusted file may still have been shrunk since import: map only what is there now.
            let now = rustix::fs::fstat(self.fd.as_fd()).context("fstat before mmap failed")?.st_size;
            if (now as u64) < (offset + len) as u64 {
                return Err(Error::invalid(format!(
                    "cannot map {len} bytes at offset {offset}: the file was imported with {} bytes \
                     but has {now} bytes now (someone truncated it)",
                    self.size
                )));
            }
        }
        Mapping::new(self.fd.as_fd(), offset, len, access)
    }

    /// Maps the whole buffer.
    pub fn map_all(&self, access: Access) -> Result<Mapping> {
        self.map(0, self.size, access)
    }

    /// DMA_BUF_IOCTL_SYNC start or end; a no-op for memory that is not a DMA-BUF.
    pub fn sync(&self, mode: SyncMode, start: bool) -> Result<()> {
        if !self.is_dmabuf() {
            return Ok(());
        }
        let phase = if start { sys::SYNC_START } else { sys::SYNC_END };
        sys::dma_buf_sync(self.fd.as_fd(), mode.flags() | phase).context(format_args!(
            "DMA_BUF_IOCTL_SYNC {} on fd {} failed",
            if start { "start" } else { "end" },
            raw(self.fd.as_fd())
        ))
    }

    /// A CPU-access bracket: sync start now, sync end when the guard drops.
    pub fn cpu_access(&self, mode: SyncMode) -> Result<CpuAccess<'_>> {
        self.sync(mode, true)?;
        Ok(CpuAccess { buf: self, mode })
    }
}

/// Holds a DMA_BUF_IOCTL_SYNC bracket open; ends it on drop.
#[must_use = "the bracket ends when the guard is dropped"]
pub struct CpuAccess<'a> {
    buf: &'a DmaBuf,
    mode: SyncMode,
}

impl CpuAccess<'_> {
    /// Ends the bracket now and reports the kernel's answer.
    pub fn end(self) -> Result<()> {
        let r = self.buf.sync(self.mode, false);
        std::mem::forget(self);
        r
    }
}

impl Drop for CpuAccess<'_> {
    fn drop(&mut self) {
        // A failing sync end on drop has nobody to report to; `end()` reports it.
        let _ = self.buf.sync(self.mode, false);
    }
}

fn raw(fd: BorrowedFd<'_>) -> i32 {
    use rustix::fd::AsRawFd;
    fd.as_raw_fd()
}

/// Whether another holder of `fd` could make it shorter than it is now.
fn can_shrink(fd: BorrowedFd<'_>, class: FdClass) -> bool {
    match class {
        FdClass::DmaBuf => false,
        // Files that do not support seals answer EINVAL: they can shrink.
        FdClass::Memfd | FdClass::File => {
            !rustix::fs::fcntl_get_seals(fd).is_ok_and(|s| s.contains(rustix::fs::SealFlags::SHRINK))
        }
    }
}

pub(crate) fn dup(fd: BorrowedFd<'_>) -> Result<OwnedFd> {
    rustix::io::fcntl_dupfd_cloexec(fd, 3).context(format_args!("cannot duplicate fd {}", raw(fd)))
}

/// Tells a DMA-BUF from a memfd from a regular file, and refuses the rest.
pub fn classify(fd: BorrowedFd<'_>) -> Result<FdClass> {
    use rustix::fs::{fstat, fstatfs, FileType};
    let n = raw(fd);
    if n < 0 {
        return Err(Error::invalid(format!("fd {n} is negative: not a file descriptor")));
    }
    let st = fstat(fd).map_err(|e| match e {
        rustix::io::Errno::BADF => Error {
            kind: ErrorKind::InvalidInput,
            errno: Some(e.raw_os_error()),
            message: format!("fd {n} is not an open file descriptor"),
        },
        e => Error::from_errno(e, format_args!("fstat of fd {n} failed")),
    })?;
    let fs = fstatfs(fd).context(format_args!("fstatfs of fd {n} failed"))?;
    if fs.f_type as i64 == DMA_BUF_MAGIC {
        return Ok(FdClass::DmaBuf);
    }
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => {
            let link = std::fs::read_link(format!("/proc/self/fd/{n}")).unwrap_or_default();
            if link.to_string_lossy().starts_with("/memfd:") {
                Ok(FdClass::Memfd)
            } else {
                Ok(FdClass::File)
            }
        }
        other => {
            let what = match other {
                FileType::Fifo => "a pipe",
                FileType::Socket => "a socket",
                FileType::Directory => "a directory",
                FileType::CharacterDevice => "a character device",
                FileType::BlockDevice => "a block device",
                FileType::Symlink => "a symbolic link",
                _ => "not a memory buffer",
            };
            Err(Error::invalid(format!("fd {n} is {what}: only DMA-BUFs, memfds and regular files can be imported")))
        }
    }
}
