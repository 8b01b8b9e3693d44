//! Every level against the reference, through the choosers of mod.rs: the
//! YUV rearrangements and decoders (the camera formats, 10-bit sources, the
//! exhaustive proof of the 8-bit decoders).

use super::scalar::{interleave_row, split_row};
use super::*;

#[test]
fn simd_rearrangements_match_the_scalar_ones() {
    for level in SimdLevel::available() {
        let (split, _) = splitter(level);
        let (interleave, _) = interleaver(level, 1);
        for n in [0usize, 1, 15, 16, 17, 31, 32, 33, 100, 640] {
            let row: Vec<u8> = (0..2 * n).map(|i| (i * 7 + 3) as u8).collect();
            let (mut e, mut o, mut e0, mut o0) = (vec![0; n], vec![0; n], vec![0; n], vec![0; n]);
            // SAFETY: the level is available on this CPU.
            unsafe { split(&row, &mut e, &mut o) };
            split_row(&row, &mut e0, &mut o0);
            assert_eq!((e, o), (e0.clone(), o0.clone()), "{level:?} split of {n}");
            let mut uv = vec![0; 2 * n];
            // SAFETY: as above.
            unsafe { interleave(&e0, &o0, &mut uv) };
            assert_eq!(uv, row, "{level:?} interleave of {n}");
        }
    }
}

/// Camera frames equal NV12 frames with the same samples (whose decoding
/// is bit-exact with OpenCV's), at every level, into every kind of destination.
#[test]
fn camera_formats_decode_like_nv12() {
    use crate::layout::{convert, Colour, Destination, Format, Matrix, Options, Range, Source};
    let (w, h) = (38usize, 6usize);
    let bytes =
        |n: usize, seed: usize| -> Vec<u8> { (0..n).map(|i| ((i * 131 + seed * 17) ^ (i >> 3)) as u8).collect() };
    let y = bytes(w * h, 1);
    let uv = bytes(w * h / 2, 2); // NV12's U,V rows: one per two image rows
    let mut nv12 = y.clone();
    nv12.extend_from_slice(&uv);
    // The same samples as YUYV, UYVY (chroma repeated on both rows of a pair) and I420.
    let (mut yuyv, mut uyvy) = (Vec::new(), Vec::new());
    for r in 0..h {
        for x in 0..w {
            let (yy, c) = (y[r * w + x], uv[(r / 2) * w + x]);
            yuyv.extend_from_slice(&[yy, c]);
            uyvy.extend_from_slice(&[c, yy]);
        }
    }
    let mut nv21 = y.clone();
    nv21.extend(uv.chunks_exact(2).flat_map(|p| [p[1], p[0]]));
    let mut i420 = y.clone();
    i420.extend(uv.iter().step_by(2));
    i420.extend(uv.iter().skip(1).step_by(2));
    let normalised = Options { mean: Some([10.0, 20.0, 30.0]), scale: Some([50.0, 60.0, 70.0]), ..Default::default() };
    let colours = [Colour::default(), Colour { matrix: Matrix::Bt709, range: Range::Full }];
    for (level, colour) in SimdLevel::available().into_iter().flat_map(|l| colours.map(|c| (l, c))) {
        for (dst, options, size) in [
            (Format::Rgbx, Options::default(), 4),
            (Format::Bgr, Options::default(), 3),
            (Format::RgbxBf16, normalised.clone(), 8),
            (Format::RgbpFloat, normalised.clone(), 12),
        ] {
            let options = Options { simd: Some(level), threads: Some(1), colour, ..options };
            let run = |src: Format, data: &[u8]| {
                let mut out = vec![0u8; w * h * size];
                let source = Source::new(src, data, w, h, None).unwrap();
                convert(&source, Destination::new(dst, &mut out, w, h, None).unwrap(), &options).unwrap();
                out
            };
            let reference = run(Format::Nv12, &nv12);
            for (src, data) in
                [(Format::Yuyv, &yuyv), (Format::Uyvy, &uyvy), (Format::I420, &i420), (Format::Nv21, &nv21)]
            {
                assert!(run(src, data) == reference, "{src} -> {dst} at {level:?} in {colour}");
            }
        }
    }
}

/// Resized camera frames equal resized NV12 frames with the same samples
/// at every level: a mild shrink (whole rows decoded) and a strong one
/// (only the pixel groups the taps read: 4-byte groups of the packed rows).
#[test]
fn resized_camera_formats_decode_like_nv12() {
    use crate::layout::{convert, Destination, Format, Options, Source};
    let (w, h) = (96usize, 8usize);
    let bytes =
        |n: usize, seed: usize| -> Vec<u8> { (0..n).map(|i| ((i * 97 + seed * 31) ^ (i >> 2)) as u8).collect() };
    let (y, uv) = (bytes(w * h, 3), bytes(w * h / 2, 4));
    let mut nv12 = y.clone();
    nv12.extend_from_slice(&uv);
    let (mut yuyv, mut uyvy) = (Vec::new(), Vec::new());
    for r in 0..h {
        for x in 0..w {
            let (yy, c) = (y[r * w + x], uv[(r / 2) * w + x]);
            yuyv.extend_from_slice(&[yy, c]);
            uyvy.extend_from_slice(&[c, yy]);
        }
    }
    for level in SimdLevel::available() {
        for (dst, (dw, dh)) in
            [(Format::Rgbx, (64, 6)), (Format::Bgr, (64, 6)), (Format::Rgbx, (12, 4)), (Format::Bgr, (10, 3))]
        {
            let options = Options { simd: Some(level), threads: Some(1), ..Options::default() };
            let run = |src: Format, data: &[u8]| {
                let mut out = vec![0u8; dw * dh * dst.channels()];
                let source = Source::new(src, data, w, h, None).unwrap();
                convert(&source, Destination::new(dst, &mut out, dw, dh, None).unwrap(), &options).unwrap();
                out
            };
            let reference = run(Format::Nv12, &nv12);
            for (src, data) in [(Format::Yuyv, &yuyv), (Format::Uyvy, &uyvy)] {
                assert!(run(src, data) == reference, "{src} -> {dst} {dw}x{dh} at {level:?}");
            }
        }
    }
}

/// Every level's two-row decoder gives the per-pixel reference's bytes
/// for every one of the 2^24 (Y, U, V) inputs, in every colour standard,
/// reading NV12's U,V row and I420's U and V rows,
/// into RGBx and BGR (the two store paths, and the B, G, R order): the
/// proof that the SIMD arithmetic (a split `cy`, sums packed by their
/// high words) is the reference's. One row per U holds every (V, Y) pair:
/// pixel `256 V + Y`, chroma pair `128 V + Y / 2`; the second row of the
/// pair takes Y reversed (255 - Y), so each row sees every value. The
/// first row is also decoded as YUYV and UYVY (the packed decoders'
/// loads), which must give the same bytes.
/// Ignored by default (3 minutes unoptimised; seconds with
/// `cargo test --release --lib every_input -- --ignored`).
#[test]
#[ignore = "exhaustive: run with --release -- --ignored"]
fn every_level_decodes_every_input_exactly() {
    use crate::layout::colour::yuv_to_rgb;
    use crate::layout::kernels::{nv12_pair_decoder, yuv422_decoder};
    use crate::layout::plan::{Chroma, YuvOut};
    use crate::layout::{Colour, Matrix, Range};
    const N: usize = 1 << 16;
    let y0: Vec<u8> = (0..N).map(|p| p as u8).collect();
    let y1: Vec<u8> = y0.iter().map(|&y| 255 - y).collect();
    let colours = [Matrix::Bt601, Matrix::Bt709, Matrix::Bt2020]
        .into_iter()
        .flat_map(|matrix| [Range::Limited, Range::Full].map(|range| Colour { matrix, range }));
    for colour in colours {
        let k = colour.coefficients();
        for (bytes, pos) in [(4usize, [0usize, 1, 2]), (3, [2, 1, 0])] {
            let out = YuvOut { pos, pad: 0xA5, bytes, k };
            for level in SimdLevel::available().into_iter().filter(|&l| l != SimdLevel::Scalar) {
                let pair = nv12_pair_decoder(level, bytes);
                let (mut d0, mut d1) = (vec![0u8; N * bytes], vec![0u8; N * bytes]);
                let v_row: Vec<u8> = (0..N / 2).map(|j| (j / 128) as u8).collect();
                for (u, planar) in (0..=255u8).flat_map(|u| [(u, false), (u, true)]) {
                    let uv: Vec<u8> = (0..N / 2).flat_map(|j| [u, (j / 128) as u8]).collect();
                    let u_row = vec![u; N / 2];
                    // NV12's U,V row, or the same samples as I420's U and V rows.
                    let chroma = if planar { Chroma::Planar(&u_row, &v_row) } else { Chroma::Interleaved(&uv) };
                    // SAFETY: the level is available on this CPU.
                    unsafe { pair([&y0, &y1], chroma, [&mut d0, &mut d1], &out) };
                    // The first row as YUYV and UYVY, decoded from the packed row.
                    for y_first in [true, false].into_iter().filter(|_| !planar) {
                        let Some((packed, _)) = yuv422_decoder(level, bytes, y_first) else { continue };
                        let row: Vec<u8> =
                            y0.iter().zip(&uv).flat_map(|(&y, &c)| if y_first { [y, c] } else { [c, y] }).collect();
                        let mut d = vec![0u8; N * bytes];
                        // SAFETY: as above.
                        unsafe { packed(&row, &mut d, &out) };
                        assert!(
                            d == d0,
                            "{colour} {level:?} {bytes}-byte pixels, packed 4:2:2 (Y first: {y_first}), U {u}"
                        );
                    }
                    for (y, d) in [(&y0, &d0), (&y1, &d1)] {
                        for (p, px) in d.chunks_exact(bytes).enumerate() {
                            let rgb = yuv_to_rgb(&k, y[p], u, (p / 256) as u8);
                            // `pos` says where R, G, B go.
                            let mut bytes_want = [0u8; 3];
                            for c in 0..3 {
                                bytes_want[pos[c]] = rgb[c];
                            }
                            assert!(
                                px[..3] == bytes_want && (bytes == 3 || px[3] == 0xA5),
                                "{colour} {level:?} {bytes}-byte pixels (I420: {planar}): Y {} U {u} V {} gave {:?}, want {bytes_want:?}",
                                y[p],
                                p / 256,
                                &px[..3]
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Every level decodes NV12 and I420 in every colour standard as the per-pixel
/// reference (`colour::yuv_to_rgb`) does, into every u8 destination,
/// rows of any even width (SIMD steps and scalar tails), straight and
/// through a resize that keeps the size (the decoded-rows path).
#[test]
fn every_level_decodes_every_standard_as_the_reference() {
    use crate::layout::colour::yuv_to_rgb;
    use crate::layout::{convert, Colour, Destination, Format, Matrix, Options, Range, Rect, Resize, Source};
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut byte = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u8
    };
    let colours = [Matrix::Bt601, Matrix::Bt709, Matrix::Bt2020]
        .into_iter()
        .flat_map(|matrix| [Range::Limited, Range::Full].map(|range| Colour { matrix, range }));
    for colour in colours {
        let k = colour.coefficients();
        for (w, h) in [(2usize, 2usize), (30, 4), (66, 2), (130, 6)] {
            let data: Vec<u8> = (0..w * h * 3 / 2).map(|_| byte()).collect();
            // The same samples as I420: the U plane, then the V plane.
            let mut i420 = data[..w * h].to_vec();
            i420.extend(data[w * h..].iter().step_by(2));
            i420.extend(data[w * h..].iter().skip(1).step_by(2));
            let want = |x: usize, r: usize| {
                let uv = w * h + (r / 2) * w + (x & !1);
                yuv_to_rgb(&k, data[r * w + x], data[uv], data[uv + 1])
            };
            for level in SimdLevel::available() {
                for dst in [Format::Rgbx, Format::Bgrx, Format::Rgb, Format::Bgr] {
                    for roi in [None, Some(Rect::new(0, 0, w, h))] {
                        let c = dst.channels();
                        let mut out = vec![0u8; w * h * c];
                        let resize = Resize { roi, ..Resize::default() };
                        let options =
                            Options { simd: Some(level), threads: Some(1), colour, resize, ..Options::default() };
                        for (src, data) in [(Format::Nv12, &data), (Format::I420, &i420)] {
                            let source = Source::new(src, data, w, h, None).unwrap();
                            convert(&source, Destination::new(dst, &mut out, w, h, None).unwrap(), &options).unwrap();
                            for (i, px) in out.chunks_exact(c).enumerate() {
                                let mut rgb = want(i % w, i / w);
                                if dst.name().starts_with("BGR") {
                                    rgb.reverse();
                                }
                                assert_eq!(
                                    px[..3],
                                    rgb,
                                    "{colour} {level:?} {src} -> {dst} {w}x{h} at pixel {i}, roi {roi:?}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn odd_widths_and_odd_i420_strides_are_refused_clearly() {
    use crate::layout::{Format, Source};
    let data = vec![0u8; 64];
    let e = Source::new(Format::Yuyv, &data, 3, 2, None).unwrap_err();
    assert!(e.to_string().contains("the width must be even"), "{e}");
    let e = Source::new(Format::I420, &data, 4, 3, None).unwrap_err();
    assert!(e.to_string().contains("must be even"), "{e}");
    let e = Source::new(Format::I420, &data, 4, 4, Some(7)).unwrap_err();
    assert!(e.to_string().contains("must be even"), "{e}");
    let e = Source::new(Format::I420, &data[..30], 4, 4, Some(8)).unwrap_err();
    assert!(e.to_string().contains("too few"), "{e}");
}

/// Padded I420 (one buffer, V4L2's layout: chroma rows half the stride
/// apart; or three planes with strides of their own) decodes as packed I420.
#[test]
fn padded_i420_decodes_as_packed_i420() {
    use crate::layout::{convert, Destination, Format, Options, Rows, Source};
    let (w, h, pitch) = (34usize, 6usize, 48usize);
    let packed: Vec<u8> = (0..w * h * 3 / 2).map(|i| (i * 97 + 13) as u8).collect();
    let (y, u, v) = (&packed[..w * h], &packed[w * h..w * h * 5 / 4], &packed[w * h * 5 / 4..]);
    let mut padded = vec![0xEEu8; pitch * h * 3 / 2];
    for r in 0..h {
        padded[r * pitch..][..w].copy_from_slice(&y[r * w..][..w]);
    }
    for r in 0..h / 2 {
        padded[h * pitch + r * pitch / 2..][..w / 2].copy_from_slice(&u[r * w / 2..][..w / 2]);
        padded[h * pitch + h / 2 * pitch / 2 + r * pitch / 2..][..w / 2].copy_from_slice(&v[r * w / 2..][..w / 2]);
    }
    let (yp, up, vp) = (vec![1u8; 40 * h], vec![2u8; 20 * h / 2], vec![3u8; 24 * h / 2]);
    let (mut yp, mut up, mut vp) = (yp, up, vp);
    for r in 0..h {
        yp[r * 40..][..w].copy_from_slice(&y[r * w..][..w]);
    }
    for r in 0..h / 2 {
        up[r * 20..][..w / 2].copy_from_slice(&u[r * w / 2..][..w / 2]);
        vp[r * 24..][..w / 2].copy_from_slice(&v[r * w / 2..][..w / 2]);
    }
    for level in SimdLevel::available() {
        let options = Options { simd: Some(level), threads: Some(1), ..Options::default() };
        let run = |source: Source<'_>| {
            let mut out = vec![0u8; w * h * 3];
            convert(&source, Destination::new(Format::Rgb, &mut out, w, h, None).unwrap(), &options).unwrap();
            out
        };
        let want = run(Source::new(Format::I420, &packed, w, h, None).unwrap());
        assert!(run(Source::new(Format::I420, &padded, w, h, Some(pitch)).unwrap()) == want, "{level:?}");
        let planes = Source::i420(
            w,
            h,
            Rows::new(&yp, h, w, 40).unwrap(),
            Rows::new(&up, h / 2, w / 2, 20).unwrap(),
            Rows::new(&vp, h / 2, w / 2, 24).unwrap(),
        )
        .unwrap();
        assert!(run(planes) == want, "{level:?}");
    }
}

/// Every level decodes P010 and I010 in every colour standard as the
/// per-pixel reference (`colour::yuv10_to_rgb`) does, into every u8
/// destination, straight and through the resizing path; the bits outside
/// a sample's 10 are ignored; float destinations are the u8 decoding
/// normalised.
#[test]
fn every_level_decodes_ten_bit_samples_as_the_reference() {
    use crate::layout::colour::yuv10_to_rgb;
    use crate::layout::{convert, Colour, Destination, Format, Matrix, Options, Range, Rect, Resize, Rows, Source};
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut word = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u16
    };
    let colours = [Matrix::Bt601, Matrix::Bt709, Matrix::Bt2020]
        .into_iter()
        .flat_map(|matrix| [Range::Limited, Range::Full].map(|range| Colour { matrix, range }));
    for colour in colours {
        let k = colour.coefficients10();
        for (w, h) in [(2usize, 2usize), (30, 4), (66, 2), (98, 6)] {
            // Random words: P010 reads their top 10 bits, I010 their low 10.
            let y: Vec<u16> = (0..w * h).map(|_| word()).collect();
            let uv: Vec<u16> = (0..w * h / 2).map(|_| word()).collect();
            let bytes = |words: &[u16]| -> Vec<u8> { words.iter().flat_map(|w| w.to_le_bytes()).collect() };
            let p010: Vec<u8> = bytes(&[y.clone(), uv.clone()].concat());
            let u: Vec<u16> = uv.iter().copied().step_by(2).collect();
            let v: Vec<u16> = uv.iter().copied().skip(1).step_by(2).collect();
            let i010: Vec<u8> = bytes(&[y.clone(), u, v].concat());
            for (src, data, value) in
                [(Format::P010, &p010, (|w: u16| w >> 6) as fn(u16) -> u16), (Format::I010, &i010, |w: u16| w & 0x3FF)]
            {
                let want = |x: usize, r: usize| {
                    let c = (r / 2) * w + (x & !1);
                    yuv10_to_rgb(&k, value(y[r * w + x]), value(uv[c]), value(uv[c + 1]))
                };
                for level in SimdLevel::available() {
                    for dst in [Format::Rgbx, Format::Bgrx, Format::Rgb, Format::Bgr] {
                        for roi in [None, Some(Rect::new(0, 0, w, h))] {
                            let c = dst.channels();
                            let mut out = vec![0u8; w * h * c];
                            let resize = Resize { roi, ..Resize::default() };
                            let options =
                                Options { simd: Some(level), threads: Some(1), colour, resize, ..Options::default() };
                            let source = Source::new(src, data, w, h, None).unwrap();
                            convert(&source, Destination::new(dst, &mut out, w, h, None).unwrap(), &options).unwrap();
                            for (i, px) in out.chunks_exact(c).enumerate() {
                                let mut rgb = want(i % w, i / w);
                                if dst.name().starts_with("BGR") {
                                    rgb.reverse();
                                }
                                assert_eq!(px[..3], rgb, "{src} {colour} {level:?} -> {dst} {w}x{h} px {i} {roi:?}");
                            }
                        }
                    }
                    // Float destinations: the RGB decoding, normalised as an RGB frame is.
                    let options = Options {
                        simd: Some(level),
                        threads: Some(1),
                        colour,
                        mean: Some([120.0, 110.0, 100.0]),
                        scale: Some([60.0, 58.0, 57.0]),
                        ..Options::default()
                    };
                    let rgb: Vec<u8> = (0..w * h).flat_map(|i| want(i % w, i / w)).collect();
                    for dst in [Format::RgbxBf16, Format::RgbpFloat, Format::BgrpFp16] {
                        let size = frame_nbytes(dst, w, h);
                        let (mut got, mut expected) = (vec![0u8; size], vec![0u8; size]);
                        let source = Source::new(src, data, w, h, None).unwrap();
                        convert(&source, Destination::new(dst, &mut got, w, h, None).unwrap(), &options).unwrap();
                        let source = Source::new(Format::Rgb, &rgb, w, h, None).unwrap();
                        convert(&source, Destination::new(dst, &mut expected, w, h, None).unwrap(), &options).unwrap();
                        assert!(got == expected, "{src} {colour} {level:?} -> {dst} {w}x{h}");
                    }
                }
                // Two planes with strides of their own decode as one buffer.
                if src == Format::P010 {
                    let (ys, uvs) = (2 * w + 6, 2 * w + 10);
                    let (mut yp, mut uvp) = (vec![0xABu8; ys * h], vec![0xCDu8; uvs * h / 2]);
                    for r in 0..h {
                        yp[r * ys..][..2 * w].copy_from_slice(&p010[r * 2 * w..][..2 * w]);
                    }
                    for r in 0..h / 2 {
                        uvp[r * uvs..][..2 * w].copy_from_slice(&p010[(h + r) * 2 * w..][..2 * w]);
                    }
                    let planes = Source::p010(
                        w,
                        h,
                        Rows::new(&yp, h, 2 * w, ys).unwrap(),
                        Rows::new(&uvp, h / 2, 2 * w, uvs).unwrap(),
                    )
                    .unwrap();
                    let options = Options { threads: Some(1), colour, ..Options::default() };
                    let (mut a, mut b) = (vec![0u8; w * h * 3], vec![0u8; w * h * 3]);
                    convert(&planes, Destination::new(Format::Rgb, &mut a, w, h, None).unwrap(), &options).unwrap();
                    let one = Source::new(src, data, w, h, None).unwrap();
                    convert(&one, Destination::new(Format::Rgb, &mut b, w, h, None).unwrap(), &options).unwrap();
                    assert!(a == b, "{colour} {w}x{h}: P010 planes");
                }
            }
        }
    }
}

fn frame_nbytes(format: crate::layout::Format, w: usize, h: usize) -> usize {
    crate::layout::frame_nbytes(format, w, h, None).unwrap()
}

#[test]
fn simd_interleave16_matches_the_scalar_one() {
    for level in SimdLevel::available() {
        let (interleave, _) = interleaver(level, 2);
        for n in [0usize, 1, 15, 16, 17, 31, 32, 33, 100, 640] {
            let (u, v): (Vec<u8>, Vec<u8>) =
                ((0..2 * n).map(|i| (i * 7 + 3) as u8).collect(), (0..2 * n).map(|i| (i * 5 + 1) as u8).collect());
            let (mut got, mut want) = (vec![0; 4 * n], vec![0; 4 * n]);
            // SAFETY: the level is available on this CPU.
            unsafe { interleave(&u, &v, &mut got) };
            interleave_row::<2>(&u, &v, &mut want);
            assert_eq!(got, want, "{level:?} interleave16 of {n}");
        }
    }
}

#[test]
fn ten_bit_frames_with_bad_geometry_are_refused_clearly() {
    use crate::layout::{Format, Rows, Source};
    let data = [0u16; 64];
    // SAFETY: reinterpreting the u16 buffer as its bytes.
    let bytes: &[u8] = unsafe { std::slice::from_raw_parts(data.as_ptr().cast(), 128) };
    let e = Source::new(Format::P010, bytes, 3, 2, None).unwrap_err();
    assert!(e.to_string().contains("must be even"), "{e}");
    let e = Source::new(Format::P010, bytes, 4, 4, Some(9)).unwrap_err();
    assert!(e.to_string().contains("odd"), "{e}");
    let e = Source::new(Format::P010, bytes, 4, 4, Some(6)).unwrap_err();
    assert!(e.to_string().contains("shorter than one row"), "{e}");
    let e = Source::new(Format::I010, bytes, 4, 4, Some(10)).unwrap_err();
    assert!(e.to_string().contains("multiple of 4"), "{e}");
    let e = Source::new(Format::P010, &bytes[..40], 4, 4, None).unwrap_err();
    assert!(e.to_string().contains("too few"), "{e}");
    let e = Source::p010(4, 2, Rows::new(&bytes[1..], 2, 8, 8).unwrap(), Rows::new(&bytes[64..], 1, 8, 8).unwrap())
        .unwrap_err();
    assert!(e.to_string().contains("odd byte address"), "{e}");
    let e =
        Source::p010(4, 2, Rows::new(bytes, 2, 8, 8).unwrap(), Rows::new(&bytes[64..], 1, 6, 8).unwrap()).unwrap_err();
    assert!(e.to_string().contains("chroma plane"), "{e}");
}

/// Every level gathers the groups the table names, up to the row's
/// last group.
#[test]
fn every_level_gathers_the_groups_named() {
    let row: Vec<u8> = (0..200u32).map(|i| (i * 37 + 11) as u8).collect();
    for level in SimdLevel::available() {
        let groups = row_kernels(level, 4).0.groups;
        for index in [(0..100).collect::<Vec<u32>>(), (0..100).step_by(3).collect(), vec![99; 19], vec![]] {
            let want: Vec<u8> = index.iter().flat_map(|&g| [row[2 * g as usize], row[2 * g as usize + 1]]).collect();
            let mut out = vec![0u8; want.len()];
            // SAFETY: the level is available on this CPU.
            unsafe { groups(&row, &index, &mut out) };
            assert_eq!(out, want, "{level:?} {index:?}");
        }
    }
}

/// Every level's nearest x pass copies the pixels its table names, in any
/// order, up to the table's or the output's end (eight a step and the rest
/// one by one), and panics, as slicing does, on a pixel past the row
/// wherever it lies in a step.
#[test]
fn every_level_gathers_the_pixels_named() {
    let row: Vec<u8> = (0..400u32).map(|i| (i * 37 + 11) as u8).collect();
    let picks = |n: u32, step: u32, top: u32| (0..n).map(|k| (k * step) % top).collect::<Vec<u32>>();
    for level in SimdLevel::available() {
        for channels in [1usize, 3, 4] {
            let gather = row_kernels(level, channels).0.gather;
            let pixels = (row.len() / channels) as u32;
            let reversed: Vec<u32> = (0..pixels).rev().collect();
            for index in [
                picks(pixels, 1, pixels),
                picks(41, 3, pixels),
                picks(17, 7, pixels),
                reversed,
                vec![pixels - 1; 9],
                vec![],
            ] {
                let want: Vec<u8> =
                    index.iter().flat_map(|&i| row[i as usize * channels..][..channels].to_vec()).collect();
                for keep in [index.len(), index.len().saturating_sub(3)] {
                    let mut out = vec![0u8; keep * channels + channels - 1];
                    // SAFETY: the level is available on this CPU.
                    unsafe { gather(&row, &index, &mut out) };
                    assert_eq!(out[..keep * channels], want[..keep * channels], "{level:?} C {channels} {index:?}");
                    assert!(
                        out[keep * channels..].iter().all(|&b| b == 0),
                        "{level:?} C {channels}: a byte past the pixels"
                    );
                }
            }
            for past in [0usize, 5, 8, 12] {
                let mut index = picks(16, 1, pixels);
                index[past] = pixels;
                let mut out = vec![0u8; 16 * channels];
                // SAFETY: as above; the index past the row panics before any access outside it.
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
                    gather(&row, &index, &mut out)
                }));
                assert!(run.is_err(), "{level:?} C {channels}: pixel {pixels} at {past} was read");
            }
        }
    }
}

/// Every level's integer-shrink loops (a block's means, a halving's pair
/// sums and means) make the portable loops' values for 1-, 3- and 4-byte
/// pixels at every width, and write nothing past the whole pixels their
/// sources make (a part of one more left over), however much longer the
/// slices they write.
#[test]
fn every_level_shrinks_in_blocks_as_the_portable_loops_within_its_pixels() {
    use super::resample::{blocks, pair_means, pair_sums};
    const UNTOUCHED: u8 = 0xA5;
    let value = |i: usize, top: u32| (i as u32).wrapping_mul(2_654_435_761) >> 7 & top;
    for level in SimdLevel::available() {
        for channels in [1usize, 3, 4] {
            let k = row_kernels(level, channels).0;
            for n in 0..40usize {
                let c = channels;
                for (kx, ky) in [(1, 2), (2, 2), (3, 3), (4, 4), (5, 2)] {
                    let acc: Vec<u32> = (0..c * kx * (n + 1) - 1).map(|i| value(i, 255) * ky as u32).collect();
                    let used = &acc[..c * kx * n];
                    let mut want = vec![0u8; c * n];
                    match c {
                        1 => blocks::<1, u32>(used, kx, (kx * ky) as u32, &mut want),
                        3 => blocks::<3, u32>(used, kx, (kx * ky) as u32, &mut want),
                        _ => blocks::<4, u32>(used, kx, (kx * ky) as u32, &mut want),
                    }
                    // The same sums in 16 bits (`ColumnSum`): the same means.
                    let acc16: Vec<u16> = acc.iter().map(|&v| v as u16).collect();
                    for width in [16, 32] {
                        let mut out = vec![UNTOUCHED; c * n + 8];
                        // SAFETY: the level is available on this CPU.
                        unsafe {
                            match width {
                                16 => (k.blocks.0)(&acc16, kx, (kx * ky) as u32, &mut out),
                                _ => (k.blocks.1)(&acc, kx, (kx * ky) as u32, &mut out),
                            }
                        };
                        assert_eq!(out[..c * n], want, "{level:?} {c} bytes, {n} pixels, {kx}x{ky}, {width}-bit sums");
                        assert!(
                            out[c * n..].iter().all(|&b| b == UNTOUCHED),
                            "{level:?} {c} bytes, {n}: past the pixels ({width}-bit sums)"
                        );
                    }
                }
                let rows: [Vec<u8>; 2] =
                    [0, 1].map(|r| (0..2 * c * (n + 1) - 1).map(|i| value(i + 7919 * r, 255) as u8).collect());
                let (first, second) = (&rows[0][..2 * c * n], &rows[1][..2 * c * n]);
                let (mut want_sums, mut want) = (vec![0u16; c * n], vec![0u8; c * n]);
                match c {
                    1 => (pair_sums::<1>(first, &mut want_sums), pair_means::<1>(second, &want_sums, &mut want)),
                    3 => (pair_sums::<3>(first, &mut want_sums), pair_means::<3>(second, &want_sums, &mut want)),
                    _ => (pair_sums::<4>(first, &mut want_sums), pair_means::<4>(second, &want_sums, &mut want)),
                };
                let mut sums = vec![u16::from(UNTOUCHED); c * n + 8];
                let mut out = vec![UNTOUCHED; c * n + 8];
                // SAFETY: the level is available on this CPU.
                unsafe {
                    (k.pair_sums)(&rows[0], &mut sums);
                    (k.pair_means)(&rows[1], &sums, &mut out);
                }
                assert_eq!(sums[..c * n], want_sums, "{level:?} {c} bytes, {n} pixels: pair sums");
                assert_eq!(out[..c * n], want, "{level:?} {c} bytes, {n} pixels: pair means");
                assert!(sums[c * n..].iter().all(|&v| v == u16::from(UNTOUCHED)), "{level:?} {c}, {n}: past the sums");
                assert!(out[c * n..].iter().all(|&b| b == UNTOUCHED), "{level:?} {c}, {n}: past the means");
            }
        }
    }
}

/// A block of up to 257 rows of 255 takes 16-bit column sums and one of 258
/// does not; at that bound every level's 16-bit sums, one row or two at a
/// pass, equal its 32-bit ones.
#[test]
fn every_level_sums_columns_in_16_bits_up_to_257_rows() {
    use super::resample::narrow_sums;
    assert!(narrow_sums(257) && !narrow_sums(258));
    // Column 0 is 255 in every row: its sum is 65535, the bound.
    let rows: Vec<Vec<u8>> =
        (0..257).map(|r| (0..77).map(|i| if i == 0 { 255 } else { (i * 31 + r) as u8 }).collect()).collect();
    for level in SimdLevel::available() {
        let (sum16, sum32) = row_kernels(level, 4).0.sum_rows;
        let (mut narrow, mut wide) = (vec![0u16; 77], vec![0u32; 77]);
        let mut r = 0;
        while r < rows.len() {
            // Two rows at a pass every third call, as a block's row pairs come.
            let two = r % 3 == 1 && r + 1 < rows.len();
            let pair = [&rows[r][..], if two { &rows[r + 1][..] } else { &[] }];
            // SAFETY: the level is available on this CPU.
            unsafe { (sum16(pair, &mut narrow, r == 0), sum32(pair, &mut wide, r == 0)) };
            r += 1 + usize::from(two);
        }
        assert_eq!(wide[0], u32::from(u16::MAX));
        assert_eq!(narrow.iter().map(|&v| u32::from(v)).collect::<Vec<_>>(), wide, "{level:?}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
    /// Every level's two-row decoder reads I420's U and V rows as it reads
    /// NV12's interleaved row and as the scalar decoder does: any width (SIMD
    /// steps and tails), chroma rows longer than needed, 3- and 4-byte
    /// pixels, R, G, B in any order, several colour standards.
    #[test]
    fn pair_decoders_read_i420_planes_as_nv12(
        half_width in 0usize..200,
        spare in 0usize..40,
        seed in proptest::prelude::any::<u64>(),
        colour in 0usize..3,
        bytes in 3usize..=4,
        order in 0usize..3,
    ) {
        use crate::layout::colour::{Colour, Matrix, Range};
        use crate::layout::plan::{Chroma, YuvOut};

        let width = 2 * half_width;
        let mut state = seed | 1;
        let mut random = |n: usize| -> Vec<u8> {
            (0..n).map(|_| { state ^= state << 13; state ^= state >> 7; state ^= state << 17; state as u8 }).collect()
        };
        let (y0, y1, u, v) = (random(width), random(width), random(half_width + spare), random(half_width + spare));
        let uv: Vec<u8> = u.iter().zip(&v).take(half_width).flat_map(|(&u, &v)| [u, v]).collect();
        let colour = [
            Colour::default(),
            Colour { matrix: Matrix::Bt709, range: Range::Full },
            Colour { matrix: Matrix::Bt2020, range: Range::Limited },
        ][colour];
        let pos = [[0, 1, 2], [2, 1, 0], [1, 2, 0]][order];
        let out = YuvOut { pos, pad: (seed >> 8) as u8, bytes, k: colour.coefficients() };
        let mut want = [vec![0u8; width * bytes], vec![0u8; width * bytes]];
        let [w0, w1] = &mut want;
        scalar::nv12_pair([&y0, &y1], Chroma::Interleaved(&uv), [w0, w1], &out);
        for level in SimdLevel::available() {
            let pair = nv12_pair_decoder(level, bytes);
            for chroma in [Chroma::Planar(&u, &v), Chroma::Interleaved(&uv)] {
                let mut got = [vec![0u8; width * bytes], vec![0u8; width * bytes]];
                let [g0, g1] = &mut got;
                // SAFETY: the level is available on this CPU.
                unsafe { pair([&y0, &y1], chroma, [g0, g1], &out) };
                proptest::prop_assert!(got == want, "{:?} {}-byte pixels at {:?}, width {}", level, bytes, pos, width);
            }
        }
    }

    /// The x pass that decodes as it reads an 8-bit 4:2:0 source's planes
    /// (`Resample::yuv_linear`, where a level has one) equals decoding the
    /// whole row by the scalar decoder, then the scalar x pass: NV12 and
    /// I420 chroma, one row and two sharing chroma, both channel orders,
    /// several colour standards, widths with tails, any shrink along x.
    #[test]
    fn fused_yuv_x_pass_equals_decode_then_x_pass(
        half_width in 1usize..300,
        dst_width in 1usize..120,
        seed in proptest::prelude::any::<u64>(),
        colour in 0usize..3,
        swapped in proptest::prelude::any::<bool>(),
        planar in proptest::prelude::any::<bool>(),
        two in proptest::prelude::any::<bool>(),
    ) {
        use crate::layout::colour::{Colour, Matrix, Range};
        use crate::layout::plan::YuvOut;
        use crate::layout::resize::taps::Method;
        use crate::layout::Interpolation;
        use resample::{horizontal_linear_from, Chroma, YuvTaps};

        let width = 2 * half_width;
        let Method::Linear { x, .. } = Method::new(Interpolation::Bilinear, (width, 3), (dst_width, 2)) else {
            return Ok(());
        };
        let mut state = seed | 1;
        let mut bytes = |n: usize| -> Vec<u8> {
            (0..n).map(|_| { state ^= state << 13; state ^= state >> 7; state ^= state << 17; state as u8 }).collect()
        };
        let (y0, y1, uv) = (bytes(width), bytes(width), bytes(width));
        let (u, v): (Vec<u8>, Vec<u8>) = (uv.iter().step_by(2).copied().collect(), uv.iter().skip(1).step_by(2).copied().collect());
        let colour = [
            Colour::default(),
            Colour { matrix: Matrix::Bt709, range: Range::Full },
            Colour { matrix: Matrix::Bt2020, range: Range::Limited },
        ][colour];
        let out = YuvOut { pos: [0, 1, 2], pad: (seed >> 8) as u8, bytes: 4, k: colour.coefficients() };
        let out = if swapped { out.swap_chroma() } else { out };
        let n = dst_width;
        let mut want = [vec![0i16; 4 * n + 4], vec![0i16; 4 * n + 4]];
        let mut decoded = vec![0u8; 4 * width];
        for (row, w) in [&y0, &y1].into_iter().zip(&mut want) {
            scalar::nv12_row(row, &uv, &mut decoded, &out);
            horizontal_linear_from::<4>(0, &decoded, &x, w);
        }
        let chroma = if planar { Chroma::Planar(&u, &v) } else { Chroma::Interleaved(&uv) };
        let taps = YuvTaps::new(x);
        for level in SimdLevel::available() {
            let Some([one, pair]) = row_kernels(level, 4).0.yuv_linear else { continue };
            let mut got = [vec![-1i16; 4 * n], vec![-1i16; 4 * n]];
            let [g0, g1] = &mut got;
            // SAFETY: the level is available on this CPU.
            unsafe {
                if two {
                    pair([&y0, &y1], chroma, &taps, [g0, g1], &out, &[&y1, &uv, &u, &v]);
                } else {
                    one([&y0, &[]], chroma, &taps, [g0, &mut []], &out, &[&y1]);
                    one([&y1, &[]], chroma, &taps, [g1, &mut []], &out, &[]);
                }
            }
            for r in 0..2 {
                proptest::prop_assert_eq!(&got[r][..], &want[r][..4 * n], "{:?} row {} of {}", level, r, width);
            }
        }
        // The portable loop, the SIMD loops' tail, on its own.
        let mut got = [vec![-1i16; 4 * n], vec![-1i16; 4 * n]];
        let [g0, g1] = &mut got;
        resample::yuv_linear_from::<2>(0, [&y0, &y1], chroma, &taps.linear, [g0, g1], &out);
        proptest::prop_assert_eq!(&got[0][..], &want[0][..4 * n]);
        proptest::prop_assert_eq!(&got[1][..], &want[1][..4 * n]);
    }
}

/// Every level's fast two-row decoder (`nv12_fast_pair_decoder`) against
/// the fast reference (`colour::yuv_to_rgb_fast`) for chroma `U` in `us`
/// and every (Y, V), NV12 and I420 chroma, 4- and 3-byte pixels in both
/// channel orders, every colour standard: the rows as in
/// `every_level_decodes_every_input_exactly`.
fn fast_decoders_match_the_reference(us: impl Iterator<Item = u8> + Clone) {
    use crate::layout::colour::{yuv_to_rgb_fast, Fast, STANDARDS};
    use crate::layout::plan::{Chroma, YuvOut};
    const N: usize = 1 << 16;
    let y0: Vec<u8> = (0..N).map(|p| p as u8).collect();
    let y1: Vec<u8> = y0.iter().map(|&y| 255 - y).collect();
    let v_row: Vec<u8> = (0..N / 2).map(|j| (j / 128) as u8).collect();
    for colour in STANDARDS {
        let k = colour.coefficients();
        let f = Fast::of(&k);
        for (bytes, pos) in [(4usize, [0usize, 1, 2]), (4, [2, 1, 0]), (3, [0, 1, 2]), (3, [2, 1, 0])] {
            let out = YuvOut { pos, pad: 0xA5, bytes, k };
            for level in SimdLevel::available().into_iter().filter(|&l| l != SimdLevel::Scalar) {
                let Some((pair, name)) = nv12_fast_pair_decoder(level, bytes) else { continue };
                let (mut d0, mut d1) = (vec![0u8; N * bytes], vec![0u8; N * bytes]);
                for (u, planar) in us.clone().flat_map(|u| [(u, false), (u, true)]) {
                    let uv: Vec<u8> = (0..N / 2).flat_map(|j| [u, (j / 128) as u8]).collect();
                    let u_row = vec![u; N / 2];
                    let chroma = if planar { Chroma::Planar(&u_row, &v_row) } else { Chroma::Interleaved(&uv) };
                    // SAFETY: the level is available on this CPU.
                    unsafe { pair([&y0, &y1], chroma, [&mut d0, &mut d1], &out) };
                    for (y, d) in [(&y0, &d0), (&y1, &d1)] {
                        for (p, px) in d.chunks_exact(bytes).enumerate() {
                            let rgb = yuv_to_rgb_fast(&f, y[p], u, (p / 256) as u8);
                            let mut want = [0u8; 3];
                            for c in 0..3 {
                                want[pos[c]] = rgb[c];
                            }
                            assert!(
                                px[..3] == want && (bytes == 3 || px[3] == 0xA5),
                                "{colour} {name} {pos:?} (I420: {planar}): Y {} U {u} V {} gave {:?}, want {want:?}",
                                y[p],
                                p / 256,
                                &px[..3]
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The fast decoders equal their reference on every (Y, V) for a sample of U.
#[test]
fn every_level_decodes_fast_as_the_fast_reference_sampled() {
    fast_decoders_match_the_reference([37u8, 240].into_iter());
}

/// ... and on all 2^24 inputs (`cargo test --release --lib every_input -- --ignored`).
#[test]
#[ignore = "exhaustive: run with --release -- --ignored"]
fn every_level_decodes_every_input_fast() {
    fast_decoders_match_the_reference(0..=255u8);
}

/// `rounding: Fast` through `convert`: NV12, NV21 and I420 frames of widths
/// with and without SIMD tails at every level equal the scalar level's frame,
/// which is the fast reference per pixel.
#[test]
fn fast_rounding_converts_frames_as_its_reference() {
    use crate::layout::colour::{yuv_to_rgb_fast, Fast, STANDARDS};
    use crate::layout::{convert, Destination, Format, Options, Rounding, Source};
    let bytes = |n: usize, seed: usize| -> Vec<u8> {
        (0..n).map(|i| ((i * 131 + seed * 17) ^ (i >> 3) ^ ((i * i) >> 5)) as u8).collect()
    };
    for (w, h) in [(2usize, 2usize), (30, 4), (64, 4), (66, 6), (96, 2), (130, 2)] {
        let ch = h.div_ceil(2);
        let y = bytes(w * h, w);
        let uv = bytes(w * ch, w + 1);
        let (u, v): (Vec<u8>, Vec<u8>) = uv.chunks_exact(2).map(|p| (p[0], p[1])).unzip();
        let frame = |parts: &[&[u8]]| parts.concat();
        let nv12 = frame(&[&y, &uv]);
        let nv21 = frame(&[&y, &uv.chunks_exact(2).flat_map(|p| [p[1], p[0]]).collect::<Vec<_>>()]);
        let i420 = frame(&[&y, &u, &v]);
        for colour in STANDARDS {
            let f = Fast::of(&colour.coefficients());
            for dst_format in [Format::Rgbx, Format::Bgrx, Format::Rgb, Format::Bgr] {
                let c = dst_format.channels();
                let want: Vec<u8> = (0..w * h)
                    .flat_map(|p| {
                        let (r, x) = (p / w, p % w);
                        let j = (r / 2) * w + (x / 2) * 2;
                        let rgb = yuv_to_rgb_fast(&f, y[p], uv[j], uv[j + 1]);
                        let px = if matches!(dst_format, Format::Bgrx | Format::Bgr) {
                            [rgb[2], rgb[1], rgb[0]]
                        } else {
                            rgb
                        };
                        px.into_iter().chain(std::iter::repeat_n(0, c - 3))
                    })
                    .collect();
                for (src_format, src) in [(Format::Nv12, &nv12), (Format::Nv21, &nv21), (Format::I420, &i420)] {
                    for level in SimdLevel::available() {
                        let options = Options {
                            simd: Some(level),
                            threads: Some(1),
                            colour,
                            rounding: Rounding::Fast,
                            ..Options::default()
                        };
                        let source = Source::new(src_format, src, w, h, None).unwrap();
                        let mut out = vec![0u8; w * h * c];
                        convert(&source, Destination::new(dst_format, &mut out, w, h, None).unwrap(), &options)
                            .unwrap();
                        if cfg!(target_arch = "aarch64") && level != SimdLevel::Scalar {
                            continue; // NEON decodes exactly (no fast decoder)
                        }
                        assert!(out == want, "{colour} {src_format} -> {dst_format} {w}x{h} at {level:?}");
                    }
                }
            }
        }
    }
}

/// The fast rounding is refused, with the reason, where it does not apply.
#[test]
fn fast_rounding_is_refused_where_it_does_not_apply() {
    use crate::layout::{convert, Destination, Format, Options, Rounding, Source};
    let (w, h) = (8usize, 4usize);
    let options = Options { rounding: Rounding::Fast, ..Options::default() };
    let refused = |src_format: Format, dst_format: Format, dst_w: usize, options: &Options| {
        let src = vec![128u8; frame_nbytes(src_format, w, h)];
        let source = Source::new(src_format, &src, w, h, None).unwrap();
        let mut out = vec![0u8; frame_nbytes(dst_format, dst_w, h)];
        let e = convert(&source, Destination::new(dst_format, &mut out, dst_w, h, None).unwrap(), options).unwrap_err();
        assert!(e.message.contains("rounding=\"fast\""), "{src_format} -> {dst_format}: {e}");
    };
    refused(Format::Yuyv, Format::Rgbx, w, &options);
    refused(Format::Bgr, Format::Rgbx, w, &options);
    refused(Format::Nv12, Format::RgbxBf16, w, &options);
    refused(Format::Nv12, Format::Rgbx, w, &Options { mean: Some([1.0; 3]), ..options.clone() });
    refused(Format::Nv12, Format::Rgbx, w / 2, &options); // a resize
    let e = "rough".parse::<Rounding>().unwrap_err();
    assert!(e.message.contains("unknown rounding \"rough\""), "{e}");
}
