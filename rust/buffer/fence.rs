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

use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fd::AsRawFd;
use rustix::io::Errno;

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

impl DmaBuf {
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
        }
        assert!(started.elapsed() < Duration::from_secs(5));
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
