//! A V4L2 capture node: open, capabilities, formats and frame sizes, format
//! negotiation, controls, and the list of capture nodes on this machine.

use std::fmt;
use std::path::{Path, PathBuf};

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::error::{Error, ErrorKind, Result};
use super::sys;

/// The camera formats the layout engine reads in place, by npu_zc's name for
/// them (`Fourcc::name`), each with the engine's name: the one table behind
/// `Fourcc::source_format`, `CameraFormat.source_format` and Python's
/// `CAMERA_SOURCE_FORMATS` (the pipeline's and the streams' camera paths).
pub const SOURCE_FORMATS: [(&str, &str); 9] = [
    ("YUYV", "YUYV"),
    ("UYVY", "UYVY"),
    ("I420", "I420"),
    ("NV12", "NV12"),
    ("NV21", "NV21"),
    ("P010", "P010"),
    ("RGB3", "RGB"),
    ("BGR3", "BGR"),
    ("GREY", "GRAY"),
];

/// A pixel format code (`V4L2_PIX_FMT_*`), shown as its four characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fourcc(pub u32);

impl Fourcc {
    pub const YUYV: Fourcc = Fourcc::from_bytes(*b"YUYV");
    pub const UYVY: Fourcc = Fourcc::from_bytes(*b"UYVY");
    /// I420: planar Y, then U, then V at quarter size (V4L2 calls it YU12).
    pub const I420: Fourcc = Fourcc::from_bytes(*b"YU12");
    pub const NV12: Fourcc = Fourcc::from_bytes(*b"NV12");
    /// P010: NV12's layout in little-endian 16-bit samples, the value in the
    /// top 10 bits (`V4L2_PIX_FMT_P010`).
    pub const P010: Fourcc = Fourcc::from_bytes(*b"P010");

    pub const fn from_bytes(b: [u8; 4]) -> Self {
        Fourcc(u32::from_le_bytes(b))
    }

    /// V4L2's flag for the big-endian twin of a format (`v4l2_fourcc_be`).
    const BIG_ENDIAN: u32 = 1 << 31;

    /// Parses a name: a V4L2 fourcc (`YUYV`, `YU12`, `NV12`, `RGB3`...), a
    /// common alias (`I420`, `YUY2`, `p010le`), or a big-endian twin as
    /// [`name`](Self::name) shows it (`Y16-BE`).
    pub fn parse(name: &str) -> Result<Self> {
        if let Some(base) = name.trim().strip_suffix("-BE") {
            return Ok(Fourcc(Self::parse(base)?.0 | Self::BIG_ENDIAN));
        }
        let upper = name.trim().to_ascii_uppercase();
        let canonical = match upper.as_str() {
            "I420" | "YUV420" | "IYUV" => "YU12",
            "YUY2" => "YUYV",
            "P010LE" => "P010",
            "MJPG" | "MJPEG" => "MJPG",
            _ => name.trim(),
        };
        let bytes = canonical.as_bytes();
        if bytes.is_empty() || bytes.len() > 4 || !bytes.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("{name:?} is not a pixel format name: use a V4L2 fourcc such as \"YUYV\", \"UYVY\", \"I420\""),
            ));
        }
        let mut b = [b' '; 4];
        b[..bytes.len()].copy_from_slice(bytes);
        Ok(Fourcc::from_bytes(b))
    }

    /// The layout engine's source format for frames of this fourcc, read in
    /// place (`npu_zc.layout.SOURCE_FORMATS`); None where the engine has no
    /// decoder for it (compressed, Bayer, YVYU...).
    pub fn source_format(self) -> Option<&'static str> {
        let name = self.name();
        SOURCE_FORMATS.iter().find(|(camera, _)| *camera == name).map(|(_, engine)| *engine)
    }

    /// The name npu_zc uses: I420 for YU12, `Y16-BE` for a big-endian twin
    /// (as v4l2-ctl shows it), the fourcc otherwise.
    pub fn name(self) -> String {
        if self == Fourcc::I420 {
            return "I420".into();
        }
        if self.0 & Self::BIG_ENDIAN != 0 {
            return format!("{}-BE", Fourcc(self.0 & !Self::BIG_ENDIAN).name());
        }
        let b = self.0.to_le_bytes();
        String::from_utf8_lossy(&b).trim_end().to_string()
    }
}

impl fmt::Display for Fourcc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// The frame sizes a device offers for one format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameSizes {
    /// A fixed list (webcams).
    Discrete(Vec<(u32, u32)>),
    /// Any size in a range, in steps (step 1 for a continuous range).
    Stepwise { min: (u32, u32), max: (u32, u32), step: (u32, u32) },
    /// The driver does not enumerate sizes: try one.
    Unknown,
}

impl FrameSizes {
    pub fn contains(&self, w: u32, h: u32) -> bool {
        match self {
            FrameSizes::Discrete(list) => list.contains(&(w, h)),
            FrameSizes::Stepwise { min, max, step } => {
                (min.0..=max.0).contains(&w)
                    && (min.1..=max.1).contains(&h)
                    && (w - min.0).is_multiple_of(step.0.max(1))
                    && (h - min.1).is_multiple_of(step.1.max(1))
            }
            FrameSizes::Unknown => true,
        }
    }
}

impl fmt::Display for FrameSizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameSizes::Discrete(list) => {
                let sizes: Vec<String> = list.iter().map(|(w, h)| format!("{w}x{h}")).collect();
                f.write_str(&sizes.join(", "))
            }
            FrameSizes::Stepwise { min, max, step } => {
                write!(f, "{}x{} to {}x{} in steps of {}x{}", min.0, min.1, max.0, max.1, step.0, step.1)
            }
            FrameSizes::Unknown => f.write_str("sizes not listed by the driver"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct FormatInfo {
    pub fourcc: Fourcc,
    pub description: String,
    /// Compressed formats (MJPEG, H.264) are listed but cannot be converted.
    pub compressed: bool,
    pub sizes: FrameSizes,
}

/// The format the driver agreed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    pub width: u32,
    pub height: u32,
    pub fourcc: Fourcc,
    /// Row pitch of the first (or only) plane, in bytes.
    pub bytesperline: u32,
    /// Bytes one frame needs: each buffer must hold at least this many.
    pub sizeimage: u32,
    /// `enum v4l2_colorspace`, `v4l2_ycbcr_encoding` and `v4l2_quantization`
    /// as the driver set them (0: the colorspace's default).
    pub colorspace: u32,
    pub ycbcr_enc: u32,
    pub quantization: u32,
}

impl Format {
    /// The colour standard of a YUV format's samples, as the layout engine
    /// names it: (matrix, range), e.g. ("bt709", "limited"), with V4L2's
    /// defaults applied (`V4L2_MAP_YCBCR_ENC_DEFAULT`,
    /// `V4L2_MAP_QUANTIZATION_DEFAULT`); None for a standard the engine has
    /// no matrix for (SMPTE 240M, BT.2020 constant luminance).
    pub fn yuv_colour(&self) -> Option<(&'static str, &'static str)> {
        // enum v4l2_colorspace
        const SMPTE240M: u32 = 2;
        const REC709: u32 = 3;
        const JPEG: u32 = 7;
        const BT2020: u32 = 10;
        const DCI_P3: u32 = 12;
        // enum v4l2_ycbcr_encoding
        const ENC_601: u32 = 1;
        const ENC_709: u32 = 2;
        const ENC_XV601: u32 = 3;
        const ENC_XV709: u32 = 4;
        const ENC_SYCC: u32 = 5;
        const ENC_BT2020: u32 = 6;
        // enum v4l2_quantization
        const FULL: u32 = 1;
        const LIMITED: u32 = 2;
        let enc = match self.ycbcr_enc {
            0 => match self.colorspace {
                REC709 | DCI_P3 => ENC_709,
                BT2020 => ENC_BT2020,
                SMPTE240M => return None,
                _ => ENC_601,
            },
            e => e,
        };
        let matrix = match enc {
            ENC_601 | ENC_XV601 | ENC_SYCC => "bt601",
            ENC_709 | ENC_XV709 => "bt709",
            ENC_BT2020 => "bt2020",
            _ => return None,
        };
        let range = match self.quantization {
            FULL => "full",
            LIMITED => "limited",
            _ if self.colorspace == JPEG => "full",
            _ => "limited",
        };
        Some((matrix, range))
    }
}

/// What VIDIOC_QUERYCAP said about a node.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub path: PathBuf,
    pub driver: String,
    pub card: String,
    pub bus_info: String,
    /// Capabilities of this node (device_caps).
    pub caps: u32,
    /// The node captures through the multi-planar API.
    pub multiplanar: bool,
}

impl DeviceInfo {
    pub fn buf_type(&self) -> u32 {
        if self.multiplanar {
            sys::BUF_TYPE_VIDEO_CAPTURE_MPLANE
        } else {
            sys::BUF_TYPE_VIDEO_CAPTURE
        }
    }
}

/// A control of the device (brightness, exposure, or a driver's own).
#[derive(Debug, Clone)]
pub struct ControlInfo {
    pub id: u32,
    pub name: String,
    pub kind: u32,
    pub minimum: i32,
    pub maximum: i32,
    pub step: i32,
    pub default: i32,
}

/// An open capture node. The fd is non-blocking: waiting is done with poll
/// and a timeout, never inside an ioctl.
#[derive(Debug)]
pub struct Device {
    fd: OwnedFd,
    pub info: DeviceInfo,
}

impl Device {
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let shown = path.display();
        let fd =
            rustix::fs::open(path, OFlags::RDWR | OFlags::NONBLOCK | OFlags::CLOEXEC, Mode::empty()).map_err(|e| {
                match e {
                    Errno::NOENT => Error::os(e, Some(ErrorKind::NotFound), format_args!("cannot open camera {shown}"))
                        .hint("no such device node: npu_zc.cameras() or `npu-zc info` lists the cameras here"),
                    Errno::ACCESS | Errno::PERM => Error::os(e, None, format_args!("cannot open camera {shown}"))
                        .hint("add this user to the `video` group, or run with access to the node"),
                    Errno::NODEV | Errno::NXIO => {
                        Error::os(e, Some(ErrorKind::NotFound), format_args!("cannot open camera {shown}"))
                            .hint("the node exists but no driver is behind it: was the camera unplugged?")
                    }
                    Errno::BUSY => Error::os(e, None, format_args!("cannot open camera {shown}"))
                        .hint("another process has it open exclusively"),
                    e => Error::os(e, None, format_args!("cannot open camera {shown}")),
                }
            })?;
        let cap = sys::querycap(fd.as_fd()).map_err(|e| match e {
            // ENOSYS: what qemu-user answers for an ioctl it does not know.
            Errno::NOTTY | Errno::INVAL | Errno::NOSYS => Error::os(
                e,
                Some(ErrorKind::NotACamera),
                format_args!("{shown} is not a V4L2 device (VIDIOC_QUERYCAP failed)"),
            )
            .hint("give a /dev/videoN capture node; npu_zc.cameras() lists them"),
            e => Error::os(e, None, format_args!("VIDIOC_QUERYCAP on {shown} failed")),
        })?;
        let caps = if cap.capabilities & sys::CAP_DEVICE_CAPS != 0 { cap.device_caps } else { cap.capabilities };
        let single = caps & sys::CAP_VIDEO_CAPTURE != 0;
        let multi = caps & sys::CAP_VIDEO_CAPTURE_MPLANE != 0;
        let card = sys::c_str(&cap.card);
        if !single && !multi {
            return Err(Error::new(
                ErrorKind::NotACamera,
                format!(
                    "{shown} ({card}, driver {}) is not a video capture device (capabilities 0x{caps:08x}): \
                     it may be an output, metadata or codec node; npu_zc.cameras() lists the capture nodes",
                    sys::c_str(&cap.driver)
                ),
            ));
        }
        if caps & sys::CAP_STREAMING == 0 {
            return Err(Error::new(
                ErrorKind::NotACamera,
                format!("{shown} ({card}) captures only with read(), not streaming I/O: npu_zc needs streaming"),
            ));
        }
        let info = DeviceInfo {
            path: path.to_path_buf(),
            driver: sys::c_str(&cap.driver),
            card,
            bus_info: sys::c_str(&cap.bus_info),
            caps,
            multiplanar: !single,
        };
        Ok(Device { fd, info })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Every pixel format the node offers, with its frame sizes.
    pub fn formats(&self) -> Result<Vec<FormatInfo>> {
        let mut out = Vec::new();
        for index in 0.. {
            let mut d = sys::FmtDesc { index, type_: self.info.buf_type(), ..Default::default() };
            match sys::enum_fmt(self.fd(), &mut d) {
                Ok(()) => {}
                Err(Errno::INVAL) => break,
                Err(e) => return Err(self.fail(e, "VIDIOC_ENUM_FMT")),
            }
            let fourcc = Fourcc(d.pixelformat);
            out.push(FormatInfo {
                fourcc,
                description: sys::c_str(&d.description),
                compressed: d.flags & 0x1 != 0,
                sizes: self.frame_sizes(fourcc)?,
            });
        }
        Ok(out)
    }

    fn frame_sizes(&self, fourcc: Fourcc) -> Result<FrameSizes> {
        let mut discrete = Vec::new();
        for index in 0.. {
            let mut e = sys::FrmSizeEnum { index, pixel_format: fourcc.0, ..Default::default() };
            match sys::enum_framesizes(self.fd(), &mut e) {
                Ok(()) => {}
                Err(Errno::INVAL | Errno::NOTTY) => break,
                Err(e) => return Err(self.fail(e, "VIDIOC_ENUM_FRAMESIZES")),
            }
            match e.type_ {
                sys::FRMSIZE_TYPE_DISCRETE => discrete.push((e.size[0], e.size[1])),
                t => {
                    let s = e.size;
                    let step = if t == sys::FRMSIZE_TYPE_CONTINUOUS { (1, 1) } else { (s[2], s[5]) };
                    return Ok(FrameSizes::Stepwise { min: (s[0], s[3]), max: (s[1], s[4]), step });
                }
            }
        }
        Ok(if discrete.is_empty() { FrameSizes::Unknown } else { FrameSizes::Discrete(discrete) })
    }

    /// The format the node is set to now.
    pub fn format(&self) -> Result<Format> {
        let mut f = sys::Format::new(self.info.buf_type());
        sys::g_fmt(self.fd(), &mut f).map_err(|e| self.fail(e, "VIDIOC_G_FMT"))?;
        Ok(self.read_format(&f))
    }

    /// Sets width, height and pixel format; fails (listing what the device
    /// supports) unless the driver takes exactly that.
    pub fn set_format(&self, width: u32, height: u32, fourcc: Fourcc) -> Result<Format> {
        let formats = self.formats()?;
        let shown = self.info.path.display();
        let supported = || formats.iter().map(|f| f.fourcc.name()).collect::<Vec<_>>().join(", ");
        let Some(info) = formats.iter().find(|f| f.fourcc == fourcc) else {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "{shown} ({}) does not offer pixel format {fourcc}; it offers: {}",
                    self.info.card,
                    supported()
                ),
            ));
        };
        if info.compressed {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "{fourcc} on {shown} is compressed ({}): npu_zc converts raw frames only; pick one of: {}",
                    info.description,
                    formats.iter().filter(|f| !f.compressed).map(|f| f.fourcc.name()).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        if !info.sizes.contains(width, height) {
            return Err(self.bad_size(width, height, fourcc, &info.sizes));
        }
        let mut f = sys::Format::new(self.info.buf_type());
        if self.info.multiplanar {
            // SAFETY: the union is plain integers; every bit pattern is valid.
            let mp = unsafe { &mut f.fmt.pix_mp };
            mp.width = width;
            mp.height = height;
            mp.pixelformat = fourcc.0;
            mp.field = sys::FIELD_NONE;
            mp.num_planes = 1;
        } else {
            // SAFETY: as above.
            let pix = unsafe { &mut f.fmt.pix };
            pix.width = width;
            pix.height = height;
            pix.pixelformat = fourcc.0;
            pix.field = sys::FIELD_NONE;
        }
        sys::s_fmt(self.fd(), &mut f).map_err(|e| match e {
            Errno::BUSY => Error::os(e, Some(ErrorKind::Busy), format_args!("cannot set the format of {shown}"))
                .hint("another process or file handle is capturing from it; close that first"),
            e => self.fail(e, "VIDIOC_S_FMT"),
        })?;
        if self.info.multiplanar {
            // SAFETY: as above.
            let planes = unsafe { f.fmt.pix_mp.num_planes };
            if planes != 1 {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "{fourcc} on {shown} uses {planes} memory planes: npu_zc captures single-buffer \
                         layouts only (for NV12M pick NV12, for YUV420M pick I420)"
                    ),
                ));
            }
        }
        let got = self.read_format(&f);
        if got.fourcc != fourcc || got.width != width || got.height != height {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "{shown} ({}) answered {}x{} {} to a request for {width}x{height} {fourcc}; sizes for {fourcc}: {}",
                    self.info.card, got.width, got.height, got.fourcc, info.sizes
                ),
            ));
        }
        // A buffer of sizeimage bytes must hold a frame at the driver's pitch.
        got.view(got.sizeimage as usize).map_err(|e| {
            Error::new(e.kind, format!("cannot capture from {shown} ({}): {}", self.info.card, e.message))
        })?;
        Ok(got)
    }

    fn bad_size(&self, width: u32, height: u32, fourcc: Fourcc, sizes: &FrameSizes) -> Error {
        Error::new(
            ErrorKind::Unsupported,
            format!(
                "{} ({}) cannot capture {width}x{height} in {fourcc}; supported sizes: {sizes}",
                self.info.path.display(),
                self.info.card
            ),
        )
    }

    fn read_format(&self, f: &sys::Format) -> Format {
        if self.info.multiplanar {
            // SAFETY: the driver filled the pix_mp member for a multi-planar type.
            let mp = unsafe { f.fmt.pix_mp };
            let plane = mp.plane_fmt[0];
            Format {
                width: mp.width,
                height: mp.height,
                fourcc: Fourcc(mp.pixelformat),
                bytesperline: plane.bytesperline,
                sizeimage: plane.sizeimage,
                colorspace: mp.colorspace,
                ycbcr_enc: u32::from(mp.ycbcr_enc),
                quantization: u32::from(mp.quantization),
            }
        } else {
            // SAFETY: the driver filled the pix member for a single-planar type.
            let pix = unsafe { f.fmt.pix };
            Format {
                width: pix.width,
                height: pix.height,
                fourcc: Fourcc(pix.pixelformat),
                bytesperline: pix.bytesperline,
                sizeimage: pix.sizeimage,
                colorspace: pix.colorspace,
                ycbcr_enc: pix.ycbcr_enc,
                quantization: pix.quantization,
            }
        }
    }

    /// Every control the node has (disabled ones and class headers left out).
    pub fn controls(&self) -> Result<Vec<ControlInfo>> {
        let mut out = Vec::new();
        let mut id = 0u32;
        loop {
            let mut q = sys::QueryCtrl { id: id | sys::CTRL_FLAG_NEXT_CTRL, ..Default::default() };
            match sys::queryctrl(self.fd(), &mut q) {
                Ok(()) => {}
                Err(Errno::INVAL | Errno::NOTTY) => break,
                Err(e) => return Err(self.fail(e, "VIDIOC_QUERYCTRL")),
            }
            id = q.id;
            if q.flags & sys::CTRL_FLAG_DISABLED != 0 || q.type_ == sys::CTRL_TYPE_CTRL_CLASS {
                continue;
            }
            out.push(ControlInfo {
                id: q.id,
                name: sys::c_str(&q.name),
                kind: q.type_,
                minimum: q.minimum,
                maximum: q.maximum,
                step: q.step,
                default: q.default_value,
            });
        }
        Ok(out)
    }

    pub fn control(&self, id: u32) -> Result<i32> {
        sys::g_ctrl(self.fd(), id).map_err(|e| self.fail(e, format_args!("VIDIOC_G_CTRL 0x{id:x}")))
    }

    pub fn set_control(&self, id: u32, value: i32) -> Result<()> {
        sys::s_ctrl(self.fd(), id, value).map_err(|e| self.fail(e, format_args!("VIDIOC_S_CTRL 0x{id:x}={value}")))
    }

    /// An ioctl's failure on this device, with the device named.
    pub(crate) fn fail(&self, e: Errno, what: impl fmt::Display) -> Error {
        let shown = self.info.path.display();
        match e {
            Errno::NODEV => Error::os(e, Some(ErrorKind::Disconnected), format_args!("{what} on {shown} failed"))
                .hint("the camera is gone (unplugged or its driver unbound); close it and open it again"),
            e => Error::os(e, None, format_args!("{what} on {shown} ({}) failed", self.info.card)),
        }
    }
}

/// A capture node found on this machine, with what it offers.
#[derive(Debug, Clone)]
pub struct CameraInfo {
    pub info: DeviceInfo,
    pub formats: Vec<FormatInfo>,
}

/// Every V4L2 video capture node under /dev (video0, video1...), in order.
/// Nodes that cannot be opened or are not capture devices are left out.
pub fn cameras() -> Vec<CameraInfo> {
    let mut nodes: Vec<(u32, PathBuf)> = std::fs::read_dir("/dev")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name.strip_prefix("video")?.parse::<u32>().ok()?;
            Some((n, e.path()))
        })
        .collect();
    nodes.sort();
    nodes
        .into_iter()
        .filter_map(|(_, path)| {
            let dev = Device::open(&path).ok()?;
            let formats = dev.formats().ok()?;
            Some(CameraInfo { info: dev.info.clone(), formats })
        })
        .collect()
}
