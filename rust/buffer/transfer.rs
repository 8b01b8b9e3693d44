//! Passing buffers between processes: fds as SCM_RIGHTS over a Unix socket,
//! with a small payload (the metadata) in the same message.
//!
//! Wire format: a 12-byte header (`NZC1`, fd count, payload length, all
//! little-endian u32) then the payload; the fds ride with the header's bytes.
//! Works on SOCK_STREAM (framed by the header) and SOCK_SEQPACKET.
//!
//! Time limits: a call waits (in poll, never in the syscall itself: the
//! socket is used with MSG_DONTWAIT whatever its mode) until a deadline. A
//! timeout before any byte of a message moved is a `PeerTimeout` and leaves the
//! stream as it was. A timeout in the middle of a message would leave the rest
//! of it to be read as the start of the next, so the socket is shut down and
//! the error is `Protocol`: every later call says the connection is closed.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fd::{BorrowedFd, OwnedFd};
use rustix::io::Errno;
use rustix::net::{
    recv, recvmsg, sendmsg, shutdown, sockopt, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags, Shutdown, SocketType,
};

use super::error::{Context, Error, ErrorKind, Result};

const MAGIC: &[u8; 4] = b"NZC1";
const HEADER: usize = 12;
/// The kernel's SCM_MAX_FD: the most fds one message can carry.
pub const MAX_FDS: usize = 253;
/// Metadata is meant to be small (sizes, kinds, shape, format).
pub const MAX_PAYLOAD: usize = 1 << 20;

fn protocol(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Protocol, message)
}

/// Asked when a wait is interrupted by a signal: true stops the call (the
/// caller has something to raise, e.g. KeyboardInterrupt), false waits on.
pub type Interrupted<'a> = &'a mut dyn FnMut() -> bool;

/// When a call must be done by; None waits for ever (also for a timeout too
/// large for an Instant).
#[derive(Clone, Copy)]
struct Deadline {
    at: Option<Instant>,
    timeout: Option<Duration>,
}

impl Deadline {
    fn after(timeout: Option<Duration>) -> Self {
        Deadline { at: timeout.and_then(|t| Instant::now().checked_add(t)), timeout }
    }

    fn seconds(&self) -> String {
        self.timeout.map(|t| format!("{:.3} s", t.as_secs_f64())).unwrap_or_default()
    }
}

/// Why a wait ended without the socket being ready.
enum Stop {
    TimedOut,
    Interrupted,
}

/// Waits until `sock` is ready for `events` (or has an error or hang-up, which
/// the next syscall reports), the deadline passes, or a signal stops the call.
fn wait(
    sock: BorrowedFd<'_>,
    events: PollFlags,
    deadline: Deadline,
    interrupted: Interrupted<'_>,
) -> Result<Option<Stop>> {
    loop {
        let left = deadline.at.map(|at| {
            let left = at.saturating_duration_since(Instant::now());
            Timespec { tv_sec: left.as_secs() as _, tv_nsec: left.subsec_nanos() as _ }
        });
        let mut fds = [PollFd::new(&sock, events)];
        match poll(&mut fds, left.as_ref()) {
            Ok(0) => return Ok(Some(Stop::TimedOut)),
            Ok(_) => return Ok(None),
            Err(Errno::INTR) => {
                if interrupted() {
                    return Ok(Some(Stop::Interrupted));
                }
            }
            Err(e) => return Err(Error::from_errno(e, "poll of the socket failed")),
        }
    }
}

/// The error for a wait that stopped: before any byte of the message moved the
/// stream is intact; after, it is shut down so that nobody reads the rest of
/// this message as the next one.
fn stopped(sock: BorrowedFd<'_>, stop: Stop, mid_message: bool, what: &str, deadline: Deadline) -> Error {
    let events_out = what.starts_with("sending");
    match (stop, mid_message) {
        (Stop::TimedOut, false) => Error {
            kind: ErrorKind::PeerTimeout,
            errno: Some(Errno::TIMEDOUT.raw_os_error()),
            message: format!(
                "{what} timed out after {}: the other process {} (the connection is intact: try again)",
                deadline.seconds(),
                if events_out { "is not reading (its socket buffer is full)" } else { "sent nothing" }
            ),
        },
        (Stop::Interrupted, false) => Error {
            kind: ErrorKind::Os,
            errno: Some(Errno::INTR.raw_os_error()),
            message: format!("{what} was interrupted by a signal"),
        },
        (stop, true) => {
            let _ = shutdown(sock, Shutdown::Both);
            let why = match stop {
                Stop::TimedOut => format!("timed out after {}", deadline.seconds()),
                Stop::Interrupted => "was interrupted by a signal".to_string(),
            };
            protocol(format!(
                "{what} {why} in the middle of a message: the connection is now closed, since the rest of \
                 that message could no longer be told from the next"
            ))
        }
    }
}

/// Sends `fds` and `payload` as one message, waiting as long as it takes.
pub fn send_fds(sock: BorrowedFd<'_>, fds: &[BorrowedFd<'_>], payload: &[u8]) -> Result<()> {
    send_fds_within(sock, fds, payload, None, &mut || false)
}

/// Sends `fds` and `payload` as one message, within `timeout` (None: no limit).
pub fn send_fds_within(
    sock: BorrowedFd<'_>,
    fds: &[BorrowedFd<'_>],
    payload: &[u8],
    timeout: Option<Duration>,
    interrupted: Interrupted<'_>,
) -> Result<()> {
    if fds.len() > MAX_FDS {
        return Err(Error::invalid(format!("cannot send {} fds in one message (at most {MAX_FDS})", fds.len())));
    }
    if payload.len() > MAX_PAYLOAD {
        return Err(Error::invalid(format!(
            "metadata of {} bytes is too large (at most {MAX_PAYLOAD})",
            payload.len()
        )));
    }
    let deadline = Deadline::after(timeout);
    let mut header = [0u8; HEADER];
    header[..4].copy_from_slice(MAGIC);
    header[4..8].copy_from_slice(&(fds.len() as u32).to_le_bytes());
    header[8..].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    let message = [&header[..], payload].concat();

    let mut space = vec![MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(Error::invalid("the fds do not fit in one control message"));
    }
    let mut sent = 0;
    while sent < message.len() {
        // The fds go with the first chunk only.
        let mut no_control = SendAncillaryBuffer::default();
        let ctl = if sent == 0 { &mut control } else { &mut no_control };
        match sendmsg(sock, &[IoSlice::new(&message[sent..])], ctl, SendFlags::NOSIGNAL | SendFlags::DONTWAIT) {
            Ok(n) => sent += n,
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => {
                if let Some(stop) = wait(sock, PollFlags::OUT, deadline, interrupted)? {
                    return Err(stopped(sock, stop, sent > 0, "sending buffers", deadline));
                }
            }
            Err(Errno::PIPE) | Err(Errno::CONNRESET) => {
                return Err(protocol("cannot send buffers: the receiving process closed the connection"))
            }
            Err(e) => return Err(Error::from_errno(e, "sendmsg of buffers failed")),
        }
    }
    Ok(())
}

const MID_MESSAGE_CLOSE: &str = "the sending process closed the connection in the middle of a message";

/// Receives one message sent by [`send_fds`]: its fds (owned, CLOEXEC) and
/// payload, waiting as long as it takes.
pub fn recv_fds(sock: BorrowedFd<'_>) -> Result<(Vec<OwnedFd>, Vec<u8>)> {
    recv_fds_within(sock, None, &mut || false)
}

/// Receives one message within `timeout` (None: no limit).
pub fn recv_fds_within(
    sock: BorrowedFd<'_>,
    timeout: Option<Duration>,
    interrupted: Interrupted<'_>,
) -> Result<(Vec<OwnedFd>, Vec<u8>)> {
    let stream = sockopt::socket_type(sock).context("cannot query the socket type")? == SocketType::STREAM;
    let deadline = Deadline::after(timeout);
    let mut space = vec![MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut fds: Vec<OwnedFd> = Vec::new();
    // Stream: read exactly the header first, so that the next message's bytes
    // stay in the socket. Seqpacket: the whole message arrives at once.
    let first_len = if stream { HEADER } else { HEADER + MAX_PAYLOAD };
    let mut buf = vec![0u8; first_len];
    let mut got = 0;
    while got < HEADER {
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let msg = match recvmsg(
            sock,
            &mut [IoSliceMut::new(&mut buf[got..])],
            &mut control,
            RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
        ) {
            Ok(m) => m,
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => {
                if let Some(stop) = wait(sock, PollFlags::IN, deadline, interrupted)? {
                    return Err(stopped(sock, stop, got > 0, "receiving buffers", deadline));
                }
                continue;
            }
            // A peer that dies with our messages unread resets the connection.
            Err(Errno::CONNRESET) if got == 0 => {
                return Err(protocol("the sending process closed the connection (no more buffers)"))
            }
            Err(Errno::CONNRESET) => return Err(protocol(MID_MESSAGE_CLOSE)),
            Err(e) => return Err(Error::from_errno(e, "recvmsg of buffers failed")),
        };
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = m {
                fds.extend(received);
            }
        }
        // Each chunk of a header split over many sends may carry up to MAX_FDS: cap the message's total.
        if fds.len() > MAX_FDS {
            let _ = shutdown(sock, Shutdown::Both);
            return Err(protocol(format!(
                "the sending process sent more than {MAX_FDS} fds with one message (one message carries at most \
                 {MAX_FDS}); they were closed and the connection is now closed"
            )));
        }
        if msg.flags.contains(ReturnFlags::CTRUNC) {
            return Err(protocol("received more fds than one message may carry; they were dropped by the kernel"));
        }
        if msg.bytes == 0 && !stream && !peer_hung_up(sock) {
            return Err(protocol("received an empty message, which npu_zc.send_buffers never sends"));
        }
        if msg.bytes == 0 {
            return Err(protocol(if got == 0 {
                "the sending process closed the connection (no more buffers)"
            } else {
                MID_MESSAGE_CLOSE
            }));
        }
        got += msg.bytes;
        if !stream {
            break;
        }
    }
    if got < HEADER || &buf[..4] != MAGIC {
        return Err(protocol("received a message that npu_zc.send_buffers did not send"));
    }
    let nfds = u32::from_le_bytes(buf[4..8].try_into().unwrap()) as usize;
    let len = u32::from_le_bytes(buf[8..12].try_into().unwrap()) as usize;
    if len > MAX_PAYLOAD {
        return Err(protocol(format!("announced metadata of {len} bytes is over the limit")));
    }
    let mut payload = buf.get(HEADER..got).unwrap_or_default().to_vec();
    if stream {
        payload.resize(len, 0);
        read_exact(sock, &mut payload, deadline, interrupted)?;
    } else {
        payload.truncate(len);
        if payload.len() != len {
            return Err(protocol("a message arrived shorter than its header says"));
        }
    }
    if fds.len() != nfds {
        return Err(protocol(format!("expected {nfds} fds with the message, received {}", fds.len())));
    }
    Ok((fds, payload))
}

/// On SOCK_SEQPACKET a read of 0 bytes is either an empty message or the end
/// of the connection: only a hang-up tells them apart.
fn peer_hung_up(sock: BorrowedFd<'_>) -> bool {
    let mut fds = [PollFd::new(&sock, PollFlags::IN | PollFlags::RDHUP)];
    let zero = Timespec { tv_sec: 0, tv_nsec: 0 };
    match poll(&mut fds, Some(&zero)) {
        Ok(_) => fds[0].revents().intersects(PollFlags::HUP | PollFlags::RDHUP),
        Err(_) => true,
    }
}

/// The rest of a message whose header was read: any stop here is mid-message.
fn read_exact(
    sock: BorrowedFd<'_>,
    mut buf: &mut [u8],
    deadline: Deadline,
    interrupted: Interrupted<'_>,
) -> Result<()> {
    while !buf.is_empty() {
        match recv(sock, &mut *buf, RecvFlags::DONTWAIT) {
            Ok((0, _)) | Err(Errno::CONNRESET) => return Err(protocol(MID_MESSAGE_CLOSE)),
            Ok((n, _)) => buf = &mut buf[n..],
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => {
                if let Some(stop) = wait(sock, PollFlags::IN, deadline, interrupted)? {
                    return Err(stopped(sock, stop, true, "receiving buffer metadata", deadline));
                }
            }
            Err(e) => return Err(Error::from_errno(e, "reading buffer metadata failed")),
        }
    }
    Ok(())
}
