//! Waiting for a buffer's fences: how a device (NPU, camera, GPU) tells the CPU
//! that it has finished with a DMA-BUF.
//!
//! A device that writes or reads a DMA-BUF asynchronously attaches a fence to
//! the buffer's reservation object and signals it when done. poll(2) on the
//! DMA-BUF fd waits for those implicit fences (drivers/dma-buf/dma-buf.c,
//! `dma_buf_poll`): POLLIN is ready once every *write* fence has signalled (the
//! CPU may read), POLLOUT once *every* fence has (the CPU may write).
//!
//! DMA_BUF_IOCTL_SYNC start waits for the same fences, but with no time limit:
//! waiting here first, with a timeout, turns a device that never finishes into
//! a typed error instead of a hang. Memory that is not a DMA-BUF (memfd, files)
//! has no fences: the wait returns at once.
//!
//! DMA_BUF_IOCTL_EXPORT_SYNC_FILE (Linux 6.0+) takes a snapshot of the same
//! fences as a sync_file fd, for APIs with explicit synchronisation (Vulkan,
//! a display's IN_FENCE_FD) or to wait later.

use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use rustix::io::Errno;
use rustix::ioctl::{ioctl, opcode, Opcode, Updater};

use super::dmabuf::{DmaBuf, SyncMode};
use super::error::{Error, ErrorKind, Result};

impl SyncMode {
    /// The poll event that says this CPU access is safe: reading needs the
    /// writers done, writing needs everyone done.
    fn ready_event(self) -> PollFlags {
        match self {
            SyncMode::Read => PollFlags::IN,
            SyncMode::Write | SyncMode::ReadWrite => PollFlags::OUT,
        }
    }
}

/// `struct dma_buf_export_sync_file` (<linux/dma-buf.h>).
#[repr(C)]
struct DmaBufExportSyncFile {
    flags: u32,
    fd: i32,
}

const DMA_BUF_IOCTL_EXPORT_SYNC_FILE: Opcode = opcode::read_write::<DmaBufExportSyncFile>(b'b', 2);
const DMA_BUF_SYNC_READ: u32 = 1;
const DMA_BUF_SYNC_WRITE: u32 = 2;

fn export_sync_file(fd: BorrowedFd<'_>, flags: u32) -> rustix::io::Result<OwnedFd> {
    let mut arg = DmaBufExportSyncFile { flags, fd: -1 };
    // SAFETY: DMA_BUF_IOCTL_EXPORT_SYNC_FILE reads and writes exactly one
    // `struct dma_buf_export_sync_file`, whose layout the struct above reproduces.
    unsafe { ioctl(fd, Updater::<DMA_BUF_IOCTL_EXPORT_SYNC_FILE, _>::new(&mut arg))? };
    // SAFETY: on success the kernel installed a new fd (O_CLOEXEC) that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(arg.fd) })
}

impl DmaBuf {
    /// The fences that `mode` access would wait for, as a sync_file fd owned by
    /// the caller: `Read` snapshots the write fences, `Write`/`ReadWrite` all of
    /// them. It becomes readable (POLLIN) once they have signalled; with no
    /// fences it is signalled already. Needs Linux 6.0 and a DMA-BUF.
    pub fn export_sync_file(&self, mode: SyncMode) -> Result<OwnedFd> {
        if !self.is_dmabuf() {
            return Err(Error::invalid(format!(
                "cannot export a sync_file from the {} buffer (fd {}): it is not a DMA-BUF, so it has no fences",
                self.kind(),
                self.raw_fd()
            )));
        }
        let flags = match mode {
            SyncMode::Read => DMA_BUF_SYNC_READ,
            SyncMode::Write | SyncMode::ReadWrite => DMA_BUF_SYNC_WRITE,
        };
        export_sync_file(self.fd(), flags).map_err(|e| {
            let err = Error::from_errno(
                e,
                format_args!("DMA_BUF_IOCTL_EXPORT_SYNC_FILE on DMA-BUF fd {} failed", self.raw_fd()),
            );
            if e == Errno::NOTTY {
                err.hint("the kernel is older than Linux 6.0, which added it: use wait() instead")
            } else {
                err
            }
        })
    }

    /// Waits until the CPU may access the buffer in `mode`: for `Read`, until
    /// every write fence has signalled; for `Write`/`ReadWrite`, until every
    /// fence has. `timeout` None waits as long as the fences take (drivers
    /// time out hung jobs themselves); `Some(ZERO)` only checks. A buffer that
    /// is not a DMA-BUF has no fences and returns at once.
    ///
    /// Fails with [`ErrorKind::FenceTimeout`] when the fences are still
    /// unsignalled at the deadline. Signals that interrupt poll(2) restart it
    /// with the time left.
    pub fn wait_fences(&self, mode: SyncMode, timeout: Option<Duration>) -> Result<()> {
        self.wait_fences_interruptible(mode, timeout, || Ok::<(), Error>(()))
    }

    /// [`DmaBuf::wait_fences`], calling `interrupted` whenever a signal
    /// interrupts the wait: an error from it ends the wait (Python checks for
    /// KeyboardInterrupt there), `Ok` goes on waiting with the time left.
    pub fn wait_fences_interruptible<E: From<Error>>(
        &self,
        mode: SyncMode,
        timeout: Option<Duration>,
        mut interrupted: impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        if !self.is_dmabuf() {
            return Ok(());
        }
        let wanted = mode.ready_event();
        let deadline = timeout.map(|t| Instant::now().checked_add(t));
        let fd = self.fd();
        loop {
            let left = match deadline {
                None => None,
                // A timeout too large for Instant is as good as none.
                Some(None) => None,
                Some(Some(at)) => Some(at.saturating_duration_since(Instant::now())),
            };
            let ts = left.map(|d| Timespec::try_from(d).unwrap_or(Timespec { tv_sec: i64::MAX, tv_nsec: 0 }));
            let mut fds = [PollFd::new(&fd, wanted)];
            match poll(&mut fds, ts.as_ref()) {
                Ok(0) => return Err(self.fence_timeout(mode, timeout.unwrap_or_default()).into()),
                Ok(_) => {
                    let got = fds[0].revents();
                    if got.intersects(wanted) {
                        return Ok(());
                    }
                    // dma_buf_poll answers POLLERR for a buffer without a reservation object.
                    return Err(Error::new(
                        ErrorKind::Os,
                        format!("poll on DMA-BUF fd {} answered {got:?} instead of {wanted:?}", self.raw_fd()),
                    )
                    .into());
                }
                Err(Errno::INTR) => interrupted()?,
                Err(e) => {
                    return Err(Error::from_errno(e, format_args!("poll on DMA-BUF fd {} failed", self.raw_fd())).into())
                }
            }
        }
    }

    fn raw_fd(&self) -> i32 {
        self.fd().as_raw_fd()
    }

    fn fence_timeout(&self, mode: SyncMode, timeout: Duration) -> Error {
        let what = match mode {
            SyncMode::Read => "a device is still writing it (a write fence is unsignalled)",
            SyncMode::Write | SyncMode::ReadWrite => "a device is still using it (a fence is unsignalled)",
        };
        Error {
            kind: ErrorKind::FenceTimeout,
            errno: Some(Errno::TIMEDOUT.raw_os_error()),
            message: format!(
                "the {}-byte {} DMA-BUF (fd {}) was not ready within {:.3} s: {what}",
                self.size(),
                self.kind(),
                self.raw_fd(),
                timeout.as_secs_f64()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::{alloc, HeapSpec};

    #[test]
    fn memory_without_fences_is_ready_at_once() {
        let buf = alloc(4096, &HeapSpec::Memfd).unwrap();
        for mode in [SyncMode::Read, SyncMode::Write, SyncMode::ReadWrite] {
            buf.wait_fences(mode, Some(Duration::ZERO)).unwrap();
            buf.wait_fences(mode, None).unwrap();
        }
    }

    #[test]
    fn a_dmabuf_nobody_fenced_is_ready_at_once() {
        let path = std::path::Path::new("/dev/dma_heap/system");
        if !path.exists() {
            assert!(std::env::var("NPU_ZC_IN_VM").as_deref() != Ok("1"), "{path:?} is missing inside the test VM");
            eprintln!("skipping: no {path:?} on this kernel (real-kernel tests run in the VM)");
            return;
        }
        let buf = alloc(4096, &HeapSpec::DmaHeap("system".into())).unwrap();
        let started = Instant::now();
        for mode in [SyncMode::Read, SyncMode::Write, SyncMode::ReadWrite] {
            buf.wait_fences(mode, Some(Duration::from_secs(5))).unwrap();
            buf.wait_fences(mode, Some(Duration::ZERO)).unwrap();
            // No fences: the exported sync_file is signalled already.
            let sync_file = buf.export_sync_file(mode).unwrap();
            let mut fds = [PollFd::new(&sync_file, PollFlags::IN)];
            assert_eq!(poll(&mut fds, Some(&Timespec { tv_sec: 0, tv_nsec: 0 })).unwrap(), 1);
        }
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn only_a_dmabuf_exports_a_sync_file() {
        let buf = alloc(4096, &HeapSpec::Memfd).unwrap();
        let e = buf.export_sync_file(SyncMode::Read).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidInput);
        assert!(e.message.contains("not a DMA-BUF"), "{}", e.message);
    }

    #[test]
    fn the_timeout_error_says_what_is_late() {
        let buf = alloc(4096, &HeapSpec::Memfd).unwrap();
        let e = buf.fence_timeout(SyncMode::Read, Duration::from_millis(300));
        assert_eq!(e.kind, ErrorKind::FenceTimeout);
        assert_eq!(e.errno, Some(Errno::TIMEDOUT.raw_os_error()));
        assert!(e.message.contains("0.300 s") && e.message.contains("still writing"), "{}", e.message);
    }
}
