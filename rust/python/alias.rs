//! The one rule for every entry point that reads memory and writes memory:
//! no call writes bytes it reads (or that another argument names), and no
//! call touches bytes another call is writing right now.
//!
//! Each argument is resolved to the bytes it covers, as a [`Region`]: rows of
//! `len` bytes `pitch` apart (a contiguous array is one row). Bytes inside a
//! mapping of one of our buffers are named by the buffer (its inode) and the
//! offset in it, because two maps of one DMA-BUF (read-only and writable, or
//! two imports of one fd) are two addresses for the same pages; everything
//! else is named by its address. So whatever numpy's base objects are (views
//! of one mapping, two mappings, memoryviews, a DmaBuf mapped on the way in),
//! two arguments that share a byte are seen to.
//!
//! * A destination that shares a byte with a source, or with another
//!   destination of the call, is refused with `AliasingError` (an
//!   `InvalidArgumentError`).
//! * While a call runs (the GIL released), its regions are registered; a
//!   call that would write bytes another call reads or writes, or read bytes
//!   another call writes, is refused at once with `BufferInUseError`: it does
//!   not wait, so that two callers racing for one buffer learn they do.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use super::errors::{aliasing, error};
use crate::buffer::ErrorKind;

/// Which memory an address belongs to: one of our buffers (by its inode) or
/// the process's address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Space {
    Address,
    Buffer { dev: u64, ino: u64 },
}

/// `count` runs of `len` bytes, `pitch` bytes apart, from `start` (an address
/// or, for a buffer, an offset in it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Region {
    space: Space,
    start: usize,
    count: usize,
    len: usize,
    pitch: usize,
}

impl Region {
    /// `count` rows of `len` bytes, `pitch` apart, from the address `ptr`.
    pub(crate) fn rows(ptr: *const u8, count: usize, len: usize, pitch: usize) -> Region {
        resolve(Region { space: Space::Address, start: ptr as usize, count, len, pitch })
    }

    /// `len` contiguous bytes at `ptr`.
    pub(crate) fn bytes(ptr: *const u8, len: usize) -> Region {
        Region::rows(ptr, 1, len, len)
    }

    fn is_empty(&self) -> bool {
        self.count == 0 || self.len == 0
    }

    /// One past the last byte (the start of row `count - 1` plus `len`).
    fn end(&self) -> u128 {
        self.start as u128 + (self.count as u128 - 1) * self.pitch as u128 + self.len as u128
    }

    /// Whether the two share at least one byte.
    fn overlaps(&self, other: &Region) -> bool {
        if self.space != other.space || self.is_empty() || other.is_empty() {
            return false;
        }
        if self.end() <= other.start as u128 || other.end() <= self.start as u128 {
            return false;
        }
        // The bounds meet: check the rows of the region with fewer against the other.
        let (few, many) = if self.count <= other.count { (self, other) } else { (other, self) };
        (0..few.count).any(|i| {
            let start = few.start as i128 + i as i128 * few.pitch as i128;
            many.meets(start, start + few.len as i128)
        })
    }

    /// Whether a row of `self` meets the bytes [lo, hi): row i covers
    /// [s + i p, s + i p + len), which meets them when lo - len < s + i p < hi.
    fn meets(&self, lo: i128, hi: i128) -> bool {
        let (s, p, n) = (self.start as i128, self.pitch as i128, self.count as i128);
        let (above, below) = (lo - self.len as i128 - s, hi - s); // above < i p < below
        if p == 0 || n == 1 {
            return above < 0 && 0 < below;
        }
        let first = (above.div_euclid(p) + 1).max(0);
        let last = ((below - 1).div_euclid(p)).min(n - 1);
        first <= last
    }
}

/// A mapping of one of our buffers: [start, end) in memory is the buffer
/// `space` from `offset`.
struct Known {
    end: usize,
    space: Space,
    offset: usize,
}

/// Every live mapping of our buffers, by start address.
static MAPPINGS: RwLock<BTreeMap<usize, Known>> = RwLock::new(BTreeMap::new());

/// Names `len` bytes mapped at `ptr` as the buffer (dev, ino) from `offset`
/// until the returned guard drops (which must happen before the unmap).
pub(crate) fn register_mapping(ptr: *const u8, len: usize, dev: u64, ino: u64, offset: usize) -> MappingEntry {
    let start = ptr as usize;
    let known = Known { end: start + len, space: Space::Buffer { dev, ino }, offset };
    MAPPINGS.write().unwrap_or_else(|p| p.into_inner()).insert(start, known);
    MappingEntry(start)
}

/// Removes its mapping from the registry when dropped.
pub(crate) struct MappingEntry(usize);

impl Drop for MappingEntry {
    fn drop(&mut self) {
        MAPPINGS.write().unwrap_or_else(|p| p.into_inner()).remove(&self.0);
    }
}

/// The region named by its buffer and offset if it starts inside one of our
/// mappings; else as it is (by address).
fn resolve(region: Region) -> Region {
    let mappings = MAPPINGS.read().unwrap_or_else(|p| p.into_inner());
    match mappings.range(..=region.start).next_back() {
        Some((&start, known)) if region.start < known.end => {
            Region { space: known.space, start: region.start - start + known.offset, ..region }
        }
        _ => region,
    }
}

/// The bytes an array spans, from its lowest to its highest address: exact
/// for a contiguous array, the bounds of a strided one (an empty array spans
/// none).
pub(crate) fn extent(a: &Bound<'_, PyUntypedArray>) -> Region {
    // SAFETY: reading the data pointer of a live array object; nothing is dereferenced.
    let data = unsafe { (*a.as_array_ptr()).fields.data }.cast::<u8>();
    if a.shape().contains(&0) {
        return Region::bytes(data, 0);
    }
    let (mut low, mut high) = (0isize, a.dtype().itemsize() as isize);
    for (&n, &stride) in a.shape().iter().zip(a.strides()) {
        let reach = (n as isize - 1).saturating_mul(stride);
        if reach < 0 {
            low = low.saturating_add(reach);
        } else {
            high = high.saturating_add(reach);
        }
    }
    Region::bytes(data.wrapping_offset(low), high.saturating_sub(low) as usize)
}

/// Whether two arrays share a byte of memory, by the aliasing rule: two maps
/// of one buffer do, whatever their addresses (for the runtime's bindings).
#[pyfunction]
pub(crate) fn _shares_memory(a: &Bound<'_, PyUntypedArray>, b: &Bound<'_, PyUntypedArray>) -> bool {
    extent(a).overlaps(&extent(b))
}

/// For the benchmarks: seconds per check of the rule as `Converter` runs it
/// on a 64 x 64 frame (a source and a destination of 64 rows resolved, checked
/// against each other and the running calls, claimed and released), the best
/// of `repeat` batches of 1000.
#[pyfunction]
pub(crate) fn _claim_seconds(repeat: usize) -> PyResult<f64> {
    let (src, dst) = (vec![0u8; 64 * 64 * 3], vec![0u8; 64 * 64 * 4]);
    let mut best = f64::INFINITY;
    for _ in 0..repeat.clamp(1, 10_000) {
        let started = std::time::Instant::now();
        for _ in 0..1000 {
            let reads = [(Region::rows(src.as_ptr(), 64, 64 * 3, 64 * 3), "source")];
            let writes = [(Region::rows(dst.as_ptr(), 64, 64 * 4, 64 * 4), "destination")];
            drop(std::hint::black_box(claim(&reads, &writes)?));
        }
        best = best.min(started.elapsed().as_secs_f64() / 1000.0);
    }
    Ok(best)
}

/// The regions of the calls running now: (call id, region, written).
static RUNNING: Mutex<Vec<(u64, Region, bool)>> = Mutex::new(Vec::new());
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// A call's claim on its regions; released when dropped.
pub(crate) struct Claim(u64);

impl Drop for Claim {
    fn drop(&mut self) {
        RUNNING.lock().unwrap_or_else(|p| p.into_inner()).retain(|(id, ..)| *id != self.0);
    }
}

/// Checks the rule for one call that reads `reads` and writes `writes` (each
/// with a name for the message), and claims them until the result drops.
pub(crate) fn claim(reads: &[(Region, &str)], writes: &[(Region, &str)]) -> PyResult<Claim> {
    for (i, (w, what)) in writes.iter().enumerate() {
        let other = reads.iter().chain(&writes[..i]).find(|(r, _)| w.overlaps(r));
        if let Some((_, other)) = other {
            return Err(aliasing(format!(
                "the {what} overlaps the {other}: a call may not write memory it reads \
                 (whatever the arrays' bases: two maps of one buffer, a memoryview, a DmaBuf); \
                 the {what} must be memory of its own"
            )));
        }
    }
    let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    let conflict = |mine: &Region, written: bool| {
        running.iter().any(|(_, theirs, their_write)| (written || *their_write) && mine.overlaps(theirs))
    };
    let busy = writes.iter().map(|(r, what)| (r, *what, true)).chain(reads.iter().map(|(r, what)| (r, *what, false)));
    for (region, what, written) in busy {
        if conflict(region, written) {
            let doing = if written { "write" } else { "read" };
            return Err(error(
                ErrorKind::Busy,
                format!(
                    "cannot {doing} the {what}: another call is writing{} that memory right now; \
                     give each concurrent call a buffer of its own (or wait for the other call)",
                    if written { " or reading" } else { "" }
                ),
            ));
        }
    }
    let id = NEXT_CALL.fetch_add(1, Ordering::Relaxed);
    running.extend(reads.iter().map(|(r, _)| (id, *r, false)));
    running.extend(writes.iter().map(|(r, _)| (id, *r, true)));
    Ok(Claim(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(start: usize, count: usize, len: usize, pitch: usize) -> Region {
        Region { space: Space::Address, start, count, len, pitch }
    }

    /// The bytes of a region, one by one: the reference for `overlaps`.
    fn bytes(r: &Region) -> std::collections::HashSet<usize> {
        (0..r.count).flat_map(|i| (0..r.len).map(move |b| r.start + i * r.pitch + b)).collect()
    }

    #[test]
    fn overlaps_agrees_with_the_bytes() {
        let shapes = [(1, 4, 4), (3, 2, 5), (4, 3, 3), (5, 1, 7), (2, 6, 6), (0, 3, 3), (3, 0, 4)];
        for start_a in 0..12 {
            for start_b in 0..12 {
                for &(ca, la, pa) in &shapes {
                    for &(cb, lb, pb) in &shapes {
                        let (a, b) = (rows(start_a, ca, la, pa), rows(start_b, cb, lb, pb));
                        let expected = !bytes(&a).is_disjoint(&bytes(&b));
                        assert_eq!(a.overlaps(&b), expected, "{a:?} {b:?}");
                        assert_eq!(b.overlaps(&a), expected, "{b:?} {a:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn interleaved_crops_of_one_image_do_not_overlap() {
        // Left and right halves of a 4-row image whose rows are 100 bytes.
        let left = rows(1000, 4, 50, 100);
        let right = rows(1050, 4, 50, 100);
        assert!(!left.overlaps(&right));
        assert!(left.overlaps(&rows(1049, 4, 2, 100)));
    }

    #[test]
    fn mappings_name_their_buffer() {
        let a = [0u8; 64];
        let b = [0u8; 64];
        let _ea = register_mapping(a.as_ptr(), 64, 1, 7, 0);
        let _eb = register_mapping(b.as_ptr(), 64, 1, 7, 0);
        // Two mappings of one buffer: the same bytes, at two addresses.
        assert!(Region::bytes(a.as_ptr(), 8).overlaps(&Region::bytes(b.as_ptr(), 8)));
        assert!(!Region::bytes(a.as_ptr(), 8).overlaps(&Region::bytes(b[8..].as_ptr(), 8)));
    }
}
