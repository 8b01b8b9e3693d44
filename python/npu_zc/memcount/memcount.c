/*
 * memcount: an LD_PRELOAD library that counts the bytes moved by memcpy,
 * memmove and mempcpy (and their _chk variants) in every thread.
 *
 * Counting is off until memcount_start(); the test turns it on only around
 * the inference of each frame, i.e. between the preprocess output and the
 * postprocess input. Besides the total, it counts the bytes of copies whose
 * source or destination overlaps a "watched" range (the frame's own input and
 * output buffers), which no other activity in the process can touch, and the
 * largest single copy. (The runtime and Python copy a few bytes of metadata
 * per call, e.g. a shape: the frame-overlap count and the largest copy tell
 * those from copies of the frame.)
 *
 * Build: gcc -O2 -shared -fPIC -fno-builtin -fno-tree-loop-distribute-patterns
 *        -o libmemcount.so memcount.c -ldl
 * (-fno-builtin and no loop distribution: the fallback copy loop below must
 * not itself be turned into a call to memcpy.)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef void *(*copy_fn)(void *, const void *, size_t);

static copy_fn real_memcpy, real_memmove, real_mempcpy;

static atomic_int enabled;
static atomic_ullong total_bytes, total_calls, watched_bytes, watched_calls, largest;

#define MAX_RANGES 16
static atomic_uintptr_t range_lo[MAX_RANGES], range_hi[MAX_RANGES];

/* Used only while dlsym itself is resolving the real functions. */
static void *slow_move(void *dst, const void *src, size_t n) {
    volatile unsigned char *d = dst;
    const volatile unsigned char *s = src;
    if (d < s) {
        for (size_t i = 0; i < n; i++) d[i] = s[i];
    } else {
        for (size_t i = n; i > 0; i--) d[i - 1] = s[i - 1];
    }
    return dst;
}

__attribute__((constructor)) static void resolve(void) {
    real_memcpy = (copy_fn)dlsym(RTLD_NEXT, "memcpy");
    real_memmove = (copy_fn)dlsym(RTLD_NEXT, "memmove");
    real_mempcpy = (copy_fn)dlsym(RTLD_NEXT, "mempcpy");
}

static int overlaps(uintptr_t lo, size_t n) {
    uintptr_t hi = lo + n;
    for (int i = 0; i < MAX_RANGES; i++) {
        uintptr_t a = atomic_load_explicit(&range_lo[i], memory_order_relaxed);
        uintptr_t b = atomic_load_explicit(&range_hi[i], memory_order_relaxed);
        if (a < b && lo < b && a < hi) return 1;
    }
    return 0;
}

static void count(void *dst, const void *src, size_t n) {
    if (!atomic_load_explicit(&enabled, memory_order_relaxed) || n == 0) return;
    atomic_fetch_add_explicit(&total_bytes, n, memory_order_relaxed);
    atomic_fetch_add_explicit(&total_calls, 1, memory_order_relaxed);
    unsigned long long seen = atomic_load_explicit(&largest, memory_order_relaxed);
    while (n > seen && !atomic_compare_exchange_weak(&largest, &seen, n)) {
    }
    if (overlaps((uintptr_t)dst, n) || overlaps((uintptr_t)src, n)) {
        atomic_fetch_add_explicit(&watched_bytes, n, memory_order_relaxed);
        atomic_fetch_add_explicit(&watched_calls, 1, memory_order_relaxed);
    }
}

void *memcpy(void *dst, const void *src, size_t n) {
    count(dst, src, n);
    return real_memcpy ? real_memcpy(dst, src, n) : slow_move(dst, src, n);
}

void *memmove(void *dst, const void *src, size_t n) {
    count(dst, src, n);
    return real_memmove ? real_memmove(dst, src, n) : slow_move(dst, src, n);
}

void *mempcpy(void *dst, const void *src, size_t n) {
    count(dst, src, n);
    if (real_mempcpy) return real_mempcpy(dst, src, n);
    return (unsigned char *)slow_move(dst, src, n) + n;
}

void *__memcpy_chk(void *dst, const void *src, size_t n, size_t dstlen) {
    (void)dstlen;
    return memcpy(dst, src, n);
}

void *__memmove_chk(void *dst, const void *src, size_t n, size_t dstlen) {
    (void)dstlen;
    return memmove(dst, src, n);
}

void *__mempcpy_chk(void *dst, const void *src, size_t n, size_t dstlen) {
    (void)dstlen;
    return mempcpy(dst, src, n);
}

/* --- control, called from Python through ctypes --- */

int memcount_loaded(void) { return real_memcpy != NULL; }

void memcount_reset(void) {
    atomic_store(&total_bytes, 0);
    atomic_store(&total_calls, 0);
    atomic_store(&watched_bytes, 0);
    atomic_store(&watched_calls, 0);
    atomic_store(&largest, 0);
}

void memcount_start(void) { atomic_store(&enabled, 1); }
void memcount_stop(void) { atomic_store(&enabled, 0); }

int memcount_watch(uintptr_t ptr, size_t n) {
    for (int i = 0; i < MAX_RANGES; i++) {
        if (atomic_load(&range_hi[i]) == 0) {
            atomic_store(&range_lo[i], ptr);
            atomic_store(&range_hi[i], ptr + n);
            return i;
        }
    }
    return -1;
}

void memcount_unwatch_all(void) {
    for (int i = 0; i < MAX_RANGES; i++) {
        atomic_store(&range_hi[i], 0);
        atomic_store(&range_lo[i], 0);
    }
}

unsigned long long memcount_total_bytes(void) { return atomic_load(&total_bytes); }
unsigned long long memcount_total_calls(void) { return atomic_load(&total_calls); }
unsigned long long memcount_watched_bytes(void) { return atomic_load(&watched_bytes); }
unsigned long long memcount_watched_calls(void) { return atomic_load(&watched_calls); }
unsigned long long memcount_largest(void) { return atomic_load(&largest); }
