//! Passing buffers between processes: fds as SCM_RIGHTS over a Unix socket,
//! with a small payload (the metadata) in the same message.
//!
//! Wire format: a 12-byte header (`NZC1`, fd count, payload length, all
//! little-endian u32) then the payload; the fds ride with the header's bytes.
//! Works on SOCK_STREAM (framed by the header) and SOCK_SEQPACKET.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::io::Errno;
use rustix::net::{
    recvmsg, sendmsg, sockopt, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketType,
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

/// Sends `fds` and `payload` as one message. Blocks until it is all sent.
pub fn send_fds(sock: BorrowedFd<'_>, fds: &[BorrowedFd<'_>], payload: &[u8]) -> Result<()> {
    if fds.len() > MAX_FDS {
        return Err(Error::invalid(format!("cannot send {} fds in one message (at most {MAX_FDS})", fds.len())));
    }
    if payload.len() > MAX_PAYLOAD {
        return Err(Error::invalid(format!("metadata of {} bytes is too large (at most {MAX_PAYLOAD})", payload.len())));
    }
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
        match sendmsg(sock, &[IoSlice::new(&message[sent..])], ctl, SendFlags::NOSIGNAL) {
            Ok(n) => sent += n,
            Err(Errno::INTR) => continue,
            Err(Errno::PIPE) | Err(Errno::CONNRESET) => {
                return Err(protocol("cannot send buffers: the receiving process closed the connection"))
            }
            Err(e) => return Err(Error::from_errno(e, "sendmsg of buffers failed")),
        }
    }
    Ok(())
}

/// Receives one message sent by [`send_fds`]: its fds (owned, CLOEXEC) and payload.
pub fn recv_fds(sock: BorrowedFd<'_>) -> Result<(Vec<OwnedFd>, Vec<u8>)> {
    let stream = sockopt::socket_type(sock).context("cannot query the socket type")? == SocketType::STREAM;
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
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(m) => m,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(Error::from_errno(e, "recvmsg of buffers failed")),
        };
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = m {
                fds.extend(received);
            }
        }
        if msg.flags.contains(ReturnFlags::CTRUNC) {
            return Err(protocol("received more fds than one message may carry; they were dropped by the kernel"));
        }
        if msg.bytes == 0 {
            return Err(protocol(if got == 0 {
                "the sending process closed the connection (no more buffers)"
            } else {
                "the sending process closed the connection in the middle of a message"
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
        read_exact(sock, &mut payload)?;
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

fn read_exact(sock: BorrowedFd<'_>, mut buf: &mut [u8]) -> Result<()> {
    while !buf.is_empty() {
        match rustix::io::read(sock.as_fd(), &mut *buf) {
            Ok(0) => return Err(protocol("the sending process closed the connection in the middle of a message")),
            Ok(n) => buf = &mut buf[n..],
            Err(Errno::INTR) => continue,
            Err(e) => return Err(Error::from_errno(e, "reading buffer metadata failed")),
        }
    }
    Ok(())
}
