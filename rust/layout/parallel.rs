//! The threads a conversion is split across: a small pool whose workers
//! wait actively for a short while after each call before they sleep.
//!
//! Why not rayon: a conversion is short, and rayon's idle workers go to
//! sleep within tens of microseconds, so every call of a stream of frames
//! paid futex wake-ups, one per helper (slow under KVM), and lost to
//! OpenCV, whose pool spins between calls. Here a call publishes its work
//! with one atomic store that spinning workers see at once; sleeping
//! workers are woken together (one `notify_all`). And each thread starts on
//! its own run of bands, the same rows call after call, still in its core's
//! cache (`for_each`). docs/benchmarks.md has the threaded figures.
//!
//! One call uses the pool at a time: a call that finds it busy (another
//! thread converting) runs its work on its own thread, which is never wrong,
//! only slower, and cannot deadlock. A child forked after the workers
//! started has none of them: its calls run on the calling thread alone.
//!
//! How long workers spin: `NPU_ZC_SPIN_US` microseconds (default
//! [`DEFAULT_SPIN_US`]; 0: sleep at once; a value that is not a whole
//! number is ignored). Spinning burns the idle cores'
//! time for that long after each call, which is what lets the next call of a
//! burst of frames start on every core at once.

use std::cell::UnsafeCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, TryLockError};
use std::time::{Duration, Instant};

/// Microseconds workers spin after a call when `NPU_ZC_SPIN_US` is unset.
pub const DEFAULT_SPIN_US: u64 = 100;
/// Workers the pool may grow to, whatever a caller asks.
const MAX_WORKERS: usize = 255;

/// Each item of `items` is passed to `f` once, by whichever of at most
/// `threads` threads (the calling one included, and no more than the
/// process has cores: more would only take turns, spinning) takes it first;
/// returns when all are done. A panic in `f` is raised again here, after
/// every thread has stopped touching `items`.
pub(crate) fn for_each<T: Send>(items: Vec<T>, threads: usize, f: impl Fn(T) + Sync) {
    for_each_on(pool(), items, threads.min(default_threads()), f)
}

fn for_each_on<T: Send>(pool: &Pool, items: Vec<T>, threads: usize, f: impl Fn(T) + Sync) {
    let helpers = threads.saturating_sub(1).min(items.len().saturating_sub(1));
    if helpers == 0 {
        return items.into_iter().for_each(f);
    }
    // Thread k starts on the k-th of `threads` runs of items, then takes
    // what is left of the others: a worker converts the same rows call
    // after call (they are still in its core's cache), and one that starts
    // late loses its run to the others rather than delaying the call.
    let parts = helpers + 1;
    let len = items.len();
    let bounds: Vec<usize> = (0..=parts).map(|k| k * len / parts).collect();
    let cursors: Vec<AtomicUsize> = bounds[..parts].iter().map(|&b| AtomicUsize::new(b)).collect();
    let slots: Vec<Mutex<Option<T>>> = items.into_iter().map(|item| Mutex::new(Some(item))).collect();
    let work = |thread: usize| {
        for part in (0..parts).map(|k| (thread + k) % parts) {
            loop {
                let i = cursors[part].fetch_add(1, Ordering::Relaxed);
                if i >= bounds[part + 1] {
                    break;
                }
                // Each index is taken once, so the lock is never contended; a
                // poisoned one only means another item's thread panicked.
                if let Some(item) = slots[i].lock().unwrap_or_else(|e| e.into_inner()).take() {
                    f(item);
                }
            }
        }
    };
    pool.run(helpers, &work);
}

/// Threads a conversion uses when the caller does not say: the cores this
/// process may run on.
pub(crate) fn default_threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The machine's limit for moving bytes on `threads` threads, for the
/// benchmarks: seconds per copy when each thread copies its part of
/// `nbytes` `repeat` times, all starting together (so without the cost of
/// handing out work, which a conversion pays and this does not).
pub fn memcpy_seconds(nbytes: usize, threads: usize, repeat: usize) -> f64 {
    let threads = threads.clamp(1, MAX_WORKERS);
    let part = nbytes.div_ceil(threads);
    let src = vec![1u8; nbytes];
    let mut dst = vec![0u8; nbytes];
    let start = std::sync::Barrier::new(threads);
    let slowest = std::thread::scope(|scope| {
        let runs: Vec<_> = src
            .chunks(part.max(1))
            .zip(dst.chunks_mut(part.max(1)))
            .map(|(from, to)| {
                let start = &start;
                scope.spawn(move || {
                    to.copy_from_slice(from); // fault the pages in first
                    start.wait();
                    let t = Instant::now();
                    for _ in 0..repeat {
                        to.copy_from_slice(std::hint::black_box(from));
                    }
                    t.elapsed()
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().expect("a copy does not panic")).max().unwrap_or_default()
    });
    slowest.as_secs_f64() / repeat.max(1) as f64
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let spin_us = std::env::var("NPU_ZC_SPIN_US").ok().and_then(|v| v.trim().parse().ok());
        Pool::new(Duration::from_micros(spin_us.unwrap_or(DEFAULT_SPIN_US)))
    })
}

/// The work of one call, its lifetime erased: it is only called between
/// the call's publishing it and the call's return (see [`Pool::run`]).
type Work = *const (dyn Fn(usize) + Sync + 'static);

/// `state`: the call's number (high 32 bits), how many helpers it wants
/// (16 bits) and how many have joined (low 16 bits). A worker joins with a
/// compare-and-swap on the whole word, so it can only join the call whose
/// number it saw, and only while places are left.
const fn pack(epoch: u64, wanted: u64, joined: u64) -> u64 {
    (epoch << 32) | (wanted << 16) | joined
}
const fn epoch(state: u64) -> u64 {
    state >> 32
}
const fn wanted(state: u64) -> u64 {
    (state >> 16) & 0xffff
}
const fn joined(state: u64) -> u64 {
    state & 0xffff
}

struct Pool {
    /// The process whose threads the workers are.
    pid: u32,
    /// Held by the call in progress.
    busy: Mutex<()>,
    shared: &'static Shared,
    /// Workers started so far (they never stop).
    workers: AtomicUsize,
}

struct Shared {
    state: AtomicU64,
    work: UnsafeCell<Work>,
    /// Helpers of the current call that have finished its work.
    finished: AtomicUsize,
    /// A helper's panic, raised again by the caller.
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    spin: Duration,
    sleepers: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
}

// SAFETY: `work` is written only by the caller holding `Pool::busy` while no
// helper can join (the previous call is closed and all who joined it have
// finished), and read only by a helper that joined the current call, which
// the caller waits for before it returns or writes `work` again.
unsafe impl Sync for Shared {}

impl Pool {
    fn new(spin: Duration) -> Pool {
        let idle: Work = &|_| {};
        let shared = Box::leak(Box::new(Shared {
            state: AtomicU64::new(0),
            work: UnsafeCell::new(idle),
            finished: AtomicUsize::new(0),
            panic: Mutex::new(None),
            spin,
            sleepers: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
        }));
        Pool { pid: std::process::id(), busy: Mutex::new(()), shared, workers: AtomicUsize::new(0) }
    }

    /// Runs `work` on this thread and on up to `helpers` workers at once;
    /// returns when every one that ran it has returned. `work` gets the
    /// thread's number: 0 for the caller, 1 + k for the pool's k-th worker
    /// (the same worker, call after call).
    fn run(&self, helpers: usize, work: &(dyn Fn(usize) + Sync)) {
        if std::process::id() != self.pid {
            // A child forked from the process that started the workers: it
            // has none of them, and its copies of the locks may be held by
            // threads it does not have.
            return work(0);
        }
        let _busy = match self.busy.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return work(0),
        };
        let shared = self.shared;
        let last = epoch(shared.state.load(Ordering::Relaxed));
        let helpers = self.grow(helpers.min(MAX_WORKERS), last);
        if helpers == 0 {
            return work(0);
        }
        // SAFETY: only the lifetime is erased; see `Shared`'s Sync: the
        // previous call let no helper in after it closed, and it waited for
        // those who had joined.
        unsafe { *shared.work.get() = std::mem::transmute::<&(dyn Fn(usize) + Sync), Work>(work) };
        shared.finished.store(0, Ordering::Relaxed);
        let epoch_now = (last + 1) & 0xffff_ffff;
        shared.state.store(pack(epoch_now, helpers as u64, 0), Ordering::SeqCst);
        if shared.sleepers.load(Ordering::SeqCst) > 0 {
            let _sleep = shared.sleep.lock().unwrap_or_else(|e| e.into_inner());
            shared.wake.notify_all();
        }

        let mine = panic::catch_unwind(AssertUnwindSafe(|| work(0)));

        // Close the call: no helper joins from now on.
        let closed = shared
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| Some(pack(epoch(s), joined(s), joined(s))))
            .expect("the closure always returns Some");
        let joined = joined(closed) as usize;
        let mut spins = 0u32;
        while shared.finished.load(Ordering::Acquire) < joined {
            spins += 1;
            if spins < 1 << 12 {
                std::hint::spin_loop();
            } else {
                // A helper was preempted mid-band: let it have the core.
                std::thread::yield_now();
            }
        }
        if let Err(payload) = mine {
            panic::resume_unwind(payload);
        }
        if let Some(payload) = shared.panic.lock().unwrap_or_else(|e| e.into_inner()).take() {
            panic::resume_unwind(payload);
        }
    }

    /// Starts workers until there are `wanted` (or as many as the system
    /// lets us start); returns how many there are, at most `wanted`.
    fn grow(&self, wanted: usize, epoch: u64) -> usize {
        let mut have = self.workers.load(Ordering::Relaxed);
        while have < wanted {
            let shared = self.shared;
            let spawned = std::thread::Builder::new()
                .name(format!("npu_zc-band-{have}"))
                .spawn(move || shared.serve(have + 1, epoch));
            if spawned.is_err() {
                break; // out of threads: run with those we have
            }
            have += 1;
            self.workers.store(have, Ordering::Relaxed);
        }
        have.min(wanted)
    }
}

impl Shared {
    /// The life of worker number `me`: wait for a call after `seen`, join
    /// it if places are left, run its work, and wait again.
    fn serve(&self, me: usize, mut seen: u64) {
        loop {
            let mut state = self.next_call(seen);
            loop {
                seen = epoch(state);
                if joined(state) >= wanted(state) {
                    break; // the call is full or closed
                }
                match self.state.compare_exchange_weak(state, state + 1, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        // SAFETY: we joined this call, so its caller waits for
                        // our `finished` before its `work` goes out of scope.
                        let work = unsafe { &**self.work.get() };
                        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| work(me))) {
                            *self.panic.lock().unwrap_or_else(|e| e.into_inner()) = Some(payload);
                        }
                        self.finished.fetch_add(1, Ordering::Release);
                        break;
                    }
                    Err(now) => state = now,
                }
            }
        }
    }

    /// The state of the first call after `seen`: spins for `spin`, then sleeps.
    fn next_call(&self, seen: u64) -> u64 {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let state = self.state.load(Ordering::Acquire);
            if epoch(state) != seen {
                return state;
            }
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) && start.elapsed() >= self.spin {
                break;
            }
        }
        let mut sleep = self.sleep.lock().unwrap_or_else(|e| e.into_inner());
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        loop {
            let state = self.state.load(Ordering::SeqCst);
            if epoch(state) != seen {
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
                return state;
            }
            sleep = self.wake.wait(sleep).unwrap_or_else(|e| e.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn every_item_runs_once_on_several_threads() {
        for threads in [1, 2, 3, 8, 17] {
            for n in [0, 1, 2, 5, 64, 1000] {
                let counts: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
                for_each((0..n).collect(), threads, |i: usize| {
                    counts[i].fetch_add(1, Ordering::Relaxed);
                });
                assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1), "threads {threads}, n {n}");
            }
        }
    }

    #[test]
    fn no_more_threads_than_cores() {
        for_each((0..10_000).collect(), 1000, |_: usize| {});
        assert!(pool().workers.load(Ordering::Relaxed) < default_threads());
    }

    #[test]
    fn helpers_really_take_items() {
        // With items that wait for each other, one thread alone would never
        // finish: this fails unless at least two threads take items at once.
        // (A pool of its own: the shared one may be busy with another test.)
        let arrived = AtomicUsize::new(0);
        for_each_on(&Pool::new(Duration::from_micros(100)), vec![0, 1], 2, |_| {
            arrived.fetch_add(1, Ordering::SeqCst);
            let start = Instant::now();
            while arrived.load(Ordering::SeqCst) < 2 {
                assert!(start.elapsed() < Duration::from_secs(10), "no second thread took an item");
                std::hint::spin_loop();
            }
        });
    }

    #[test]
    fn sleeping_workers_wake_for_the_next_call() {
        let pool = Pool::new(Duration::ZERO);
        for _ in 0..50 {
            let arrived = AtomicUsize::new(0);
            let work = |_| {
                arrived.fetch_add(1, Ordering::SeqCst);
                let start = Instant::now();
                while arrived.load(Ordering::SeqCst) < 3 && start.elapsed() < Duration::from_secs(10) {
                    std::hint::spin_loop();
                }
            };
            pool.run(2, &work);
            assert_eq!(arrived.load(Ordering::SeqCst), 3);
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    #[test]
    fn concurrent_callers_each_finish_their_own_items() {
        std::thread::scope(|scope| {
            for caller in 0..4u32 {
                scope.spawn(move || {
                    for _ in 0..200 {
                        let sum = AtomicU32::new(0);
                        for_each((0..32u32).collect(), 4, |i| {
                            sum.fetch_add(i + caller, Ordering::Relaxed);
                        });
                        assert_eq!(sum.load(Ordering::Relaxed), (0..32).sum::<u32>() + 32 * caller);
                    }
                });
            }
        });
    }

    #[test]
    fn a_panic_reaches_the_caller_and_the_pool_goes_on() {
        for round in 0..3 {
            let result = panic::catch_unwind(|| {
                for_each((0..16).collect(), 4, |i: usize| {
                    if i == 7 + round {
                        panic!("item {i}");
                    }
                });
            });
            assert!(result.is_err());
            let done = AtomicUsize::new(0);
            for_each((0..16).collect(), 4, |_: usize| {
                done.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(done.load(Ordering::Relaxed), 16);
        }
    }
}
