//! `BufferPool`: a fixed ring of equal buffers allocated once. A buffer is
//! free, held by the CPU (being written or read), or in flight (bound to a
//! device request); it is handed out again only after it is released.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::dmabuf::DmaBuf;
use super::error::{Error, ErrorKind, Result};
use super::heap::{alloc, HeapSpec};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    Free,
    Cpu,
    InFlight,
}

/// How long `acquire` may wait for a free buffer.
#[derive(Debug, Clone, Copy)]
pub enum Wait {
    No,
    Forever,
    For(Duration),
}

#[derive(Debug)]
pub struct BufferPool {
    buffers: Vec<Arc<DmaBuf>>,
    state: Mutex<Ring>,
    released: Condvar,
}

#[derive(Debug)]
struct Ring {
    slots: Vec<SlotState>,
    /// Where the next search for a free slot starts: buffers go round in order.
    next: usize,
}

impl BufferPool {
    /// Allocates `count` buffers of `size` bytes from `heap`, all up front.
    pub fn new(count: usize, size: usize, heap: &HeapSpec) -> Result<Self> {
        if count == 0 {
            return Err(Error::invalid("a pool needs at least 1 buffer, got 0"));
        }
        let buffers = (0..count).map(|_| alloc(size, heap).map(Arc::new)).collect::<Result<Vec<_>>>()?;
        Ok(BufferPool {
            buffers,
            state: Mutex::new(Ring { slots: vec![SlotState::Free; count], next: 0 }),
            released: Condvar::new(),
        })
    }

    pub fn len(&self) -> usize {
        self.buffers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buffers.is_empty()
    }

    pub fn buffer(&self, index: usize) -> Result<&Arc<DmaBuf>> {
        self.buffers.get(index).ok_or_else(|| self.bad_index(index))
    }

    pub fn buffers(&self) -> &[Arc<DmaBuf>] {
        &self.buffers
    }

    pub fn state(&self, index: usize) -> Result<SlotState> {
        let ring = self.lock();
        ring.slots.get(index).copied().ok_or_else(|| self.bad_index(index))
    }

    pub fn free_count(&self) -> usize {
        self.lock().slots.iter().filter(|s| **s == SlotState::Free).count()
    }

    /// Takes a free buffer for the CPU; its index. Never allocates: when all
    /// are taken it waits as `wait` says, then fails with a Timeout error.
    pub fn acquire(&self, wait: Wait) -> Result<usize> {
        // A deadline past what an Instant holds is no deadline.
        let (wait, deadline) = match wait {
            Wait::For(d) => match Instant::now().checked_add(d) {
                Some(deadline) => (wait, Some(deadline)),
                None => (Wait::Forever, None),
            },
            w => (w, None),
        };
        let mut ring = self.lock();
        loop {
            let n = ring.slots.len();
            if let Some(i) = (0..n).map(|k| (ring.next + k) % n).find(|&i| ring.slots[i] == SlotState::Free) {
                ring.slots[i] = SlotState::Cpu;
                ring.next = (i + 1) % n;
                return Ok(i);
            }
            ring = match (wait, deadline) {
                (Wait::No, _) => return Err(self.exhausted(None)),
                (Wait::Forever, _) => self.released.wait(ring).unwrap_or_else(|p| p.into_inner()),
                (Wait::For(d), Some(deadline)) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(self.exhausted(Some(d)));
                    }
                    self.released.wait_timeout(ring, left).unwrap_or_else(|p| p.into_inner()).0
                }
                (Wait::For(_), None) => unreachable!("a deadline is set for Wait::For"),
            };
        }
    }

    /// Like `acquire`, but the buffer goes back to the pool when the lease drops.
    pub fn lease(&self, wait: Wait) -> Result<Lease<'_>> {
        Ok(Lease { pool: self, index: Some(self.acquire(wait)?) })
    }

    /// Marks a CPU-held buffer as in flight (bound to a device request).
    pub fn submit(&self, index: usize) -> Result<()> {
        self.transition(index, "submit", |s| match s {
            SlotState::Cpu => Some(SlotState::InFlight),
            _ => None,
        })
    }

    /// Returns a held or in-flight buffer to the pool.
    pub fn release(&self, index: usize) -> Result<()> {
        self.transition(index, "release", |s| match s {
            SlotState::Cpu | SlotState::InFlight => Some(SlotState::Free),
            SlotState::Free => None,
        })?;
        self.released.notify_one();
        Ok(())
    }

    fn transition(&self, index: usize, what: &str, f: impl Fn(SlotState) -> Option<SlotState>) -> Result<()> {
        let mut ring = self.lock();
        let slot = ring.slots.get_mut(index).ok_or_else(|| self.bad_index(index))?;
        match f(*slot) {
            Some(next) => {
                *slot = next;
                Ok(())
            }
            None => Err(Error::invalid(format!("cannot {what} pool buffer {index}: it is {:?}", *slot))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        // The ring's state is a plain Vec that no panic leaves half-updated.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bad_index(&self, index: usize) -> Error {
        Error::invalid(format!("pool buffer index {index} is out of range (the pool has {})", self.buffers.len()))
    }

    /// The error of an acquire that found no free buffer (within `waited`).
    pub fn exhausted(&self, waited: Option<Duration>) -> Error {
        let waited = waited.map(|d| format!(" within {:.3} s", d.as_secs_f64())).unwrap_or_default();
        Error::new(
            ErrorKind::Timeout,
            format!(
                "no free buffer in the pool of {}{waited}: all are held or in flight \
                 (release buffers when their requests complete, or make the pool larger)",
                self.buffers.len()
            ),
        )
    }
}

/// A buffer taken from a pool; released when dropped unless submitted.
#[derive(Debug)]
pub struct Lease<'a> {
    pool: &'a BufferPool,
    index: Option<usize>,
}

impl Lease<'_> {
    pub fn index(&self) -> usize {
        self.index.expect("a lease holds an index until it is consumed")
    }

    pub fn buffer(&self) -> &Arc<DmaBuf> {
        &self.pool.buffers[self.index()]
    }

    /// Marks the buffer in flight and gives up the lease: the caller now
    /// releases `index` when the device is done with it.
    pub fn submit(mut self) -> Result<usize> {
        let index = self.index.take().expect("a lease holds an index until it is consumed");
        self.pool.submit(index)?;
        Ok(index)
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(index) = self.index.take() {
            let _ = self.pool.release(index);
        }
    }
}
