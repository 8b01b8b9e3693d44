//! `Stream`: a capture node streaming into DMA-BUFs, with no copy anywhere.
//!
//! * `dmabuf` memory: the driver imports our buffers (`V4L2_MEMORY_DMABUF`)
//!   and writes each frame straight into one of them.
//! * `mmap` memory: the driver allocates; each buffer is exported once with
//!   `VIDIOC_EXPBUF` and used from then on as a `DmaBuf` like ours.
//!
//! A buffer is either queued (the driver may write it) or held (the
//! application reads it, the driver cannot touch it) until released. Closing
//! stops the stream and takes every buffer back from the driver; the memory
//! itself lives on while anything (a held frame, a numpy view) still refers
//! to it, so nothing ever points at freed memory.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;

use super::device::{Device, DeviceInfo, Format, Fourcc};
use super::error::{Error, ErrorKind, Result};
use super::sys;
use crate::buffer::{DmaBuf, FdClass, Kind};

/// Who allocates the frame buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// Ours, imported by the driver (V4L2_MEMORY_DMABUF).
    DmaBuf,
    /// The driver's, exported to us (V4L2_MEMORY_MMAP + VIDIOC_EXPBUF).
    Mmap,
}

impl Memory {
    pub fn name(self) -> &'static str {
        match self {
            Memory::DmaBuf => "dmabuf",
            Memory::Mmap => "mmap",
        }
    }
}

/// The buffers a stream captures into.
pub enum Buffers {
    /// Our DMA-BUFs, each at least `sizeimage` bytes.
    Import(Vec<Arc<DmaBuf>>),
    /// This many driver buffers.
    Mmap(usize),
}

/// What `next_frame` does when the application holds every buffer (so the
/// driver has none to fill).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenFull {
    /// Wait for another thread to release a frame; fail with `FramesHeld`
    /// when none comes back within the timeout.
    Wait,
    /// Take back the oldest held frame (it is marked dropped and its memory
    /// will be overwritten by a later capture) and go on.
    Drop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// With the driver.
    Queued,
    /// With the application; the ticket tells this hold from later ones.
    Held(u64),
    /// Not with the driver (never queued, or the stream stopped).
    Idle,
}

/// One captured frame: which buffer holds it, and what the driver said.
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    pub index: usize,
    pub ticket: u64,
    pub sequence: u32,
    /// The driver's timestamp (CLOCK_MONOTONIC for most drivers), in ns.
    pub timestamp_ns: u64,
    pub bytesused: usize,
    /// Offset of the image in the buffer (multi-planar `data_offset`).
    pub offset: usize,
    /// The driver marked the frame corrupt (V4L2_BUF_FLAG_ERROR).
    pub corrupt: bool,
    /// Frames the driver dropped just before this one (a sequence gap).
    pub dropped_before: u32,
}

#[derive(Debug)]
struct State {
    device: Option<Arc<Device>>,
    /// Dropped on close: the fds close as soon as nobody else holds them.
    buffers: Vec<Arc<DmaBuf>>,
    slots: Vec<Slot>,
    next_ticket: u64,
    last_sequence: Option<u32>,
    frames: u64,
    dropped: u64,
    reclaimed: u64,
    /// The stream failed (device gone): every later call says so.
    failed: Option<Error>,
}

#[derive(Debug)]
pub struct Stream {
    info: DeviceInfo,
    format: Format,
    memory: Memory,
    state: Mutex<State>,
    released: Condvar,
}

impl Stream {
    /// Opens `path`, sets the format and starts streaming into `buffers`.
    pub fn open(path: &str, width: u32, height: u32, fourcc: Fourcc, buffers: Buffers) -> Result<Self> {
        let dev = Device::open(path)?;
        let format = dev.set_format(width, height, fourcc)?;
        Self::start(dev, format, buffers)
    }

    /// Starts streaming on a device whose format is set. On failure every
    /// buffer is taken back and the device closed (by `Drop`).
    pub fn start(dev: Device, format: Format, buffers: Buffers) -> Result<Self> {
        let memory = match buffers {
            Buffers::Import(_) => Memory::DmaBuf,
            Buffers::Mmap(_) => Memory::Mmap,
        };
        let wanted = match &buffers {
            Buffers::Import(b) => b.len(),
            Buffers::Mmap(n) => *n,
        };
        let shown = dev.info.path.display().to_string();
        if wanted == 0 {
            return Err(Error::new(ErrorKind::Unsupported, format!("cannot capture from {shown} with 0 buffers")));
        }
        if let Buffers::Import(bufs) = &buffers {
            for (i, b) in bufs.iter().enumerate() {
                if !b.is_dmabuf() {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        format!(
                            "buffer {i} ({}) is not a DMA-BUF: {shown} can only import DMA-BUFs; \
                             allocate from a dma-heap or udmabuf, or use memory=\"mmap\"",
                            b.kind()
                        ),
                    ));
                }
                if b.size() < format.sizeimage as usize {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        format!(
                            "buffer {i} has {} bytes, but {}x{} {} on {shown} needs {} bytes per frame (sizeimage): \
                             give buffers of at least that size",
                            b.size(),
                            format.width,
                            format.height,
                            format.fourcc,
                            format.sizeimage
                        ),
                    ));
                }
            }
        }
        let info = dev.info.clone();
        let dev = Arc::new(dev);
        let stream = Stream {
            info,
            format,
            memory,
            state: Mutex::new(State {
                device: Some(dev.clone()),
                buffers: Vec::new(),
                slots: Vec::new(),
                next_ticket: 1,
                last_sequence: None,
                frames: 0,
                dropped: 0,
                reclaimed: 0,
                failed: None,
            }),
            released: Condvar::new(),
        };
        let buf_type = stream.info.buf_type();
        let v4l2_memory = match memory {
            Memory::DmaBuf => sys::MEMORY_DMABUF,
            Memory::Mmap => sys::MEMORY_MMAP,
        };
        let mut req =
            sys::RequestBuffers { count: wanted as u32, type_: buf_type, memory: v4l2_memory, ..Default::default() };
        sys::reqbufs(dev.fd(), &mut req).map_err(|e| match e {
            Errno::INVAL => Error::os(
                e,
                Some(ErrorKind::Unsupported),
                format_args!("{shown} ({}) refused {} buffers (VIDIOC_REQBUFS)", stream.info.card, memory.name()),
            )
            .hint(match memory {
                Memory::DmaBuf => "the driver cannot import DMA-BUFs: use memory=\"mmap\"",
                Memory::Mmap => "the driver cannot allocate streaming buffers",
            }),
            Errno::BUSY => Error::os(e, Some(ErrorKind::Busy), format_args!("cannot allocate buffers on {shown}"))
                .hint("another process or file handle is capturing from it; close that first"),
            e => dev.fail(e, "VIDIOC_REQBUFS"),
        })?;
        let count = req.count as usize;
        match buffers {
            Buffers::Import(bufs) => {
                if count > bufs.len() || count == 0 {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        format!("{shown} needs {count} buffers, {} were given: use buffers={count}", bufs.len()),
                    ));
                }
                stream.lock().buffers = bufs.into_iter().take(count).collect();
            }
            Buffers::Mmap(_) => {
                let owner = Kind::Device(format!("v4l2:{}", stream.info.driver));
                for index in 0..count {
                    let length = stream.query_length(&dev, index)?;
                    let fd = sys::expbuf(dev.fd(), buf_type, index as u32).map_err(|e| match e {
                        Errno::NOTTY | Errno::INVAL => Error::os(
                            e,
                            Some(ErrorKind::Unsupported),
                            format_args!(
                                "{shown} ({}) cannot export its buffers as DMA-BUFs (VIDIOC_EXPBUF)",
                                stream.info.card
                            ),
                        )
                        .hint("use memory=\"dmabuf\" with a dma-heap or udmabuf"),
                        e => dev.fail(e, "VIDIOC_EXPBUF"),
                    })?;
                    stream.lock().buffers.push(Arc::new(DmaBuf::new(fd, length, owner.clone(), FdClass::DmaBuf)));
                }
            }
        }
        {
            let mut st = stream.lock();
            st.slots = vec![Slot::Idle; st.buffers.len()];
            for index in 0..st.buffers.len() {
                stream.queue(&dev, index, &st).map_err(|e| match (memory, e.errno) {
                    // EINVAL at QBUF of an import: the driver cannot use this memory
                    // (e.g. a contiguous-memory driver and a scattered heap).
                    (Memory::DmaBuf, Some(22)) => Error {
                        kind: ErrorKind::Unsupported,
                        ..e.hint(format_args!(
                            "the driver could not import {} buffer {index}; try another heap or memory=\"mmap\"",
                            st.buffers[index].kind()
                        ))
                    },
                    _ => e,
                })?;
                st.slots[index] = Slot::Queued;
            }
        }
        sys::streamon(dev.fd(), buf_type).map_err(|e| dev.fail(e, "VIDIOC_STREAMON"))?;
        Ok(stream)
    }

    fn query_length(&self, dev: &Device, index: usize) -> Result<usize> {
        let mut planes = [sys::Plane::default(); 1];
        let mut b = self.v4l2_buffer(index);
        self.attach(&mut b, &mut planes);
        // SAFETY: for a multi-planar type `m.planes` points to `planes`
        // (length 1), alive until the call returns.
        unsafe { sys::querybuf(dev.fd(), &mut b) }.map_err(|e| dev.fail(e, "VIDIOC_QUERYBUF"))?;
        Ok(if self.info.multiplanar { planes[0].length } else { b.length } as usize)
    }

    /// A `v4l2_buffer` for `index`.
    fn v4l2_buffer(&self, index: usize) -> sys::Buffer {
        let memory = match self.memory {
            Memory::DmaBuf => sys::MEMORY_DMABUF,
            Memory::Mmap => sys::MEMORY_MMAP,
        };
        sys::Buffer::new(self.info.buf_type(), memory, index as u32)
    }

    /// Points a multi-planar buffer at its planes; call it last, just before
    /// the ioctl, so that the pointer is the last borrow of `planes`.
    fn attach(&self, b: &mut sys::Buffer, planes: &mut [sys::Plane; 1]) {
        if self.info.multiplanar {
            b.m.planes = planes.as_mut_ptr();
            b.length = 1;
        }
    }

    /// VIDIOC_QBUF of buffer `index` (our fd in dmabuf mode).
    fn queue(&self, dev: &Device, index: usize, st: &State) -> Result<()> {
        let mut planes = [sys::Plane::default(); 1];
        let mut b = self.v4l2_buffer(index);
        if self.memory == Memory::DmaBuf {
            use rustix::fd::AsRawFd;
            let buf = &st.buffers[index];
            let fd = buf.fd().as_raw_fd();
            if self.info.multiplanar {
                planes[0].m.fd = fd;
                planes[0].length = buf.size() as u32;
            } else {
                b.m.fd = fd;
                b.length = buf.size() as u32;
            }
        }
        self.attach(&mut b, &mut planes);
        // SAFETY: `planes` outlives the call and `m.planes` points to it (attach).
        unsafe { sys::qbuf(dev.fd(), &mut b) }.map_err(|e| dev.fail(e, format_args!("VIDIOC_QBUF of buffer {index}")))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is plain bookkeeping that no panic leaves half-updated.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn usable(&self, st: &State) -> Result<Arc<Device>> {
        if let Some(e) = &st.failed {
            return Err(e.clone());
        }
        st.device
            .clone()
            .ok_or_else(|| Error::new(ErrorKind::Closed, format!("the camera {} is closed", self.info.path.display())))
    }

    /// The next frame, waiting at most `timeout`. The frame's buffer is held
    /// (the driver will not write it) until `release`.
    pub fn next_frame(&self, timeout: Duration, when_full: WhenFull) -> Result<Frame> {
        let deadline = Instant::now() + timeout;
        loop {
            let dev = self.device_with_a_queued_buffer(deadline, timeout, when_full)?;
            let left = deadline.saturating_duration_since(Instant::now());
            let ts = Timespec { tv_sec: left.as_secs() as i64, tv_nsec: left.subsec_nanos() as i64 };
            let fd = dev.fd();
            let mut fds = [PollFd::new(&fd, PollFlags::IN)];
            match poll(&mut fds, Some(&ts)) {
                Ok(0) => return Err(self.no_frame(timeout)),
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(e) => return Err(dev.fail(e, "poll")),
            }
            let revents = fds[0].revents();
            let mut planes = [sys::Plane::default(); 1];
            let mut b = self.v4l2_buffer(0);
            self.attach(&mut b, &mut planes);
            // SAFETY: `planes` outlives the call and `m.planes` points to it (attach).
            match unsafe { sys::dqbuf(dev.fd(), &mut b) } {
                Ok(()) => return Ok(self.record(&b, &planes[0])),
                Err(Errno::AGAIN) => {
                    // Another thread took the frame, or the queue reports an
                    // error with nothing to dequeue (stopped): look again.
                    if Instant::now() >= deadline {
                        return Err(self.no_frame(timeout));
                    }
                    if revents.intersects(PollFlags::ERR | PollFlags::HUP) {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
                Err(e) => {
                    let err = dev.fail(e, "VIDIOC_DQBUF");
                    let mut st = self.lock();
                    if st.device.is_none() {
                        // Closed by another thread while we waited.
                        return Err(self.usable(&st).unwrap_err());
                    }
                    if err.kind == ErrorKind::Disconnected || e == Errno::PIPE || e == Errno::IO {
                        st.failed = Some(err.clone());
                    }
                    return Err(err);
                }
            }
        }
    }

    /// Makes sure the driver has a buffer to fill, as `when_full` says.
    fn device_with_a_queued_buffer(
        &self,
        deadline: Instant,
        timeout: Duration,
        when_full: WhenFull,
    ) -> Result<Arc<Device>> {
        let mut st = self.lock();
        loop {
            let dev = self.usable(&st)?;
            if st.slots.contains(&Slot::Queued) {
                return Ok(dev);
            }
            match when_full {
                WhenFull::Wait => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(self.all_held(timeout, st.slots.len()));
                    }
                    st = self.released.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
                }
                WhenFull::Drop => {
                    let oldest = st
                        .slots
                        .iter()
                        .enumerate()
                        .filter_map(|(i, s)| match s {
                            Slot::Held(t) => Some((*t, i)),
                            _ => None,
                        })
                        .min()
                        .map(|(_, i)| i);
                    let Some(index) = oldest else {
                        return Err(Error::new(ErrorKind::Os, "no buffer is queued or held: the stream is stopped"));
                    };
                    self.queue(&dev, index, &st)?;
                    st.slots[index] = Slot::Queued;
                    st.reclaimed += 1;
                }
            }
        }
    }

    fn record(&self, b: &sys::Buffer, plane: &sys::Plane) -> Frame {
        let mut st = self.lock();
        let index = b.index as usize;
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        if let Some(slot) = st.slots.get_mut(index) {
            *slot = Slot::Held(ticket);
        }
        let dropped_before = match st.last_sequence {
            Some(last) => b.sequence.wrapping_sub(last).wrapping_sub(1),
            None => 0,
        };
        st.last_sequence = Some(b.sequence);
        st.frames += 1;
        st.dropped += u64::from(dropped_before);
        let (bytesused, offset) = if self.info.multiplanar {
            (plane.bytesused as usize, plane.data_offset as usize)
        } else {
            (b.bytesused as usize, 0)
        };
        let timestamp_ns =
            (b.timestamp.tv_sec as u64).saturating_mul(1_000_000_000) + (b.timestamp.tv_usec as u64) * 1000;
        Frame {
            index,
            ticket,
            sequence: b.sequence,
            timestamp_ns,
            bytesused: bytesused.saturating_sub(offset),
            offset,
            corrupt: b.flags & sys::BUF_FLAG_ERROR != 0,
            dropped_before,
        }
    }

    /// Gives a held frame's buffer back to the driver. A frame taken back
    /// already (by `WhenFull::Drop` or `close`) is a no-op: returns false.
    pub fn release(&self, index: usize, ticket: u64) -> Result<bool> {
        let mut st = self.lock();
        if st.slots.get(index) != Some(&Slot::Held(ticket)) {
            return Ok(false);
        }
        match (&st.failed, st.device.clone()) {
            (None, Some(dev)) => {
                self.queue(&dev, index, &st)?;
                st.slots[index] = Slot::Queued;
            }
            // Stopped or failed: the buffer just stops being held.
            _ => st.slots[index] = Slot::Idle,
        }
        drop(st);
        self.released.notify_all();
        Ok(true)
    }

    /// True while the frame with this ticket is still held (not taken back).
    pub fn is_held(&self, index: usize, ticket: u64) -> bool {
        self.lock().slots.get(index) == Some(&Slot::Held(ticket))
    }

    /// Stops the stream, takes every buffer back from the driver and closes
    /// the device. Held frames stay readable: their memory is kept alive by
    /// whoever holds it, and the driver no longer writes it.
    pub fn close(&self) {
        let dev = {
            let mut st = self.lock();
            st.slots.iter_mut().for_each(|s| *s = Slot::Idle);
            st.buffers.clear();
            st.device.take()
        };
        if let Some(dev) = dev {
            // Failures here (the device is gone) leave nothing to undo:
            // closing the fd releases the queue in any case.
            let _ = sys::streamoff(dev.fd(), self.info.buf_type());
            let memory = match self.memory {
                Memory::DmaBuf => sys::MEMORY_DMABUF,
                Memory::Mmap => sys::MEMORY_MMAP,
            };
            let mut req = sys::RequestBuffers { count: 0, type_: self.info.buf_type(), memory, ..Default::default() };
            let _ = sys::reqbufs(dev.fd(), &mut req);
        }
        self.released.notify_all();
    }

    pub fn is_closed(&self) -> bool {
        self.lock().device.is_none()
    }

    /// The open device (for controls), or a Closed/failed error.
    pub fn device(&self) -> Result<Arc<Device>> {
        self.usable(&self.lock())
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn memory(&self) -> Memory {
        self.memory
    }

    /// The frame buffers (none once closed).
    pub fn buffers(&self) -> Vec<Arc<DmaBuf>> {
        self.lock().buffers.clone()
    }

    pub fn held(&self) -> usize {
        self.lock().slots.iter().filter(|s| matches!(s, Slot::Held(_))).count()
    }

    pub fn queued(&self) -> usize {
        self.lock().slots.iter().filter(|s| **s == Slot::Queued).count()
    }

    /// (frames captured, frames the driver dropped (sequence gaps), held
    /// frames taken back by `WhenFull::Drop`).
    pub fn counters(&self) -> (u64, u64, u64) {
        let st = self.lock();
        (st.frames, st.dropped, st.reclaimed)
    }

    fn no_frame(&self, timeout: Duration) -> Error {
        Error::new(
            ErrorKind::Timeout,
            format!(
                "no frame from {} ({}) within {:.3} s while {} buffer(s) were queued: \
                 is the camera streaming (lens cap, trigger mode, frame rate)? give a longer timeout",
                self.info.path.display(),
                self.info.card,
                timeout.as_secs_f64(),
                self.queued()
            ),
        )
    }

    fn all_held(&self, timeout: Duration, count: usize) -> Error {
        Error::new(
            ErrorKind::FramesHeld,
            format!(
                "the application holds all {count} frames of {} and none was released within {:.3} s: \
                 release frames when done (frame.release() or `with frame:`), capture with more buffers, \
                 or use when_full=\"drop\" to take the oldest back",
                self.info.path.display(),
                timeout.as_secs_f64()
            ),
        )
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.close();
    }
}
