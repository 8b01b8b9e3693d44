//! Allocation: dma-buf heaps by name, udmabuf over a sealed memfd, plain memfd,
//! and `auto`, which takes the first of those this machine can give.

use std::path::{Path, PathBuf};

use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{Mode, OFlags};

use super::dmabuf::{DmaBuf, FdClass, Kind};
use super::error::{Context, Error, ErrorKind, Result};
use super::sys;

pub const DMA_HEAP_DIR: &str = "/dev/dma_heap";
pub const UDMABUF_DEV: &str = "/dev/udmabuf";
const UDMABUF_SIZE_LIMIT: &str = "/sys/module/udmabuf/parameters/size_limit_mb";

/// What the kernel calls its CMA heap depends on platform and version.
pub const CMA_HEAP_NAMES: [&str; 4] = ["linux,cma", "reserved", "default-pool", "default_cma_region"];

/// Where an allocation should come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeapSpec {
    /// dma-heap → udmabuf → memfd, the first that works.
    Auto,
    /// A dma-buf heap by name (`system`, `system-uncached`, ...).
    DmaHeap(String),
    /// Whichever CMA heap the kernel has.
    Cma,
    /// A dma-buf heap by path.
    Path(PathBuf),
    Udmabuf,
    Memfd,
}

impl HeapSpec {
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "auto" => HeapSpec::Auto,
            "cma" => HeapSpec::Cma,
            "udmabuf" => HeapSpec::Udmabuf,
            "memfd" => HeapSpec::Memfd,
            "" => return Err(Error::invalid("empty heap name")),
            p if p.starts_with('/') => {
                let path = PathBuf::from(p);
                if path.parent() != Some(Path::new(DMA_HEAP_DIR)) {
                    return Err(Error::invalid(format!("heap path {p:?} is not under {DMA_HEAP_DIR}/")));
                }
                HeapSpec::Path(path)
            }
            n if n.contains('/') => {
                return Err(Error::invalid(format!("heap name {n:?} contains '/'")));
            }
            n => HeapSpec::DmaHeap(n.to_string()),
        })
    }
}

/// Allocates `size` bytes (rounded up to a page) from `spec`.
pub fn alloc(size: usize, spec: &HeapSpec) -> Result<DmaBuf> {
    let size = checked_size(size)?;
    match spec {
        HeapSpec::Auto => alloc_auto(size),
        HeapSpec::DmaHeap(name) => alloc_dma_heap(&Path::new(DMA_HEAP_DIR).join(name), size),
        HeapSpec::Path(path) => alloc_dma_heap(path, size),
        HeapSpec::Cma => alloc_dma_heap(&cma_heap()?, size),
        HeapSpec::Udmabuf => alloc_udmabuf(size),
        HeapSpec::Memfd => alloc_memfd(size),
    }
}

fn checked_size(size: usize) -> Result<usize> {
    if size == 0 {
        return Err(Error::invalid("buffer size must be at least 1 byte, got 0"));
    }
    sys::round_up_to_page(size)
        .filter(|&s| s <= isize::MAX as usize)
        .ok_or_else(|| Error::invalid(format!("buffer size {size} is too large to address")))
}

/// The candidates `auto` tries, in order, with the reason each one is not
/// usable here (None: usable).
pub fn auto_plan() -> Vec<(HeapSpec, Option<String>)> {
    let mut plan = Vec::new();
    let preferred = ["system"].into_iter().chain(CMA_HEAP_NAMES);
    let mut names: Vec<String> = preferred.map(String::from).collect();
    for h in list_dma_heaps() {
        if !names.contains(&h) {
            names.push(h);
        }
    }
    for name in names {
        let path = Path::new(DMA_HEAP_DIR).join(&name);
        if path.exists() {
            plan.push((HeapSpec::DmaHeap(name), can_open(&path).err()));
        }
    }
    if plan.is_empty() {
        plan.push((
            HeapSpec::DmaHeap("system".into()),
            Some(format!("{DMA_HEAP_DIR} does not exist: this kernel has no dma-buf heaps")),
        ));
    }
    plan.push((HeapSpec::Udmabuf, can_open(Path::new(UDMABUF_DEV)).err()));
    plan.push((HeapSpec::Memfd, None));
    plan
}

fn alloc_auto(size: usize) -> Result<DmaBuf> {
    for (spec, unusable) in auto_plan() {
        if unusable.is_some() {
            continue;
        }
        match spec {
            HeapSpec::DmaHeap(name) => return alloc_dma_heap(&Path::new(DMA_HEAP_DIR).join(name), size),
            HeapSpec::Udmabuf => match alloc_udmabuf(size) {
                // Over the module's limit: memfd still serves, and kind says so.
                Err(e) if e.kind == ErrorKind::InvalidInput && udmabuf_limit().is_some_and(|l| size as u64 > l) => {}
                other => return other,
            },
            _ => return alloc_memfd(size),
        }
    }
    alloc_memfd(size)
}

fn open_device(path: &Path, what: &str) -> Result<OwnedFd> {
    rustix::fs::open(path, OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).map_err(|e| {
        let err = Error::from_errno(e, format_args!("cannot open {what} {}", path.display()));
        match err.kind {
            // Only here is a refusal about heaps (HeapPermissionError, with the udev hint).
            ErrorKind::PermissionDenied => Error { kind: ErrorKind::HeapPermission, ..err }.hint(format!(
                "{} is usually root-only: add a udev rule or group, e.g. \
                 SUBSYSTEM==\"dma_heap\", GROUP=\"video\", MODE=\"0660\", and add this user to that group",
                path.display()
            )),
            ErrorKind::NotFound => err.hint(available_heaps_hint()),
            _ => err,
        }
    })
}

fn can_open(path: &Path) -> std::result::Result<(), String> {
    if !path.exists() {
        return Err(format!("{} does not exist", path.display()));
    }
    open_device(path, "device").map(drop).map_err(|e| e.message)
}

fn available_heaps_hint() -> String {
    let heaps = list_dma_heaps();
    if heaps.is_empty() {
        format!(
            "this kernel has no dma-buf heaps ({DMA_HEAP_DIR} is missing); heap=\"memfd\" or \"auto\" works anywhere"
        )
    } else {
        format!("heaps here: {}", heaps.join(", "))
    }
}

/// Names under /dev/dma_heap, sorted.
pub fn list_dma_heaps() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(DMA_HEAP_DIR)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

fn cma_heap() -> Result<PathBuf> {
    CMA_HEAP_NAMES.iter().map(|n| Path::new(DMA_HEAP_DIR).join(n)).find(|p| p.exists()).ok_or_else(|| {
        Error::new(
            ErrorKind::NotFound,
            format!(
                "no CMA heap: none of {} exists under {DMA_HEAP_DIR} ({})",
                CMA_HEAP_NAMES.join(", "),
                available_heaps_hint()
            ),
        )
    })
}

fn alloc_dma_heap(path: &Path, size: usize) -> Result<DmaBuf> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let heap = open_device(path, "dma-buf heap")?;
    check_pinned(size, &format!("dma-buf heap {name:?}"))?;
    let fd = sys::dma_heap_alloc(heap.as_fd(), size as u64)
        .context(format_args!("cannot allocate {size} bytes from dma-buf heap {name:?}"))?;
    name_buffer(&fd);
    let actual = sys::fd_size(fd.as_fd()).unwrap_or(size as u64) as usize;
    Ok(DmaBuf::new(fd, actual, Kind::DmaHeap(name), FdClass::DmaBuf))
}

/// Names the buffer for debugfs/fdinfo where the kernel allows; not fatal.
fn name_buffer(fd: &OwnedFd) {
    let _ = sys::dma_buf_set_name(fd.as_fd(), "npu_zc");
}

/// The udmabuf module's size limit in bytes, when the module is loaded.
pub fn udmabuf_limit() -> Option<u64> {
    let text = std::fs::read_to_string(UDMABUF_SIZE_LIMIT).ok()?;
    text.trim().parse::<u64>().ok().map(|mb| mb * 1024 * 1024)
}

/// A memfd of `size` bytes whose size nobody can change again: sealed against
/// shrinking (a shrunk file turns every access past its new end, in any process
/// that maps it, into SIGBUS), against growing (the size a receiver is told
/// stays true), and against further sealing changes. Writes stay allowed
/// (udmabuf refuses a memfd sealed against writes).
fn new_memfd(size: usize) -> Result<OwnedFd> {
    use rustix::fs::{memfd_create, MemfdFlags, SealFlags};
    let fd = memfd_create("npu_zc", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).context("memfd_create failed")?;
    rustix::fs::ftruncate(&fd, size as u64).context(format_args!("cannot size a memfd to {size} bytes"))?;
    rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
        .context("cannot seal a memfd against resizing")?;
    Ok(fd)
}

fn alloc_udmabuf(size: usize) -> Result<DmaBuf> {
    if let Some(limit) = udmabuf_limit() {
        if size as u64 > limit {
            return Err(Error::invalid(format!(
                "udmabuf cannot hold {size} bytes: the udmabuf module's size_limit_mb is {} \
                 (raise it with udmabuf.size_limit_mb=N on the kernel command line, or use a dma-buf heap)",
                limit / (1024 * 1024)
            )));
        }
    }
    let dev = open_device(Path::new(UDMABUF_DEV), "udmabuf device")?;
    check_pinned(size, "udmabuf")?;
    // udmabuf pins the memfd's pages: it requires that the file cannot shrink
    // (new_memfd seals it so).
    let memfd = new_memfd(size)?;
    let fd = sys::udmabuf_create(dev.as_fd(), memfd.as_fd(), size as u64)
        .context(format_args!("UDMABUF_CREATE of {size} bytes failed"))?;
    name_buffer(&fd);
    // The udmabuf holds its own references to the pages; the memfd can go.
    Ok(DmaBuf::new(fd, size, Kind::Udmabuf, FdClass::DmaBuf))
}

fn alloc_memfd(size: usize) -> Result<DmaBuf> {
    // memfd pages are allocated lazily, so the kernel would accept any size;
    // refuse what this machine could never back rather than fault later.
    check_memory(size, "memfd", total_memory(), "of memory")?;
    let fd = new_memfd(size)?;
    Ok(DmaBuf::new(fd, size, Kind::Memfd, FdClass::Memfd))
}

/// Heap and udmabuf pages are pinned at once: a request beyond what the
/// kernel can free makes the system heap call the OOM killer (seen on 6.12)
/// instead of failing with ENOMEM. Refuse it up front, as ENOMEM.
fn check_pinned(size: usize, what: &str) -> Result<()> {
    check_memory(size, what, available_memory(), "available (MemAvailable)")
}

fn check_memory(size: usize, what: &str, limit: Option<u64>, of_what: &str) -> Result<()> {
    match limit {
        Some(limit) if size as u64 > limit => Err(Error {
            kind: ErrorKind::OutOfMemory,
            errno: Some(rustix::io::Errno::NOMEM.raw_os_error()),
            message: format!("cannot allocate {size} bytes from {what}: this machine has {limit} bytes {of_what}"),
        }),
        _ => Ok(()),
    }
}

fn total_memory() -> Option<u64> {
    let info = rustix::system::sysinfo();
    Some(info.totalram as u64 * info.mem_unit as u64)
}

fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// What `heaps()` reports for each heap or device.
#[derive(Debug, Clone)]
pub struct HeapInfo {
    /// The name to pass to `alloc`.
    pub name: String,
    pub path: Option<PathBuf>,
    /// "dma-heap", "udmabuf" or "memfd".
    pub backend: &'static str,
    pub usable: bool,
    /// Why not, when not usable.
    pub reason: Option<String>,
    /// Largest buffer, when the kernel sets a limit (udmabuf).
    pub size_limit: Option<u64>,
}

/// Every heap and device this machine has, plus memfd, and whether this user
/// can open each.
pub fn heaps() -> Vec<HeapInfo> {
    let mut out: Vec<HeapInfo> = list_dma_heaps()
        .into_iter()
        .map(|name| {
            let path = Path::new(DMA_HEAP_DIR).join(&name);
            let reason = can_open(&path).err();
            HeapInfo { name, path: Some(path), backend: "dma-heap", usable: reason.is_none(), reason, size_limit: None }
        })
        .collect();
    let udmabuf = Path::new(UDMABUF_DEV);
    let reason = can_open(udmabuf).err().map(|r| {
        if udmabuf.exists() {
            r
        } else {
            format!("{r}: this kernel has no udmabuf (CONFIG_UDMABUF)")
        }
    });
    out.push(HeapInfo {
        name: "udmabuf".into(),
        path: Some(udmabuf.into()),
        backend: "udmabuf",
        usable: reason.is_none(),
        reason,
        size_limit: udmabuf_limit(),
    });
    out.push(HeapInfo {
        name: "memfd".into(),
        path: None,
        backend: "memfd",
        usable: true,
        reason: None,
        size_limit: total_memory(),
    });
    out
}
