//! `stamp!`: the one way code written once becomes per-instruction-set code.
//!
//! A body is written once, `#[inline(always)]`: generic over an instruction
//! set's type (the layout engine's kernels, stamped by family through
//! `layout::kernels::stamp_kernels!`, which builds on this macro) or plain
//! Rust (the float slices, quantisation, detect's NMS). `stamp!` wraps it in
//! functions compiled with one instruction set's `#[target_feature]`s, so the
//! body, the trait methods and the intrinsics they call become one loop of
//! that set's instructions (docs/layout.md, "One kernel, every instruction set").
//!
//! * `stamp!(@fn ["features"] name<const G: T, ...>(args) = callee)`, or
//!   with `{ body }` in place of `= callee`: one wrapper, a `pub(crate)
//!   unsafe fn` of the module it is written in; `[]` for portable code.
//! * `stamp!(for level, fn name(args) { body })`: a body written in place,
//!   stamped portable, for AVX2 and for AVX-512, and a closure that runs the
//!   copy of `level` (which the caller checked this CPU supports).
//!
//! # Safety (every function stamped)
//! The caller must have checked that the CPU supports the features
//! (`SimdLevel::is_supported`).

macro_rules! stamp {
    // One wrapper, with const generics (a level need not use every wrapper it
    // stamps, hence `allow(dead_code)`).
    (@fn [$($features:literal)?] $name:ident<$(const $g:ident: $gt:ty),*>($($arg:ident: $ty:ty),*) = $call:expr) => {
        #[allow(dead_code)]
        $(#[target_feature(enable = $features)])?
        pub(crate) unsafe fn $name<$(const $g: $gt),*>($($arg: $ty),*) {
            ($call)($($arg),*)
        }
    };
    // One wrapper with a body of its own.
    (@fn [$($features:literal)?] $name:ident<$(const $g:ident: $gt:ty),*>($($arg:ident: $ty:ty),*) $body:block) => {
        #[allow(dead_code)]
        $(#[target_feature(enable = $features)])?
        pub(crate) unsafe fn $name<$(const $g: $gt),*>($($arg: $ty),*) $body
    };
    // One wrapper, with a type generic.
    (@fn [$($features:literal)?] $name:ident<$g:ident: $bound:path>($($arg:ident: $ty:ty),*) = $call:expr) => {
        #[allow(dead_code)]
        $(#[target_feature(enable = $features)])?
        pub(crate) unsafe fn $name<$g: $bound>($($arg: $ty),*) {
            ($call)($($arg),*)
        }
    };
    // A body written in place, and the copy that `level` runs.
    (for $level:expr, fn $name:ident $(<$g:ident: $bound:path>)? ($($arg:ident: $ty:ty),*) $body:block) => {{
        #[inline(always)]
        fn portable $(<$g: $bound>)? ($($arg: $ty),*) $body
        #[cfg(target_arch = "x86_64")]
        $crate::simd::stamp!(@fn ["avx2,fma,f16c"] avx2<$($g: $bound)?>($($arg: $ty),*) = portable$(::<$g>)?);
        #[cfg(target_arch = "x86_64")]
        $crate::simd::stamp!(@fn ["avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c"] avx512<$($g: $bound)?>(
            $($arg: $ty),*
        ) = portable$(::<$g>)?);
        let run = |$($arg: $ty),*| match $level {
            // SAFETY: `$level` is a level this CPU supports (SimdLevel::resolve
            // or is_supported checked it), so its instructions are present.
            #[cfg(target_arch = "x86_64")]
            $crate::simd::SimdLevel::Avx2 => unsafe { avx2($($arg),*) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            $crate::simd::SimdLevel::Avx512 | $crate::simd::SimdLevel::Avx512Vbmi => unsafe { avx512($($arg),*) },
            _ => portable($($arg),*),
        };
        run
    }};
}
pub(crate) use stamp;
