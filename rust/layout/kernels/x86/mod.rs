//! The x86_64 home: AVX2 (avx2.rs: every x86 level builds on it), AVX-512
//! with and without VBMI (avx512.rs), the plans' byte shuffles (tables.rs),
//! and here which kernels each level offers, in the order a plan tries them.
//! The kernels themselves are written once in vector.rs and resample.rs.

use super::super::format::Element;
use super::super::plan::{Encoder, Kernel, Nv12Pair, Nv12Row, PackedRow, Yuv422Row};
use super::vector::{BF16, BF16_FAST, BF16_NATIVE, DIV, F16, FMA, REFINED};
use crate::simd::SimdLevel;

pub(super) mod avx2;
pub(super) mod avx512;
pub(crate) mod tables;

pub(crate) fn encoders(
    level: SimdLevel,
    element: Element,
    planar: bool,
    channels: usize,
    identity: bool,
) -> Vec<Kernel> {
    use SimdLevel::{Avx2, Avx512, Avx512Vbmi};
    let mut kernels = Vec::new();
    // `by_channels!(path, [generics after C], Packed|Planar, name)`
    macro_rules! by_channels {
        ($($f:ident)::+, [$($g:tt),*], $kind:ident, $name:expr) => {
            kernels.push(Kernel {
                name: $name,
                encoder: match channels {
                    1 => Encoder::$kind($($f)::+::<1, $($g),*>),
                    3 => Encoder::$kind($($f)::+::<3, $($g),*>),
                    _ => Encoder::$kind($($f)::+::<4, $($g),*>),
                },
            })
        };
    }
    // One kernel per arithmetic (see `FMA`), in the order a plan tries them.
    macro_rules! fma_then_div {
        ($($f:ident)::+, [$($g:tt),*], $kind:ident, $name:expr) => {{
            by_channels!($($f)::+, [$($g,)* FMA], $kind, concat!($name, "/fma"));
            by_channels!($($f)::+, [$($g,)* REFINED], $kind, concat!($name, "/refined"));
            by_channels!($($f)::+, [$($g,)* DIV], $kind, concat!($name, "/div"));
        }};
    }
    match (level, element, planar) {
        // u8 layouts with normalisation round through the scalar tables.
        (_, Element::U8, false) if !identity => {}
        (Avx2, Element::U8, false) => by_channels!(avx2::packed_u8, [], Packed, "avx2/u8"),
        (Avx512, Element::U8, false) => by_channels!(avx512::packed_u8, [], Packed, "avx512/u8"),
        (Avx512Vbmi, Element::U8, false) => by_channels!(avx512::vbmi::packed_u8, [], Packed, "avx512vbmi/u8"),
        (Avx2, Element::Bf16, false) => {
            fma_then_div!(avx2::packed_16, [BF16_FAST], Packed, "avx2/bf16-fast");
            fma_then_div!(avx2::packed_16, [BF16], Packed, "avx2/bf16");
        }
        (Avx2, Element::F16, false) => fma_then_div!(avx2::packed_16, [F16], Packed, "avx2/f16"),
        (Avx512, Element::Bf16, false) => {
            fma_then_div!(avx512::packed_16_quads, [BF16_FAST], Packed, "avx512/bf16-fast");
            fma_then_div!(avx512::packed_16_quads, [BF16], Packed, "avx512/bf16");
        }
        (Avx512, Element::F16, false) => fma_then_div!(avx512::packed_16_quads, [F16], Packed, "avx512/f16"),
        (Avx512Vbmi, Element::Bf16, false) => {
            if is_x86_feature_detected!("avx512bf16") {
                fma_then_div!(avx512::vbmi_bf16::packed_16, [BF16_NATIVE], Packed, "avx512vbmi/bf16-native");
            }
            fma_then_div!(avx512::vbmi::packed_16_quads, [BF16_FAST], Packed, "avx512vbmi/bf16-fast");
            fma_then_div!(avx512::vbmi::packed_16_quads, [BF16], Packed, "avx512vbmi/bf16");
        }
        (Avx512Vbmi, Element::F16, false) => fma_then_div!(avx512::vbmi::packed_16, [F16], Packed, "avx512vbmi/f16"),
        (Avx2, Element::F32, true) => fma_then_div!(avx2::planar, [false], Planar, "avx2/planar-f32"),
        (Avx2, Element::F16, true) => fma_then_div!(avx2::planar, [true], Planar, "avx2/planar-f16"),
        (Avx512, Element::F32, true) => fma_then_div!(avx512::planar, [false], Planar, "avx512/planar-f32"),
        (Avx512, Element::F16, true) => fma_then_div!(avx512::planar, [true], Planar, "avx512/planar-f16"),
        (Avx512Vbmi, Element::F32, true) => {
            fma_then_div!(avx512::vbmi::planar, [false], Planar, "avx512vbmi/planar-f32")
        }
        (Avx512Vbmi, Element::F16, true) => {
            fma_then_div!(avx512::vbmi::planar, [true], Planar, "avx512vbmi/planar-f16")
        }
        _ => {}
    }
    kernels
}

pub(crate) fn nv12_decoder(level: SimdLevel, bytes: usize) -> (Nv12Row, &'static str) {
    match (level, bytes) {
        (SimdLevel::Avx512, 3) => (avx512::nv12_row::<3>, "avx512/nv12-rgb"),
        (SimdLevel::Avx512, _) => (avx512::nv12_row::<4>, "avx512/nv12"),
        (SimdLevel::Avx512Vbmi, 3) => (avx512::vbmi::nv12_row::<3>, "avx512vbmi/nv12-rgb"),
        (SimdLevel::Avx512Vbmi, _) => (avx512::vbmi::nv12_row::<4>, "avx512vbmi/nv12"),
        (_, 3) => (avx2::nv12_row::<3>, "avx2/nv12-rgb"),
        _ => (avx2::nv12_row::<4>, "avx2/nv12"),
    }
}

pub(crate) fn yuv422_decoder(level: SimdLevel, bytes: usize, y_first: bool) -> (Yuv422Row, &'static str) {
    match (level, bytes, y_first) {
        (SimdLevel::Avx512Vbmi, 3, true) => (avx512::vbmi::yuv422_row::<3, true>, "avx512vbmi/yuyv-rgb"),
        (SimdLevel::Avx512Vbmi, 3, false) => (avx512::vbmi::yuv422_row::<3, false>, "avx512vbmi/uyvy-rgb"),
        (SimdLevel::Avx512Vbmi, _, true) => (avx512::vbmi::yuv422_row::<4, true>, "avx512vbmi/yuyv"),
        (SimdLevel::Avx512Vbmi, _, false) => (avx512::vbmi::yuv422_row::<4, false>, "avx512vbmi/uyvy"),
        (SimdLevel::Avx512, 3, true) => (avx512::yuv422_row::<3, true>, "avx512/yuyv-rgb"),
        (SimdLevel::Avx512, 3, false) => (avx512::yuv422_row::<3, false>, "avx512/uyvy-rgb"),
        (SimdLevel::Avx512, _, true) => (avx512::yuv422_row::<4, true>, "avx512/yuyv"),
        (SimdLevel::Avx512, _, false) => (avx512::yuv422_row::<4, false>, "avx512/uyvy"),
        (_, 3, true) => (avx2::yuv422_row::<3, true>, "avx2/yuyv-rgb"),
        (_, 3, false) => (avx2::yuv422_row::<3, false>, "avx2/uyvy-rgb"),
        (_, _, true) => (avx2::yuv422_row::<4, true>, "avx2/yuyv"),
        (_, _, false) => (avx2::yuv422_row::<4, false>, "avx2/uyvy"),
    }
}

/// The int8 encoders of this level: the fused multiply-add first, then the
/// two exact divisions.
pub(crate) fn int8_encoders(level: SimdLevel, channels: usize, dst_channels: usize) -> Vec<Kernel> {
    let mut kernels = Vec::new();
    macro_rules! push {
        ($($m:ident)::+, $name:literal) => {
            for (arith, suffix) in [(FMA, "/fma"), (DIV, "/div")] {
                let encoder: PackedRow = match (channels, dst_channels == 3, arith) {
                    (1, false, FMA) => $($m)::+::packed_i8::<1, 4, FMA>,
                    (1, false, _) => $($m)::+::packed_i8::<1, 4, DIV>,
                    (1, true, FMA) => $($m)::+::packed_i8::<1, 3, FMA>,
                    (1, true, _) => $($m)::+::packed_i8::<1, 3, DIV>,
                    (3, false, FMA) => $($m)::+::packed_i8::<3, 4, FMA>,
                    (3, false, _) => $($m)::+::packed_i8::<3, 4, DIV>,
                    (3, true, FMA) => $($m)::+::packed_i8::<3, 3, FMA>,
                    (3, true, _) => $($m)::+::packed_i8::<3, 3, DIV>,
                    (_, false, FMA) => $($m)::+::packed_i8::<4, 4, FMA>,
                    (_, false, _) => $($m)::+::packed_i8::<4, 4, DIV>,
                    (_, true, FMA) => $($m)::+::packed_i8::<4, 3, FMA>,
                    (_, true, _) => $($m)::+::packed_i8::<4, 3, DIV>,
                };
                let name = match (dst_channels, suffix) {
                    (3, "/fma") => concat!($name, "-rgb/fma"),
                    (3, _) => concat!($name, "-rgb/div"),
                    (_, "/fma") => concat!($name, "/fma"),
                    _ => concat!($name, "/div"),
                };
                kernels.push(Kernel { name, encoder: Encoder::Packed(encoder) });
            }
        };
    }
    match level {
        SimdLevel::Avx512Vbmi => push!(avx512::vbmi, "avx512vbmi/i8"),
        SimdLevel::Avx512 => push!(avx512, "avx512/i8"),
        _ => push!(avx2, "avx2/i8"),
    }
    kernels
}

/// The 10-bit decoder (P010, or I010 with `low`) of this level (AVX-512's
/// serves both AVX-512 levels: it needs no VBMI).
pub(crate) fn yuv10_decoder(level: SimdLevel, bytes: usize, low: bool) -> (Nv12Row, &'static str) {
    let avx512 = matches!(level, SimdLevel::Avx512 | SimdLevel::Avx512Vbmi);
    match (avx512, bytes, low) {
        (true, 3, false) => (avx512::yuv10_row::<3, false>, "avx512/p010-rgb"),
        (true, _, false) => (avx512::yuv10_row::<4, false>, "avx512/p010"),
        (true, 3, true) => (avx512::yuv10_row::<3, true>, "avx512/i010-rgb"),
        (true, _, true) => (avx512::yuv10_row::<4, true>, "avx512/i010"),
        (false, 3, false) => (avx2::yuv10_row::<3, false>, "avx2/p010-rgb"),
        (false, _, false) => (avx2::yuv10_row::<4, false>, "avx2/p010"),
        (false, 3, true) => (avx2::yuv10_row::<3, true>, "avx2/i010-rgb"),
        (false, _, true) => (avx2::yuv10_row::<4, true>, "avx2/i010"),
    }
}

pub(crate) fn nv12_pair_decoder(level: SimdLevel, bytes: usize) -> Nv12Pair {
    match (level, bytes) {
        (SimdLevel::Avx512Vbmi, 3) => avx512::vbmi::nv12_pair::<3>,
        (SimdLevel::Avx512Vbmi, _) => avx512::vbmi::nv12_pair::<4>,
        (SimdLevel::Avx512, 3) => avx512::nv12_pair::<3>,
        (SimdLevel::Avx512, _) => avx512::nv12_pair::<4>,
        (_, 3) => avx2::nv12_pair::<3>,
        _ => avx2::nv12_pair::<4>,
    }
}

/// The fast rounding's two-row decoder (`colour::Fast`) of this level (AVX-512's
/// serves the VBMI level too, but for 3-byte pixels, which VBMI's byte permutes make).
pub(crate) fn nv12_fast_pair_decoder(level: SimdLevel, bytes: usize) -> (Nv12Pair, &'static str) {
    match (level, bytes) {
        (SimdLevel::Avx512Vbmi, 3) => (avx512::vbmi::nv12_pair_fast::<3>, "avx512vbmi/nv12-fast-rgb"),
        (SimdLevel::Avx512, 3) => (avx512::nv12_pair_fast::<3>, "avx512/nv12-fast-rgb"),
        (SimdLevel::Avx512 | SimdLevel::Avx512Vbmi, _) => (avx512::nv12_pair_fast::<4>, "avx512/nv12-fast"),
        (_, 3) => (avx2::nv12_pair_fast::<3>, "avx2/nv12-fast-rgb"),
        _ => (avx2::nv12_pair_fast::<4>, "avx2/nv12-fast"),
    }
}
