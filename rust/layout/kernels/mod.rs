//! Row kernels: one source row in, one destination row (or one row of each
//! plane) out, every instruction set's in one home, and here the choice of
//! the kernels for a level.
//!
//! * Written once: `scalar.rs` (the reference, and the tails of every SIMD
//!   loop), `vector.rs` (the conversion and YUV kernels over the `Simd`
//!   traits), `resample.rs` (the resize row loops), stamped per instruction
//!   set by `stamp_kernels!` (`stamp.rs`, over `crate::simd::stamp!`, the one stamping mechanism).
//! * One home per instruction set: `x86/` (`avx2.rs`, `avx512.rs`, the
//!   plans' byte shuffles in `tables.rs`, which kernels each level offers in
//!   `mod.rs`) and `neon.rs`: the traits implemented, the kernels stamped,
//!   the rows written by hand in that set's intrinsics.
//! * Here: which kernels a level gets, by dispatch to its home.
//!
//! Arrows run one way (docs/architecture.md; tests/layout/test_layout_modules.py
//! checks it): this module reads the homes; the homes read `vector.rs`,
//! `resample.rs`, `scalar.rs` and `stamp.rs`; all of them read `plan.rs`. No
//! home reads this module, and `plan.rs` reads only the x86 home's plain
//! tables (`x86/tables.rs`).

use super::format::Element;
use super::plan::{Encoder, InterleaveRow, Kernel, Nv12Pair, Nv12Row, PackedRow, SplitRow, Yuv422Row};
use crate::simd::SimdLevel;
use resample::RowKernels;

#[cfg(target_arch = "aarch64")]
pub(crate) mod neon;
pub(crate) mod resample;
pub(crate) mod scalar;
mod stamp;
pub(crate) use stamp::stamp_kernels;
#[cfg(test)]
mod tests;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) mod vector;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

/// The table kernel for `channels`-byte source pixels and a destination of
/// `element`: planar, or packed with `dst_channels` (3, or 4 with a pad).
pub(crate) fn scalar_encoder(element: Element, planar: bool, channels: usize, dst_channels: usize) -> Encoder {
    use scalar::{packed, packed3, planar as plan};
    macro_rules! by_channels {
        ($f:ident, $kind:ident, $t:ty) => {
            match channels {
                1 => Encoder::$kind($f::<$t, 1>),
                3 => Encoder::$kind($f::<$t, 3>),
                _ => Encoder::$kind($f::<$t, 4>),
            }
        };
    }
    macro_rules! pick {
        ($t:ty) => {
            match (planar, dst_channels) {
                (true, _) => by_channels!(plan, Planar, $t),
                (false, 3) => by_channels!(packed3, Packed, $t),
                (false, _) => by_channels!(packed, Packed, $t),
            }
        };
    }
    match element {
        Element::U8 | Element::I8 => pick!(u8),
        Element::Bf16 | Element::F16 => pick!(u16),
        Element::F32 => pick!(f32),
    }
}

/// SIMD encoders for this case, fastest first; empty when there is none.
/// `identity` says the normalisation is `(x - 0) / 1`.
#[allow(unused_variables)]
pub(crate) fn simd_encoders(
    level: SimdLevel,
    element: Element,
    planar: bool,
    channels: usize,
    identity: bool,
) -> Vec<Kernel> {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => {
            x86::encoders(level, element, planar, channels, identity)
        }
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => neon::encoders(element, planar, channels, identity),
        _ => Vec::new(),
    }
}

/// 4-byte pixels to 3-byte pixels with no arithmetic (RGBx/RGBA or decoded
/// YUV rows into RGB or BGR): the pad dropped, R and B swapped if `SWAP`.
fn drop_pad<const SWAP: bool>(level: SimdLevel) -> Kernel {
    let encoder: PackedRow = match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => x86::avx2::drop_pad::<SWAP>,
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => neon::drop_pad::<SWAP>,
        _ => scalar::drop_pad::<SWAP>,
    };
    let name = match (level, SWAP) {
        (SimdLevel::Scalar, _) => "scalar/drop-pad",
        #[cfg(target_arch = "x86_64")]
        (_, false) => "avx2/drop-pad",
        #[cfg(target_arch = "x86_64")]
        (_, true) => "avx2/drop-pad-swap-rb",
        #[cfg(not(target_arch = "x86_64"))]
        (_, false) => "neon/drop-pad",
        #[cfg(not(target_arch = "x86_64"))]
        (_, true) => "neon/drop-pad-swap-rb",
    };
    Kernel { name, encoder: Encoder::Packed(encoder) }
}

/// 3- or 4-byte pixels to 3-byte pixels with no arithmetic (RGB <-> BGR, or
/// the same order; the pad of 4-byte ones dropped): a row copy, R and B
/// swapped, or `drop_pad`.
pub(crate) fn byte_reorder(level: SimdLevel, channels: usize, map: [usize; 3]) -> Option<Kernel> {
    let (name, encoder): (&'static str, PackedRow) = match (map, level) {
        ([0, 1, 2], _) if channels == 4 => return Some(drop_pad::<false>(level)),
        ([2, 1, 0], _) if channels == 4 => return Some(drop_pad::<true>(level)),
        (_, _) if channels != 3 => return None,
        ([0, 1, 2], _) => ("copy", scalar::copy),
        #[cfg(target_arch = "x86_64")]
        ([2, 1, 0], SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi) => {
            ("avx2/swap-rb", x86::avx2::swap_rb)
        }
        ([2, 1, 0], _) => ("portable/swap-rb", scalar::swap_rb),
        _ => return None,
    };
    Some(Kernel { name, encoder: Encoder::Packed(encoder) })
}

/// The NV12 row decoder of this level into pixels of `bytes` bytes (3 or 4).
pub(crate) fn nv12_decoder(level: SimdLevel, bytes: usize) -> (Nv12Row, &'static str) {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => x86::nv12_decoder(level, bytes),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => neon::nv12_decoder(bytes),
        _ => (scalar::nv12_row, if bytes == 3 { "scalar/nv12-rgb" } else { "scalar/nv12" }),
    }
}

/// The same decoder, two rows sharing one chroma row at a time.
pub(crate) fn nv12_pair_decoder(level: SimdLevel, bytes: usize) -> Nv12Pair {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => x86::nv12_pair_decoder(level, bytes),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => neon::nv12_pair_decoder(bytes),
        _ => scalar::nv12_pair,
    }
}

/// The two-row decoder of the fast rounding (`colour::Fast`) into pixels
/// of `bytes` bytes (3 or 4) at this level; None where the level has none
/// (NEON: the exact decoders serve).
pub(crate) fn nv12_fast_pair_decoder(level: SimdLevel, bytes: usize) -> Option<(Nv12Pair, &'static str)> {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => Some(x86::nv12_fast_pair_decoder(level, bytes)),
        SimdLevel::Scalar => {
            Some((scalar::nv12_pair_fast, if bytes == 3 { "scalar/nv12-fast-rgb" } else { "scalar/nv12-fast" }))
        }
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// The decoder of packed YUYV (`y_first`) or UYVY rows into pixels of
/// `bytes` bytes at this level, where it has one (else the rows are split
/// into NV12's first, `splitter`).
pub(crate) fn yuv422_decoder(level: SimdLevel, bytes: usize, y_first: bool) -> Option<(Yuv422Row, &'static str)> {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => Some(x86::yuv422_decoder(level, bytes, y_first)),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => Some(neon::yuv422_decoder(bytes, y_first)),
        _ => None,
    }
}

/// The 10-bit row decoder of this level into pixels of `bytes` bytes (3 or
/// 4): P010's samples (value in the top bits), or with `low` I010's.
pub(crate) fn yuv10_decoder(level: SimdLevel, bytes: usize, low: bool) -> (Nv12Row, &'static str) {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => x86::yuv10_decoder(level, bytes, low),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => neon::yuv10_decoder(bytes, low),
        _ => match (bytes, low) {
            (3, false) => (scalar::yuv10_row::<false>, "scalar/p010-rgb"),
            (_, false) => (scalar::yuv10_row::<false>, "scalar/p010"),
            (3, true) => (scalar::yuv10_row::<true>, "scalar/i010-rgb"),
            (_, true) => (scalar::yuv10_row::<true>, "scalar/i010"),
        },
    }
}

/// SIMD int8 encoders (RGBx_I8 with `dst_channels` 4, RGB_I8 with 3) for
/// `channels`-byte source pixels, in the order a plan tries them.
#[allow(unused_variables)]
pub(crate) fn int8_encoders(level: SimdLevel, channels: usize, dst_channels: usize) -> Vec<Kernel> {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => {
            x86::int8_encoders(level, channels, dst_channels)
        }
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => neon::int8_encoders(channels, dst_channels),
        _ => Vec::new(),
    }
}

/// How camera YUV rows become the NV12 decoders' input: OpenCV's
/// `cvtColor` decodes YUYV, UYVY, I420 and NV12 with one and the same
/// fixed-point arithmetic (checked in tests/layout/test_layout_yuv.py), so
/// these formats reuse the NV12 decoders of every level, bit-exact by
/// construction. Only the rearrangement is new: for YUYV the even bytes of a
/// row are Y and the odd ones U,V (already in NV12's U,V order); for UYVY the
/// other way round (`splitter`, where a level has no decoder of the packed
/// rows themselves: `yuv422_decoder`). I420's U and V rows are read where
/// they lie by the two-row decoder (`plan::Chroma::Planar`); they are
/// interleaved (`interleaver`) only where a resize decodes single rows, and
/// I010's by words.
pub(crate) fn splitter(level: SimdLevel) -> (SplitRow, &'static str) {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => (x86::avx2::split_row, "avx2/yuv422-split"),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => (neon::split_row, "neon/yuv422-split"),
        _ => (scalar::split_row, "scalar/yuv422-split"),
    }
}

/// The interleaver of U and V rows of this level, for samples of `bytes`
/// bytes: I420's (1) or I010's (2, by 16-bit words).
pub(crate) fn interleaver(level: SimdLevel, bytes: usize) -> (InterleaveRow, &'static str) {
    macro_rules! by_bytes {
        ($($f:ident)::+, $isa:literal) => {
            match bytes {
                2 => ($($f)::+::<2>, concat!($isa, "/i010-interleave")),
                _ => ($($f)::+::<1>, concat!($isa, "/i420-interleave")),
            }
        };
    }
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => by_bytes!(x86::avx2::interleave_row, "avx2"),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => by_bytes!(neon::interleave_row, "neon"),
        _ => by_bytes!(scalar::interleave_row, "scalar"),
    }
}

macro_rules! kernels_of {
    ($($m:ident)::+, $c:literal) => {
        RowKernels {
            horizontal_linear: $($m)::+::horizontal_linear::<$c>,
            horizontal_linear2: $($m)::+::horizontal_linear2::<$c>,
            vertical_linear: $($m)::+::vertical_linear,
            gather: $($m)::+::gather::<$c>,
            groups: $($m)::+::groups,
            sum_rows: ($($m)::+::sum_rows16, $($m)::+::sum_rows),
            blocks: ($($m)::+::blocks16::<$c>, $($m)::+::blocks::<$c>),
            pair_sums: $($m)::+::pair_sums::<$c>,
            pair_means: $($m)::+::pair_means::<$c>,
            weigh_rows: $($m)::+::weigh_rows,
            area_horizontal: $($m)::+::area_horizontal::<$c>,
            yuv_linear: None, // a level's own, where it has one: `row_kernels`
            fuse_from: FUSE_FROM,
        }
    };
}

macro_rules! by_channels {
    ($($m:ident)::+, $channels:expr) => {
        match $channels {
            1 => kernels_of!($($m)::+, 1),
            3 => kernels_of!($($m)::+, 3),
            _ => kernels_of!($($m)::+, 4),
        }
    };
}

/// From a shrink by 3 along x, the fused YUV x pass decodes fewer pixels
/// than the row decoders and beats AVX2's x pass over the decoded rows.
const FUSE_FROM: [usize; 2] = [3, 1];

/// With VBMI's x pass (eight pixels a step while they lie within a 128-byte
/// window, a shrink by less than 30 / 7), decoding rows is the faster up to a
/// shrink by 3.5 on the machines timed (docs/layout.md).
#[cfg(target_arch = "x86_64")]
const VBMI_FUSE_FROM: [usize; 2] = [7, 2];

/// The fused YUV x pass: AVX2's, the only one stamped (`stamp_kernels!`'s `fused`).
#[cfg(target_arch = "x86_64")]
const AVX2_FUSED: Option<[resample::YuvLinear; 2]> =
    Some([x86::avx2::resample::yuv_linear::<1>, x86::avx2::resample::yuv_linear::<2>]);

/// The row loops for `channels`-value pixels (1, 3 or 4) at `level`, and the
/// name of the instruction set they were compiled for.
pub(crate) fn row_kernels(level: SimdLevel, channels: usize) -> (RowKernels, &'static str) {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => {
            (RowKernels { yuv_linear: AVX2_FUSED, ..by_channels!(x86::avx2::resample, channels) }, "avx2")
        }
        #[cfg(target_arch = "x86_64")]
        // The fused YUV x pass compiled for AVX2 at both x86 levels: LLVM's AVX-512 build of the same loop
        // is slower (docs/layout.md, "Resizing YUV sources").
        SimdLevel::Avx512 => {
            (RowKernels { yuv_linear: AVX2_FUSED, ..by_channels!(x86::avx512::resample, channels) }, "avx512")
        }
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512Vbmi => {
            let kernels = by_channels!(x86::avx512::resample_vbmi, channels);
            (RowKernels { yuv_linear: AVX2_FUSED, fuse_from: VBMI_FUSE_FROM, ..kernels }, "avx512vbmi")
        }
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => (by_channels!(neon::resample, channels), "neon"),
        _ => (by_channels!(scalar::resample, channels), "scalar"),
    }
}
