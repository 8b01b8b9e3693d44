//! `Mapping`: an mmap of (part of) a buffer, unmapped on drop.

use std::ptr::NonNull;

use rustix::fd::BorrowedFd;
use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};

use super::error::{Error, ErrorKind, Result};
use super::sys;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    ReadOnly,
    ReadWrite,
}

#[derive(Debug)]
pub struct Mapping {
    /// Start of the kernel mapping (page aligned).
    base: NonNull<u8>,
    base_len: usize,
    /// What the caller asked for: `offset - aligned offset` into `base`.
    skip: usize,
    len: usize,
    access: Access,
}

// SAFETY: a Mapping is a plain region of shared memory. Moving it to or using
// it from another thread is no different from doing so on the thread that made
// it; every accessor that yields Rust references requires `&self`/`&mut self`.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    pub(crate) fn new(fd: BorrowedFd<'_>, offset: usize, len: usize, access: Access) -> Result<Self> {
        let page = sys::page_size();
        let aligned = offset / page * page;
        let skip = offset - aligned;
        let base_len = skip + len;
        let prot = match access {
            Access::ReadOnly => ProtFlags::READ,
            Access::ReadWrite => ProtFlags::READ | ProtFlags::WRITE,
        };
        // SAFETY: a new MAP_SHARED mapping at an address the kernel chooses
        // cannot alias any Rust object; the range was checked against the
        // buffer's size by the caller.
        let base = unsafe { mmap(std::ptr::null_mut(), base_len, prot, MapFlags::SHARED, fd, aligned as u64) }
            .map_err(|e| {
                let err = Error::from_errno(e, format_args!("mmap of {len} bytes at offset {offset} failed"));
                match (e, access) {
                    (rustix::io::Errno::ACCESS | rustix::io::Errno::PERM, Access::ReadWrite) => err.hint(
                        "the fd was opened read-only or the memfd is sealed against writes: map it with writable=False",
                    ),
                    // ENODEV is mmap's "this file cannot be mapped", not a missing heap.
                    (rustix::io::Errno::NODEV, _) => Error {
                        kind: ErrorKind::InvalidInput,
                        message: format!("{}: this fd's file system does not support mmap", err.message),
                        ..err
                    },
                    _ => err,
                }
            })?;
        let base = NonNull::new(base.cast::<u8>()).ok_or_else(|| Error::invalid("mmap returned a null mapping"))?;
        Ok(Mapping { base, base_len, skip, len, access })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn access(&self) -> Access {
        self.access
    }

    pub fn as_ptr(&self) -> *const u8 {
        // SAFETY: skip < base_len, within the mapping.
        unsafe { self.base.as_ptr().add(self.skip) }
    }

    /// Null for a read-only mapping, so that nobody writes through it.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        match self.access {
            Access::ReadWrite => self.as_ptr() as *mut u8,
            Access::ReadOnly => std::ptr::null_mut(),
        }
    }

    /// The mapped bytes. Devices and other processes that share the buffer may
    /// change them: bracket CPU access with `DmaBuf::cpu_access`.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the region is mapped and readable for `len` bytes for as long
        // as `self` lives; no Rust `&mut` to it can coexist (as_mut_slice needs
        // `&mut self`). Writers outside this process are outside Rust's model,
        // exactly as with any shared memory (memmap2 makes the same trade).
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len) }
    }

    /// The mapped bytes, writable. Fails for a read-only mapping.
    pub fn as_mut_slice(&mut self) -> Result<&mut [u8]> {
        if self.access == Access::ReadOnly {
            return Err(Error::invalid("this mapping is read-only"));
        }
        // SAFETY: as in `as_slice`, and `&mut self` makes this the only Rust
        // reference into the region; PROT_WRITE was requested.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.as_ptr() as *mut u8, self.len) })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base/base_len are exactly what mmap returned, and no
        // reference into the region outlives `self` (slices borrow `self`).
        let _ = unsafe { munmap(self.base.as_ptr().cast(), self.base_len) };
    }
}
