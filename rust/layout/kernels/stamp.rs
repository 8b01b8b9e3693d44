//! `stamp_kernels!`: the layout engine's kernel families, stamped for one
//! instruction set through `crate::simd::stamp!` (the one stamping mechanism).
//!
//! `stamp_kernels!(Type, ["features"]: family, ...)`, in an instruction set's
//! home: the wrappers of each family below for `Type`, as `pub(crate) unsafe
//! fn`s of the module it is written in; `[]` for portable code (no features).
//! Families: `conversion` (every `Simd`), `quads` (`Quads`), `words`
//! (`Words`: 10-bit YUV), `int8` (`Quantise`), `resample` (`Resample`),
//! `fused` (`Resample::yuv_linear`: AVX2 alone).
//!
//! A new kernel: its body once (vector.rs or resample.rs), then one line in
//! its family here. A new instruction set: a home that implements the traits
//! and stamps the families it offers.
//!
//! # Safety (every function stamped)
//! The caller must have checked that the CPU supports the features
//! (`SimdLevel::is_supported`); plans only hold kernels of such a level.

macro_rules! stamp_kernels {
    // The conversion and YUV kernels of vector.rs, for every `Simd`.
    (@conversion $isa:ty, $f:tt) => {
        $crate::simd::stamp!(@fn $f packed_u8<const C: usize>(plan: &$crate::layout::plan::Plan, src: &[u8], dst: &mut [u8])
            = $crate::layout::kernels::vector::packed_u8::<$isa, C>);
        $crate::simd::stamp!(@fn $f packed_16<const C: usize, const KIND: u8, const ARITH: u8>(
            plan: &$crate::layout::plan::Plan, src: &[u8], dst: &mut [u8]
        ) = $crate::layout::kernels::vector::packed_16::<$isa, C, KIND, ARITH>);
        $crate::simd::stamp!(@fn $f planar<const C: usize, const HALF: bool, const ARITH: u8>(
            plan: &$crate::layout::plan::Plan, src: &[u8], p0: &mut [u8], p1: &mut [u8], p2: &mut [u8]
        ) = $crate::layout::kernels::vector::planar::<$isa, C, HALF, ARITH>);
        $crate::simd::stamp!(@fn $f nv12_row<const BYTES: usize>(
            y: &[u8], uv: &[u8], dst: &mut [u8], out: &$crate::layout::plan::YuvOut
        ) {
            $crate::layout::kernels::vector::nv12_rows::<$isa, BYTES, 1>(
                [y], $crate::layout::plan::Chroma::Interleaved(uv), [dst], out
            )
        });
        $crate::simd::stamp!(@fn $f nv12_pair<const BYTES: usize>(
            y: [&[u8]; 2], chroma: $crate::layout::plan::Chroma<'_>, dst: [&mut [u8]; 2], out: &$crate::layout::plan::YuvOut
        ) = $crate::layout::kernels::vector::nv12_rows::<$isa, BYTES, 2>);
        $crate::simd::stamp!(@fn $f yuv422_row<const BYTES: usize, const Y_FIRST: bool>(
            row: &[u8], dst: &mut [u8], out: &$crate::layout::plan::YuvOut
        ) = $crate::layout::kernels::vector::yuv422_row::<$isa, BYTES, Y_FIRST>);
    };
    // Packed 16-bit floats a whole pixel to a vector (`Quads`).
    (@quads $isa:ty, $f:tt) => {
        $crate::simd::stamp!(@fn $f packed_16_quads<const C: usize, const KIND: u8, const ARITH: u8>(
            plan: &$crate::layout::plan::Plan, src: &[u8], dst: &mut [u8]
        ) = $crate::layout::kernels::vector::packed_16_quads::<$isa, C, KIND, ARITH>);
    };
    // 10-bit YUV rows (`Words`).
    (@words $isa:ty, $f:tt) => {
        $crate::simd::stamp!(@fn $f yuv10_row<const BYTES: usize, const LOW: bool>(
            y: &[u8], uv: &[u8], dst: &mut [u8], out: &$crate::layout::plan::YuvOut
        ) = $crate::layout::kernels::vector::yuv10_row::<$isa, BYTES, LOW>);
    };
    // Int8 destinations (`Quantise`).
    (@int8 $isa:ty, $f:tt) => {
        $crate::simd::stamp!(@fn $f packed_i8<const C: usize, const BYTES: usize, const ARITH: u8>(
            plan: &$crate::layout::plan::Plan, src: &[u8], dst: &mut [u8]
        ) = $crate::layout::kernels::vector::packed_i8::<$isa, C, BYTES, ARITH>);
    };
    // The resize row loops of resample.rs (`Resample`: an instruction set
    // may replace the bilinear x pass with its own).
    (@resample $isa:ty, $f:tt) => {
        $crate::simd::stamp!(@fn $f horizontal_linear<const C: usize>(
            src: &[u8], taps: &$crate::layout::kernels::resample::Linear, out: &mut [i16], ahead: &[u8]
        ) = <$isa as $crate::layout::kernels::resample::Resample>::horizontal_linear::<C>);
        $crate::simd::stamp!(@fn $f horizontal_linear2<const C: usize>(
            src: [&[u8]; 2], taps: &$crate::layout::kernels::resample::Linear, out: [&mut [i16]; 2], ahead: [&[u8]; 2]
        ) = <$isa as $crate::layout::kernels::resample::Resample>::horizontal_linear2::<C>);
        $crate::simd::stamp!(@fn $f vertical_linear<>(r0: &[i16], r1: &[i16], w: [i16; 2], out: &mut [u8])
            = $crate::layout::kernels::resample::vertical_linear);
        $crate::simd::stamp!(@fn $f gather<const C: usize>(src: &[u8], index: &[u32], out: &mut [u8])
            = $crate::layout::kernels::resample::gather::<C>);
        $crate::simd::stamp!(@fn $f groups<>(src: &[u8], index: &[u32], out: &mut [u8])
            = $crate::layout::kernels::resample::groups);
        $crate::simd::stamp!(@fn $f sum_rows16<>(rows: [&[u8]; 2], acc: &mut [u16], first: bool)
            = $crate::layout::kernels::resample::sum_rows::<u16>);
        $crate::simd::stamp!(@fn $f sum_rows<>(rows: [&[u8]; 2], acc: &mut [u32], first: bool)
            = $crate::layout::kernels::resample::sum_rows::<u32>);
        $crate::simd::stamp!(@fn $f blocks16<const C: usize>(acc: &[u16], kx: usize, area: u32, out: &mut [u8])
            = <$isa as $crate::layout::kernels::resample::Resample>::blocks::<C, u16>);
        $crate::simd::stamp!(@fn $f blocks<const C: usize>(acc: &[u32], kx: usize, area: u32, out: &mut [u8])
            = <$isa as $crate::layout::kernels::resample::Resample>::blocks::<C, u32>);
        $crate::simd::stamp!(@fn $f pair_sums<const C: usize>(row: &[u8], sums: &mut [u16])
            = <$isa as $crate::layout::kernels::resample::Resample>::pair_sums::<C>);
        $crate::simd::stamp!(@fn $f pair_means<const C: usize>(row: &[u8], sums: &[u16], out: &mut [u8])
            = <$isa as $crate::layout::kernels::resample::Resample>::pair_means::<C>);
        $crate::simd::stamp!(@fn $f weigh_rows<>(row: &[u8], w: f32, acc: &mut [f32], first: bool)
            = $crate::layout::kernels::resample::weigh_rows);
        $crate::simd::stamp!(@fn $f area_horizontal<const C: usize>(
            acc: &[f32], taps: &$crate::layout::kernels::resample::Area, out: &mut [u8]
        ) = $crate::layout::kernels::resample::area_horizontal::<C>);
    };
    // The resize's x pass that decodes 8-bit 4:2:0 as it reads (`Resample::yuv_linear`): only where a level's
    // own beats gathering and decoding rows (AVX2's, used at both x86 levels: `kernels::row_kernels`).
    (@fused $isa:ty, $f:tt) => {
        $crate::simd::stamp!(@fn $f yuv_linear<const ROWS: usize>(
            y: [&[u8]; 2], chroma: $crate::layout::kernels::resample::Chroma<'_>,
            taps: &$crate::layout::kernels::resample::YuvTaps, out: [&mut [i16]; 2],
            yuv: &$crate::layout::plan::YuvOut, ahead: &[&[u8]]
        ) = <$isa as $crate::layout::kernels::resample::Resample>::yuv_linear::<ROWS>);
    };
    // The fast rounding's two-row decoder (`Fast16`: 16-bit lanes, x86).
    (@fast $isa:ty, $f:tt) => {
        $crate::simd::stamp!(@fn $f nv12_pair_fast<const BYTES: usize>(
            y: [&[u8]; 2], chroma: $crate::layout::plan::Chroma<'_>, dst: [&mut [u8]; 2], out: &$crate::layout::plan::YuvOut
        ) = $crate::layout::kernels::vector::nv12_pair_fast::<$isa, BYTES>);
    };
    // What an instruction set's home writes: its type, its features, its families.
    ($isa:ty, $features:tt: $($family:ident),+) => {
        $( $crate::layout::kernels::stamp_kernels!(@$family $isa, $features); )+
    };
}
pub(crate) use stamp_kernels;
