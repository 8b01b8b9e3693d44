//! Unit tests of the buffer core on memfd (any Linux) and, when the kernel has
//! them, on the system heap and udmabuf (inside the test VM they are required).

use std::os::unix::net::UnixStream;
use std::path::Path;

use proptest::prelude::*;
use rustix::fd::{AsFd, AsRawFd};

use super::*;

fn in_vm() -> bool {
    std::env::var("NPU_ZC_IN_VM").as_deref() == Ok("1")
}

/// The backends this kernel offers: memfd always; the real ones when present
/// (inside the VM their absence is a failure, not a skip).
fn backends() -> Vec<HeapSpec> {
    let mut out = vec![HeapSpec::Memfd];
    for (path, spec) in
        [("/dev/dma_heap/system", HeapSpec::DmaHeap("system".into())), ("/dev/udmabuf", HeapSpec::Udmabuf)]
    {
        if Path::new(path).exists() {
            out.push(spec);
        } else if in_vm() {
            panic!("{path} is missing inside the test VM");
        } else {
            eprintln!("skipping {path}: not on this kernel (real-kernel tests run in the VM)");
        }
    }
    out
}

#[test]
fn alloc_map_write_read_on_every_backend() {
    for spec in backends() {
        let buf = alloc(10_000, &spec).unwrap();
        assert_eq!(buf.size(), 12_288, "{spec:?}: rounded up to pages");
        assert_eq!(buf.is_dmabuf(), spec != HeapSpec::Memfd);
        let mut map = buf.map_all(Access::ReadWrite).unwrap();
        {
            let _sync = buf.cpu_access(SyncMode::Write).unwrap();
            map.as_mut_slice().unwrap().iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
        }
        let other = buf.map(4096, 100, Access::ReadOnly).unwrap();
        assert_eq!(other.as_slice()[0], (4096 % 256) as u8);
        assert_eq!(other.as_slice()[99], ((4096 + 99) % 256) as u8);
        buf.cpu_access(SyncMode::Read).unwrap().end().unwrap();
    }
}

#[test]
fn map_range_checks() {
    let buf = alloc(4096, &HeapSpec::Memfd).unwrap();
    assert_eq!(buf.map(1, 4096, Access::ReadOnly).unwrap_err().kind, ErrorKind::InvalidInput);
    assert_eq!(buf.map(0, 0, Access::ReadOnly).unwrap_err().kind, ErrorKind::InvalidInput);
    assert_eq!(buf.map(usize::MAX, 2, Access::ReadOnly).unwrap_err().kind, ErrorKind::InvalidInput);
    let mut ro = buf.map_all(Access::ReadOnly).unwrap();
    assert!(ro.as_mut_slice().is_err());
    assert!(ro.as_mut_ptr().is_null());
}

#[test]
fn heap_names_parse() {
    assert_eq!(HeapSpec::parse("auto").unwrap(), HeapSpec::Auto);
    assert_eq!(HeapSpec::parse("system-uncached").unwrap(), HeapSpec::DmaHeap("system-uncached".into()));
    assert_eq!(HeapSpec::parse("cma").unwrap(), HeapSpec::Cma);
    assert_eq!(HeapSpec::parse("/dev/dma_heap/reserved").unwrap(), HeapSpec::Path("/dev/dma_heap/reserved".into()));
    for bad in ["", "/etc/passwd", "../x", "a/b"] {
        assert_eq!(HeapSpec::parse(bad).unwrap_err().kind, ErrorKind::InvalidInput, "{bad:?}");
    }
}

#[test]
fn sizes_are_validated() {
    assert_eq!(alloc(0, &HeapSpec::Memfd).unwrap_err().kind, ErrorKind::InvalidInput);
    assert_eq!(alloc(usize::MAX, &HeapSpec::Memfd).unwrap_err().kind, ErrorKind::InvalidInput);
    assert_eq!(alloc(1 << 60, &HeapSpec::Memfd).unwrap_err().kind, ErrorKind::OutOfMemory);
}

#[test]
fn missing_heap_is_not_found_with_a_hint() {
    if Path::new("/dev/dma_heap").exists() {
        return;
    }
    let err = alloc(4096, &HeapSpec::DmaHeap("system".into())).unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert_eq!(err.errno, Some(2));
    assert!(err.message.contains("/dev/dma_heap/system"), "{}", err.message);
    assert_eq!(alloc(4096, &HeapSpec::Cma).unwrap_err().kind, ErrorKind::NotFound);
    // auto still works, on memfd, and says so.
    assert_eq!(alloc(4096, &HeapSpec::Auto).unwrap().kind(), &Kind::Memfd);
}

#[test]
fn import_export_and_classification() {
    for spec in backends() {
        let buf = alloc(4096, &spec).unwrap();
        let exported = buf.export().unwrap();
        assert_ne!(exported.as_raw_fd(), buf.fd().as_raw_fd());
        let imported = DmaBuf::from_fd(exported.as_fd(), false, false).unwrap();
        assert_eq!(imported.kind(), &Kind::Imported);
        assert_eq!(imported.size(), 4096);
        assert_eq!(imported.is_dmabuf(), buf.is_dmabuf());
        let expected = if buf.is_dmabuf() { FdClass::DmaBuf } else { FdClass::Memfd };
        assert_eq!(classify(buf.fd()).unwrap(), expected);
    }
    let (a, _b) = UnixStream::pair().unwrap();
    assert_eq!(DmaBuf::from_fd(a.as_fd(), false, false).unwrap_err().kind, ErrorKind::InvalidInput);
    let dir = std::fs::File::open("/").unwrap();
    assert!(DmaBuf::from_fd(dir.as_fd(), false, false).unwrap_err().message.contains("directory"));
}

#[test]
fn fds_and_payload_cross_a_socket() {
    let (a, b) = UnixStream::pair().unwrap();
    let bufs: Vec<DmaBuf> = (0..3).map(|_| alloc(4096, &HeapSpec::Memfd).unwrap()).collect();
    bufs[2].map_all(Access::ReadWrite).unwrap().as_mut_slice().unwrap()[0] = 77;
    let fds: Vec<_> = bufs.iter().map(|b| b.fd()).collect();
    transfer::send_fds(a.as_fd(), &fds, b"meta").unwrap();
    transfer::send_fds(a.as_fd(), &[], b"second").unwrap();
    let (got, payload) = transfer::recv_fds(b.as_fd()).unwrap();
    assert_eq!((got.len(), payload.as_slice()), (3, &b"meta"[..]));
    let third = DmaBuf::from_fd(got[2].as_fd(), false, false).unwrap();
    assert_eq!(third.map_all(Access::ReadOnly).unwrap().as_slice()[0], 77);
    // Messages stay framed on a stream socket.
    let (none, payload) = transfer::recv_fds(b.as_fd()).unwrap();
    assert_eq!((none.len(), payload.as_slice()), (0, &b"second"[..]));
    drop(a);
    assert_eq!(transfer::recv_fds(b.as_fd()).unwrap_err().kind, ErrorKind::Protocol);
}

#[test]
fn lease_releases_on_drop_and_submit_keeps_in_flight() {
    let pool = BufferPool::new(2, 4096, &HeapSpec::Memfd).unwrap();
    {
        let lease = pool.lease(Wait::No).unwrap();
        assert_eq!(pool.state(lease.index()).unwrap(), SlotState::Cpu);
    }
    assert_eq!(pool.free_count(), 2);
    let index = pool.lease(Wait::No).unwrap().submit().unwrap();
    assert_eq!(pool.state(index).unwrap(), SlotState::InFlight);
    pool.release(index).unwrap();
    assert_eq!(pool.free_count(), 2);
}

#[derive(Debug, Clone)]
enum Op {
    Acquire,
    Submit(usize),
    Release(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![Just(Op::Acquire), (0usize..4).prop_map(Op::Submit), (0usize..4).prop_map(Op::Release)]
}

proptest! {
    /// The pool follows its state machine for any sequence of calls: a buffer
    /// is handed out only when free, and bad transitions change nothing.
    #[test]
    fn pool_matches_its_model(ops in proptest::collection::vec(op(), 1..60)) {
        let pool = BufferPool::new(3, 4096, &HeapSpec::Memfd).unwrap();
        let mut model = [SlotState::Free; 3];
        for op in ops {
            match op {
                Op::Acquire => match pool.acquire(Wait::No) {
                    Ok(i) => {
                        prop_assert_eq!(model[i], SlotState::Free);
                        model[i] = SlotState::Cpu;
                    }
                    Err(e) => {
                        prop_assert_eq!(e.kind, ErrorKind::Timeout);
                        prop_assert!(model.iter().all(|s| *s != SlotState::Free));
                    }
                },
                Op::Submit(i) => {
                    let ok = pool.submit(i).is_ok();
                    prop_assert_eq!(ok, i < 3 && model[i] == SlotState::Cpu);
                    if ok { model[i] = SlotState::InFlight; }
                }
                Op::Release(i) => {
                    let ok = pool.release(i).is_ok();
                    prop_assert_eq!(ok, i < 3 && model[i] != SlotState::Free);
                    if ok { model[i] = SlotState::Free; }
                }
            }
            for (i, s) in model.iter().enumerate() {
                prop_assert_eq!(pool.state(i).unwrap(), *s);
            }
        }
    }

    /// Any offset and length inside the buffer maps to the right bytes.
    #[test]
    fn any_range_maps_the_right_bytes(offset in 0usize..12_000, len in 1usize..4_000) {
        let buf = alloc(16_384, &HeapSpec::Memfd).unwrap();
        let mut all = buf.map_all(Access::ReadWrite).unwrap();
        all.as_mut_slice().unwrap().iter_mut().enumerate().for_each(|(i, b)| *b = (i * 7 % 251) as u8);
        let part = buf.map(offset, len, Access::ReadOnly).unwrap();
        prop_assert_eq!(part.as_slice(), &all.as_slice()[offset..offset + len]);
    }
}

#[test]
fn memfds_are_sealed_against_resizing_and_unsealed_imports_are_not_mapped() {
    use rustix::fs::{fcntl_get_seals, ftruncate, memfd_create, MemfdFlags, SealFlags};
    let buf = alloc(8192, &HeapSpec::Memfd).unwrap();
    let seals = fcntl_get_seals(buf.fd()).unwrap();
    assert!(seals.contains(SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL), "{seals:?}");
    assert!(!seals.contains(SealFlags::WRITE));
    assert_eq!(ftruncate(buf.fd(), 0), Err(rustix::io::Errno::PERM));
    assert!(DmaBuf::from_fd(buf.fd(), false, false).unwrap().map_safe());

    // Someone else's memfd, not sealed: imported, but never mapped unless trusted.
    let theirs = memfd_create("theirs", MemfdFlags::CLOEXEC).unwrap();
    ftruncate(&theirs, 8192).unwrap();
    let imported = DmaBuf::from_fd(theirs.as_fd(), false, false).unwrap();
    let err = imported.map_all(Access::ReadOnly).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
    assert!(err.message.contains("trust_size=True"), "{}", err.message);
    let trusted = DmaBuf::from_fd(theirs.as_fd(), false, true).unwrap();
    assert_eq!(trusted.map_all(Access::ReadOnly).unwrap().len(), 8192);
    // Trusted, then shrunk: map refuses instead of faulting later.
    ftruncate(&theirs, 4096).unwrap();
    assert!(trusted.map_all(Access::ReadOnly).unwrap_err().message.contains("truncated"));
}

#[test]
fn receive_timeouts_keep_the_stream_or_close_it() {
    use std::io::Write;
    use std::time::Duration;
    let (mut a, b) = UnixStream::pair().unwrap();
    let wait = Some(Duration::from_millis(50));
    // Nothing sent: a timeout, and the stream is intact.
    let err = transfer::recv_fds_within(b.as_fd(), wait, &mut || false).unwrap_err();
    assert_eq!(err.kind, ErrorKind::PeerTimeout, "{}", err.message);
    transfer::send_fds(a.as_fd(), &[], b"whole").unwrap();
    assert_eq!(transfer::recv_fds_within(b.as_fd(), wait, &mut || false).unwrap().1, b"whole");
    // Half a header: the stream cannot be resumed, so it is closed.
    a.write_all(b"NZC1").unwrap();
    let err = transfer::recv_fds_within(b.as_fd(), wait, &mut || false).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Protocol);
    assert!(err.message.contains("middle of a message"), "{}", err.message);
    let err = transfer::recv_fds(b.as_fd()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Protocol);
    assert!(err.message.contains("closed"), "{}", err.message);
}
