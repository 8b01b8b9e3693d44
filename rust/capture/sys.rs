//! The V4L2 ioctls npu_zc uses, with the structs of <linux/videodev2.h>
//! declared by hand.
//!
//! Why not a crate: `v4l2r` (0.0.x) and `v4l`/`v4l2-sys-mit` generate their
//! bindings with bindgen at build time, which needs libclang on every build
//! machine (CI and the aarch64 cross build included), and `v4l` has no DMABUF
//! import at all. The dozen structs we need are stable kernel ABI; they are
//! declared here as in buffer/sys.rs and their sizes and offsets are checked
//! at compile time against the values the C compiler gives for the header
//! (x86_64 and aarch64: the same LP64 layout).

use rustix::fd::{BorrowedFd, FromRawFd, OwnedFd};
use rustix::io::{Errno, Result};
use rustix::ioctl::{ioctl, opcode, Getter, Opcode, Setter, Updater};

pub const BUF_TYPE_VIDEO_CAPTURE: u32 = 1;
pub const BUF_TYPE_VIDEO_CAPTURE_MPLANE: u32 = 9;

pub const MEMORY_MMAP: u32 = 1;
pub const MEMORY_DMABUF: u32 = 4;

pub const FIELD_NONE: u32 = 1;

pub const CAP_VIDEO_CAPTURE: u32 = 0x0000_0001;
pub const CAP_VIDEO_CAPTURE_MPLANE: u32 = 0x0000_1000;
pub const CAP_STREAMING: u32 = 0x0400_0000;
pub const CAP_DEVICE_CAPS: u32 = 0x8000_0000;

pub const BUF_FLAG_ERROR: u32 = 0x0000_0040;

pub const FRMSIZE_TYPE_DISCRETE: u32 = 1;
pub const FRMSIZE_TYPE_CONTINUOUS: u32 = 2;

pub const CTRL_FLAG_NEXT_CTRL: u32 = 0x8000_0000;
pub const CTRL_FLAG_DISABLED: u32 = 0x0001;
pub const CTRL_TYPE_CTRL_CLASS: u32 = 6;

/// `struct v4l2_capability`
#[repr(C)]
pub struct Capability {
    pub driver: [u8; 16],
    pub card: [u8; 32],
    pub bus_info: [u8; 32],
    pub version: u32,
    pub capabilities: u32,
    pub device_caps: u32,
    pub reserved: [u32; 3],
}

/// `struct v4l2_fmtdesc`
#[repr(C)]
#[derive(Default)]
pub struct FmtDesc {
    pub index: u32,
    pub type_: u32,
    pub flags: u32,
    pub description: [u8; 32],
    pub pixelformat: u32,
    pub mbus_code: u32,
    pub reserved: [u32; 3],
}

/// `struct v4l2_frmsizeenum`; the union holds either `discrete` (width,
/// height) or `stepwise` (min_w, max_w, step_w, min_h, max_h, step_h).
#[repr(C)]
#[derive(Default)]
pub struct FrmSizeEnum {
    pub index: u32,
    pub pixel_format: u32,
    pub type_: u32,
    pub size: [u32; 6],
    pub reserved: [u32; 2],
}

/// `struct v4l2_pix_format`
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct PixFormat {
    pub width: u32,
    pub height: u32,
    pub pixelformat: u32,
    pub field: u32,
    pub bytesperline: u32,
    pub sizeimage: u32,
    pub colorspace: u32,
    pub priv_: u32,
    pub flags: u32,
    pub ycbcr_enc: u32,
    pub quantization: u32,
    pub xfer_func: u32,
}

/// `struct v4l2_plane_pix_format` (packed in the header)
#[repr(C, packed)]
#[derive(Clone, Copy, Default)]
pub struct PlanePixFormat {
    pub sizeimage: u32,
    pub bytesperline: u32,
    pub reserved: [u16; 6],
}

/// `struct v4l2_pix_format_mplane` (packed in the header)
#[repr(C, packed)]
#[derive(Clone, Copy, Default)]
pub struct PixFormatMplane {
    pub width: u32,
    pub height: u32,
    pub pixelformat: u32,
    pub field: u32,
    pub colorspace: u32,
    pub plane_fmt: [PlanePixFormat; 8],
    pub num_planes: u8,
    pub flags: u8,
    pub ycbcr_enc: u8,
    pub quantization: u8,
    pub xfer_func: u8,
    pub reserved: [u8; 7],
}

/// The union of `struct v4l2_format`: 200 bytes, 8-aligned (one member,
/// `struct v4l2_window`, holds pointers).
#[repr(C)]
#[derive(Clone, Copy)]
pub union FormatUnion {
    pub pix: PixFormat,
    pub pix_mp: PixFormatMplane,
    pub raw: [u64; 25],
}

/// `struct v4l2_format`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Format {
    pub type_: u32,
    pub fmt: FormatUnion,
}

impl Format {
    pub fn new(type_: u32) -> Self {
        Format { type_, fmt: FormatUnion { raw: [0; 25] } }
    }
}

/// `struct v4l2_requestbuffers`
#[repr(C)]
#[derive(Default)]
pub struct RequestBuffers {
    pub count: u32,
    pub type_: u32,
    pub memory: u32,
    pub capabilities: u32,
    pub flags: u8,
    pub reserved: [u8; 3],
}

/// `struct timeval` as the 64-bit kernel ABI lays it out in `v4l2_buffer`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Timeval {
    pub tv_sec: i64,
    pub tv_usec: i64,
}

/// The `m` union of `struct v4l2_plane`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union PlaneM {
    pub mem_offset: u32,
    pub userptr: u64,
    pub fd: i32,
}

/// `struct v4l2_plane`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Plane {
    pub bytesused: u32,
    pub length: u32,
    pub m: PlaneM,
    pub data_offset: u32,
    pub reserved: [u32; 11],
}

impl Default for Plane {
    fn default() -> Self {
        Plane { bytesused: 0, length: 0, m: PlaneM { userptr: 0 }, data_offset: 0, reserved: [0; 11] }
    }
}

/// The `m` union of `struct v4l2_buffer`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union BufferM {
    pub offset: u32,
    pub userptr: u64,
    pub planes: *mut Plane,
    pub fd: i32,
}

/// `struct v4l2_buffer`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Buffer {
    pub index: u32,
    pub type_: u32,
    pub bytesused: u32,
    pub flags: u32,
    pub field: u32,
    pub timestamp: Timeval,
    pub timecode: [u32; 4],
    pub sequence: u32,
    pub memory: u32,
    pub m: BufferM,
    pub length: u32,
    pub reserved2: u32,
    pub request_fd: i32,
}

impl Buffer {
    pub fn new(type_: u32, memory: u32, index: u32) -> Self {
        Buffer {
            index,
            type_,
            bytesused: 0,
            flags: 0,
            field: 0,
            timestamp: Timeval::default(),
            timecode: [0; 4],
            sequence: 0,
            memory,
            m: BufferM { userptr: 0 },
            length: 0,
            reserved2: 0,
            request_fd: 0,
        }
    }
}

/// `struct v4l2_exportbuffer`
#[repr(C)]
#[derive(Default)]
pub struct ExportBuffer {
    pub type_: u32,
    pub index: u32,
    pub plane: u32,
    pub flags: u32,
    pub fd: i32,
    pub reserved: [u32; 11],
}

/// `struct v4l2_queryctrl`
#[repr(C)]
#[derive(Default)]
pub struct QueryCtrl {
    pub id: u32,
    pub type_: u32,
    pub name: [u8; 32],
    pub minimum: i32,
    pub maximum: i32,
    pub step: i32,
    pub default_value: i32,
    pub flags: u32,
    pub reserved: [u32; 2],
}

/// `struct v4l2_control`
#[repr(C)]
#[derive(Default)]
pub struct Control {
    pub id: u32,
    pub value: i32,
}

// Sizes and offsets as gcc reports them for <linux/videodev2.h> on x86_64 and
// aarch64. A mismatch would make every ioctl number below wrong.
#[cfg(target_pointer_width = "64")]
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Capability>() == 104);
    assert!(size_of::<FmtDesc>() == 64);
    assert!(size_of::<FrmSizeEnum>() == 44);
    assert!(size_of::<PixFormat>() == 48);
    assert!(size_of::<PlanePixFormat>() == 20);
    assert!(size_of::<PixFormatMplane>() == 192);
    assert!(offset_of!(PixFormatMplane, num_planes) == 180);
    assert!(size_of::<Format>() == 208 && align_of::<Format>() == 8);
    assert!(offset_of!(Format, fmt) == 8);
    assert!(size_of::<RequestBuffers>() == 20);
    assert!(size_of::<Plane>() == 64);
    assert!(offset_of!(Plane, m) == 8 && offset_of!(Plane, data_offset) == 16);
    assert!(size_of::<Buffer>() == 88);
    assert!(offset_of!(Buffer, timestamp) == 24);
    assert!(offset_of!(Buffer, sequence) == 56);
    assert!(offset_of!(Buffer, m) == 64);
    assert!(offset_of!(Buffer, length) == 72);
    assert!(offset_of!(Buffer, request_fd) == 80);
    assert!(size_of::<ExportBuffer>() == 64);
    assert!(size_of::<QueryCtrl>() == 68);
    assert!(size_of::<Control>() == 8);
};

const QUERYCAP: Opcode = opcode::read::<Capability>(b'V', 0);
const ENUM_FMT: Opcode = opcode::read_write::<FmtDesc>(b'V', 2);
const G_FMT: Opcode = opcode::read_write::<Format>(b'V', 4);
const S_FMT: Opcode = opcode::read_write::<Format>(b'V', 5);
const REQBUFS: Opcode = opcode::read_write::<RequestBuffers>(b'V', 8);
const QUERYBUF: Opcode = opcode::read_write::<Buffer>(b'V', 9);
const QBUF: Opcode = opcode::read_write::<Buffer>(b'V', 15);
const EXPBUF: Opcode = opcode::read_write::<ExportBuffer>(b'V', 16);
const DQBUF: Opcode = opcode::read_write::<Buffer>(b'V', 17);
const STREAMON: Opcode = opcode::write::<i32>(b'V', 18);
const STREAMOFF: Opcode = opcode::write::<i32>(b'V', 19);
const G_CTRL: Opcode = opcode::read_write::<Control>(b'V', 27);
const S_CTRL: Opcode = opcode::read_write::<Control>(b'V', 28);
const QUERYCTRL: Opcode = opcode::read_write::<QueryCtrl>(b'V', 36);
const ENUM_FRAMESIZES: Opcode = opcode::read_write::<FrmSizeEnum>(b'V', 74);

// The numbers the kernel header defines (generic ioctl encoding: x86_64 and aarch64).
// (`Opcode` is u32 on some targets and c_ulong on others: hence the casts.)
#[cfg(target_pointer_width = "64")]
#[allow(clippy::unnecessary_cast)]
const _: () = {
    assert!(QUERYCAP as u32 == 0x8068_5600);
    assert!(ENUM_FMT as u32 == 0xc040_5602);
    assert!(S_FMT as u32 == 0xc0d0_5605);
    assert!(REQBUFS as u32 == 0xc014_5608);
    assert!(QBUF as u32 == 0xc058_560f);
    assert!(DQBUF as u32 == 0xc058_5611);
    assert!(EXPBUF as u32 == 0xc040_5610);
    assert!(STREAMON as u32 == 0x4004_5612);
    assert!(ENUM_FRAMESIZES as u32 == 0xc02c_564a);
};

/// Retries an ioctl interrupted by a signal.
fn retry<T>(mut f: impl FnMut() -> Result<T>) -> Result<T> {
    loop {
        match f() {
            Err(Errno::INTR) => continue,
            other => return other,
        }
    }
}

pub fn querycap(fd: BorrowedFd<'_>) -> Result<Capability> {
    // SAFETY: VIDIOC_QUERYCAP writes one `struct v4l2_capability` (layout checked above).
    retry(|| unsafe { ioctl(fd, Getter::<QUERYCAP, Capability>::new()) })
}

pub fn enum_fmt(fd: BorrowedFd<'_>, desc: &mut FmtDesc) -> Result<()> {
    // SAFETY: VIDIOC_ENUM_FMT reads and writes one `struct v4l2_fmtdesc`.
    retry(|| unsafe { ioctl(fd, Updater::<ENUM_FMT, FmtDesc>::new(desc)) })
}

pub fn enum_framesizes(fd: BorrowedFd<'_>, e: &mut FrmSizeEnum) -> Result<()> {
    // SAFETY: VIDIOC_ENUM_FRAMESIZES reads and writes one `struct v4l2_frmsizeenum`.
    retry(|| unsafe { ioctl(fd, Updater::<ENUM_FRAMESIZES, FrmSizeEnum>::new(e)) })
}

pub fn g_fmt(fd: BorrowedFd<'_>, f: &mut Format) -> Result<()> {
    // SAFETY: VIDIOC_G_FMT reads the type and writes one `struct v4l2_format`.
    retry(|| unsafe { ioctl(fd, Updater::<G_FMT, Format>::new(f)) })
}

pub fn s_fmt(fd: BorrowedFd<'_>, f: &mut Format) -> Result<()> {
    // SAFETY: VIDIOC_S_FMT reads and writes one `struct v4l2_format`.
    retry(|| unsafe { ioctl(fd, Updater::<S_FMT, Format>::new(f)) })
}

pub fn reqbufs(fd: BorrowedFd<'_>, r: &mut RequestBuffers) -> Result<()> {
    // SAFETY: VIDIOC_REQBUFS reads and writes one `struct v4l2_requestbuffers`.
    retry(|| unsafe { ioctl(fd, Updater::<REQBUFS, RequestBuffers>::new(r)) })
}

/// VIDIOC_QUERYBUF, QBUF and DQBUF.
///
/// # Safety
/// For a multi-planar buffer type, `b.m.planes` must point to `b.length`
/// writable `Plane`s that live until the call returns.
pub unsafe fn querybuf(fd: BorrowedFd<'_>, b: &mut Buffer) -> Result<()> {
    // SAFETY: one `struct v4l2_buffer`; the planes pointer is the caller's promise.
    retry(|| unsafe { ioctl(fd, Updater::<QUERYBUF, Buffer>::new(b)) })
}

/// # Safety
/// As for [`querybuf`].
pub unsafe fn qbuf(fd: BorrowedFd<'_>, b: &mut Buffer) -> Result<()> {
    // SAFETY: as in querybuf.
    retry(|| unsafe { ioctl(fd, Updater::<QBUF, Buffer>::new(b)) })
}

/// # Safety
/// As for [`querybuf`].
pub unsafe fn dqbuf(fd: BorrowedFd<'_>, b: &mut Buffer) -> Result<()> {
    // SAFETY: as in querybuf.
    retry(|| unsafe { ioctl(fd, Updater::<DQBUF, Buffer>::new(b)) })
}

/// VIDIOC_EXPBUF: a DMA-BUF fd (O_RDWR | O_CLOEXEC) for plane 0 of buffer `index`.
pub fn expbuf(fd: BorrowedFd<'_>, type_: u32, index: u32) -> Result<OwnedFd> {
    const O_RDWR: u32 = 0o2;
    const O_CLOEXEC: u32 = 0o2000000;
    let mut e = ExportBuffer { type_, index, plane: 0, flags: O_RDWR | O_CLOEXEC, ..Default::default() };
    // SAFETY: VIDIOC_EXPBUF reads and writes one `struct v4l2_exportbuffer`.
    retry(|| unsafe { ioctl(fd, Updater::<EXPBUF, ExportBuffer>::new(&mut e)) })?;
    // SAFETY: on success the kernel installed a new fd that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(e.fd) })
}

pub fn streamon(fd: BorrowedFd<'_>, type_: u32) -> Result<()> {
    // SAFETY: VIDIOC_STREAMON reads one int (the buffer type).
    retry(|| unsafe { ioctl(fd, Setter::<STREAMON, i32>::new(type_ as i32)) })
}

pub fn streamoff(fd: BorrowedFd<'_>, type_: u32) -> Result<()> {
    // SAFETY: VIDIOC_STREAMOFF reads one int (the buffer type).
    retry(|| unsafe { ioctl(fd, Setter::<STREAMOFF, i32>::new(type_ as i32)) })
}

pub fn queryctrl(fd: BorrowedFd<'_>, q: &mut QueryCtrl) -> Result<()> {
    // SAFETY: VIDIOC_QUERYCTRL reads and writes one `struct v4l2_queryctrl`.
    retry(|| unsafe { ioctl(fd, Updater::<QUERYCTRL, QueryCtrl>::new(q)) })
}

pub fn g_ctrl(fd: BorrowedFd<'_>, id: u32) -> Result<i32> {
    let mut c = Control { id, value: 0 };
    // SAFETY: VIDIOC_G_CTRL reads and writes one `struct v4l2_control`.
    retry(|| unsafe { ioctl(fd, Updater::<G_CTRL, Control>::new(&mut c)) })?;
    Ok(c.value)
}

pub fn s_ctrl(fd: BorrowedFd<'_>, id: u32, value: i32) -> Result<()> {
    let mut c = Control { id, value };
    // SAFETY: VIDIOC_S_CTRL reads and writes one `struct v4l2_control`.
    retry(|| unsafe { ioctl(fd, Updater::<S_CTRL, Control>::new(&mut c)) })
}

/// A NUL-padded C string field as text.
pub fn c_str(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}
