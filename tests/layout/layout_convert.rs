//! `convert` against a naive per-pixel reference written here from the
//! definitions (BT.601 as OpenCV computes it, `(x - mean) / scale` in f32,
//! round to nearest even), for every source x destination pair, every SIMD
//! level this CPU has, random sizes, pitches and parameters.

use npu_zc::layout::*;
use proptest::prelude::*;

fn rgb_at(format: Format, src: &[u8], pitch: usize, uv: &[u8], w: usize, x: usize, y: usize) -> [u8; 3] {
    match format {
        Format::Gray => [src[y * pitch + x]; 3],
        Format::Nv12 | Format::Nv21 => {
            let yy = src[y * pitch + x] as i64;
            let first = uv[(y / 2) * pitch + (x / 2) * 2] as i64 - 128;
            let second = uv[(y / 2) * pitch + (x / 2) * 2 + 1] as i64 - 128;
            // NV21: V before U.
            let (u, v) = if format == Format::Nv21 { (second, first) } else { (first, second) };
            let luma = (yy - 16).max(0) * 1_220_542;
            let half = 1 << 19;
            let f = |t: i64| ((luma + half + t) >> 20).clamp(0, 255) as u8;
            let _ = w;
            [f(1_673_527 * v), f(-852_492 * v - 409_993 * u), f(2_116_026 * u)]
        }
        _ => {
            let c = format.channels();
            let px = &src[y * pitch + x * c..];
            let (r, b) = match format {
                Format::Bgr | Format::Bgra | Format::Bgrx => (px[2], px[0]),
                _ => (px[0], px[2]),
            };
            [r, px[1], b]
        }
    }
}

/// One destination value from a u8 input, as numpy would compute it (int8:
/// as ONNX QuantizeLinear does, with the quantisation scale and zero point).
fn value(element: Element, x: u8, mean: f32, scale: f32, quant: Option<(f32, i32)>) -> Vec<u8> {
    let v = (x as f32 - mean) / scale;
    match element {
        Element::U8 => vec![v.round_ties_even().clamp(0.0, 255.0) as u8],
        Element::I8 => {
            let (q, zero_point) = quant.unwrap();
            vec![((v / q).round_ties_even() + zero_point as f32).clamp(-128.0, 127.0) as i8 as u8]
        }
        Element::Bf16 => f32_to_bf16(v).to_ne_bytes().to_vec(),
        Element::F16 => half::f16::from_f32(v).to_bits().to_ne_bytes().to_vec(),
        Element::F32 => v.to_ne_bytes().to_vec(),
    }
}

fn pad_value(element: Element, pad: f32) -> Vec<u8> {
    match element {
        Element::U8 => vec![pad as u8],
        Element::I8 => vec![pad as i8 as u8],
        Element::Bf16 => f32_to_bf16(pad).to_ne_bytes().to_vec(),
        Element::F16 => half::f16::from_f32(pad).to_bits().to_ne_bytes().to_vec(),
        Element::F32 => pad.to_ne_bytes().to_vec(),
    }
}

#[derive(Debug, Clone)]
struct Case {
    src: Format,
    dst: Format,
    width: usize,
    height: usize,
    src_extra: usize,
    dst_extra: usize,
    mean: Option<[f32; 3]>,
    scale: Option<[f32; 3]>,
    pad: f32,
    quant: Option<(f32, i32)>,
    seed: u64,
    threads: usize,
}

fn case() -> impl Strategy<Value = Case> {
    let formats = (
        prop::sample::select(table_sources().collect::<Vec<_>>()),
        prop::sample::select(Format::destinations().collect::<Vec<_>>()),
    );
    let norm = prop_oneof![
        Just((None, None)),
        (prop::array::uniform3(-300f32..300.0), prop::array::uniform3(prop_oneof![0.001f32..500.0, -500f32..-0.001]))
            .prop_map(|(m, s)| (Some(m), Some(s))),
        Just((Some([123.675, 116.28, 103.53]), Some([58.395, 57.12, 57.375]))),
        Just((Some([127.5; 3]), Some([127.5; 3]))),
    ];
    let quant = (prop_oneof![0.001f32..0.1, 0.1f32..4.0], -128i32..128);
    (formats, 1usize..70, 1usize..9, 0usize..9, 0usize..40, norm, 0u32..4, any::<u64>(), 1usize..4, quant).prop_map(
        |((src, dst), w, h, src_extra, dst_extra, (mean, scale), pad, seed, threads, quant)| {
            let even = |n: usize| if matches!(src, Format::Nv12 | Format::Nv21) { (n + 1) & !1 } else { n };
            let pad = match (dst.has_pad(), dst.element()) {
                (false, _) => 0.0,
                (true, Element::U8) => [0.0, 255.0, 7.0, 128.0][pad as usize],
                (true, Element::I8) => [0.0, -128.0, 7.0, 127.0][pad as usize],
                (true, _) => [0.0, 1.0, -2.5, 1e-3][pad as usize],
            };
            let quant = if dst.element() == Element::I8 { Some(quant) } else { None };
            Case {
                src,
                dst,
                width: even(w),
                height: even(h),
                src_extra,
                dst_extra,
                mean,
                scale,
                pad,
                quant,
                seed,
                threads,
            }
        },
    )
}

fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

fn check(case: &Case, level: SimdLevel) -> std::result::Result<(), TestCaseError> {
    let (w, h) = (case.width, case.height);
    let src_geometry = frame_geometry(case.src, w, h, None).unwrap();
    let src_pitch = src_geometry.row_bytes + case.src_extra;
    let src = noise(src_geometry.rows * src_pitch, case.seed);
    let element = case.dst.element();
    let g = frame_geometry(case.dst, w, h, None).unwrap();
    let dst_pitch = g.row_bytes + case.dst_extra * element.size();
    let g = frame_geometry(case.dst, w, h, Some(dst_pitch)).unwrap();
    const UNTOUCHED: u8 = 0xA5;
    let mut dst = vec![UNTOUCHED; g.nbytes()];

    let source = Source::new(case.src, &src, w, h, Some(src_pitch)).unwrap();
    let destination = Destination::new(case.dst, &mut dst, w, h, Some(dst_pitch)).unwrap();
    let options = Options {
        mean: case.mean,
        scale: case.scale,
        pad: case.pad,
        threads: Some(case.threads),
        simd: Some(level),
        quant: case.quant,
        ..Options::default()
    };
    convert(&source, destination, &options).unwrap();

    let mean = case.mean.unwrap_or([0.0; 3]);
    let scale = case.scale.unwrap_or([1.0; 3]);
    let size = element.size();
    let bgr_order = case.dst.channel_order()[0] == Channel::B;
    let dst_channels = case.dst.channels();
    let uv = &src[h * src_pitch..];
    // The expected bytes of each channel for each u8 input, from the definition.
    let table: Vec<Vec<Vec<u8>>> =
        (0..3).map(|k| (0..=255u8).map(|x| value(element, x, mean[k], scale[k], case.quant)).collect()).collect();
    for y in 0..h {
        for x in 0..w {
            let [r, gg, b] = rgb_at(case.src, &src, src_pitch, uv, w, x, y);
            let channels = if bgr_order { [b, gg, r] } else { [r, gg, b] };
            for k in 0..3 {
                let want = &table[k][channels[k] as usize];
                let at = if case.dst.is_planar() {
                    k * g.plane_pitch() + y * dst_pitch + x * size
                } else {
                    y * dst_pitch + (dst_channels * x + k) * size
                };
                prop_assert_eq!(
                    &dst[at..at + size],
                    &want[..],
                    "{:?} {} pixel ({}, {}) channel {}",
                    case,
                    level,
                    x,
                    y,
                    k
                );
            }
            if case.dst.has_pad() {
                let at = y * dst_pitch + (4 * x + 3) * size;
                prop_assert_eq!(&dst[at..at + size], &pad_value(element, case.pad)[..], "pad {:?}", case);
            }
        }
    }
    // The bytes between rows (the pitch padding) are never written.
    for plane in 0..g.planes {
        for y in 0..h {
            let start = plane * g.plane_pitch() + y * dst_pitch + g.row_bytes;
            prop_assert!(
                dst[start..start + dst_pitch - g.row_bytes].iter().all(|&b| b == UNTOUCHED),
                "padding written {:?}",
                case
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn every_pair_matches_the_reference(case in case()) {
        for level in SimdLevel::available() {
            check(&case, level)?;
        }
    }
}

/// Rows wide enough for every vector loop, with tails.
#[test]
fn wide_rows_match_on_every_level() {
    for src in table_sources() {
        for dst in Format::destinations() {
            let case = Case {
                src,
                dst,
                width: 1922,
                height: 4,
                src_extra: 3,
                dst_extra: 5,
                mean: Some([123.675, 116.28, 103.53]),
                scale: Some([58.395, 57.12, 57.375]),
                pad: match (dst.has_pad(), dst.element()) {
                    (false, _) => 0.0,
                    (true, Element::U8 | Element::I8) => 9.0,
                    (true, _) => 0.5,
                },
                quant: if dst.element() == Element::I8 { Some((0.0187, -3)) } else { None },
                seed: 7,
                threads: 3,
            };
            for level in SimdLevel::available() {
                check(&case, level).unwrap();
                check(&Case { mean: None, scale: None, ..case.clone() }, level).unwrap();
            }
        }
    }
}

/// Frames split across threads (row bands, even for NV12's shared chroma
/// rows, several a thread) come out exactly as on one thread.
#[test]
fn bands_on_several_threads_match_one_thread() {
    let (w, h) = (1922, 202);
    for (src_format, dst_format) in
        [(Format::Bgr, Format::RgbpFloat), (Format::Nv12, Format::RgbxBf16), (Format::Rgba, Format::Rgbx)]
    {
        let src = noise(frame_nbytes(src_format, w, h, None).unwrap(), 3);
        for level in SimdLevel::available() {
            let run = |threads: usize| {
                let mut dst = vec![0u8; frame_nbytes(dst_format, w, h, None).unwrap()];
                let options = Options {
                    mean: Some([1.0, 2.0, 3.0]),
                    scale: Some([4.0, 5.0, 6.0]),
                    threads: Some(threads),
                    simd: Some(level),
                    ..Options::default()
                };
                let options =
                    if dst_format == Format::Rgbx { Options { mean: None, scale: None, ..options } } else { options };
                let source = Source::new(src_format, &src, w, h, None).unwrap();
                convert(&source, Destination::new(dst_format, &mut dst, w, h, None).unwrap(), &options).unwrap();
                dst
            };
            let one = run(1);
            // Several bands a thread, of a few rows each (even for NV12);
            // 16 is capped by the frame's size.
            for threads in [3, 16] {
                assert!(one == run(threads), "{src_format}->{dst_format} at {level} on {threads} threads");
            }
        }
    }
}

/// SIMD levels really run SIMD kernels for the hot cases (so the comparisons
/// above test something), and fall back to the tables only where they must.
#[test]
fn simd_levels_pick_simd_kernels() {
    let imagenet =
        Options { mean: Some([123.675, 116.28, 103.53]), scale: Some([58.395, 57.12, 57.375]), ..Options::default() };
    for level in SimdLevel::available() {
        let options = Options { simd: Some(level), ..imagenet.clone() };
        let pairs = [
            (Format::Bgr, Format::RgbxBf16),
            (Format::Bgr, Format::RgbpFloat),
            (Format::Rgba, Format::RgbxFp16),
            (Format::Bgr, Format::RgbpFp16),
            (Format::Nv12, Format::RgbxBf16),
        ];
        for (src, dst) in pairs {
            let name = describe(src, dst, &options).unwrap();
            if level == SimdLevel::Scalar {
                assert!(name.contains("scalar"), "{name}");
            } else {
                assert!(name.contains(level.name()) && !name.contains("lut"), "{src}->{dst} at {level}: {name}");
            }
        }
        let plain = Options { simd: Some(level), ..Options::default() };
        let name = describe(Format::Bgr, Format::Rgbx, &plain).unwrap();
        assert!(level == SimdLevel::Scalar || name.contains(level.name()), "{name}");
        let normalised_u8 =
            describe(Format::Bgr, Format::Rgbx, &Options { simd: Some(level), ..imagenet.clone() }).unwrap();
        assert!(normalised_u8.contains("lut"), "{normalised_u8}");
    }
}

/// IEEE half destinations (packed RGBx_FP16, planar RGBP_FP16 and
/// BGRP_FP16) from every source format run a SIMD kernel on every SIMD level
/// (NEON's FCVTN kernels on aarch64, F16C on x86_64) and match the reference,
/// at widths around the 16-pixel step (tails of every length class) and with
/// assorted parameters: ImageNet's, none, 127.5, negative and tiny scales.
#[test]
fn half_destinations_use_simd_kernels_and_match() {
    let norms = [
        (Some([123.675, 116.28, 103.53]), Some([58.395, 57.12, 57.375])),
        (None, None),
        (Some([127.5; 3]), Some([127.5; 3])),
        (Some([-3.25, 200.5, 17.0]), Some([0.013, -250.0, 3.5])),
    ];
    let destinations = [Format::RgbxFp16, Format::RgbpFp16, Format::BgrpFp16];
    for level in SimdLevel::available().into_iter().filter(|&l| l != SimdLevel::Scalar) {
        for src in table_sources() {
            for dst in destinations {
                for (n, &(mean, scale)) in norms.iter().enumerate() {
                    let pad = if dst.has_pad() { [0.0, 1.0, -2.5, 1e-3][n] } else { 0.0 };
                    let options = Options { mean, scale, pad, simd: Some(level), ..Options::default() };
                    let name = describe(src, dst, &options).unwrap();
                    assert!(
                        name.contains(&format!("{level}/")) && name.contains("f16/") && !name.contains("lut"),
                        "{src}->{dst} at {level}, mean {mean:?} scale {scale:?}: {name}"
                    );
                    if level == SimdLevel::Neon && n == 0 {
                        // ImageNet's parameters take the fused multiply-add kernels.
                        let want = if dst.is_planar() { "neon/planar-f16/fma" } else { "neon/f16/fma" };
                        assert!(name.ends_with(want), "{src}->{dst}: {name}");
                    }
                    for width in [2, 14, 16, 18, 30, 34, 46, 50] {
                        // Odd widths too, but for NV12 (whose width is even).
                        for width in [width, width + 1]
                            .into_iter()
                            .filter(|w| !matches!(src, Format::Nv12 | Format::Nv21) || w % 2 == 0)
                        {
                            let case = Case {
                                src,
                                dst,
                                width,
                                height: 2,
                                src_extra: width % 3,
                                dst_extra: 1,
                                mean,
                                scale,
                                pad,
                                quant: None,
                                seed: width as u64 + 11 * n as u64,
                                threads: 1,
                            };
                            check(&case, level).unwrap();
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn bad_arguments_are_refused_before_writing() {
    let src = vec![1u8; 4 * 3 * 3];
    let mut dst = vec![0xEEu8; 4 * 3 * 4];
    let source = Source::new(Format::Bgr, &src, 4, 3, None).unwrap();
    let err = |options: Options| {
        let mut copy = dst.clone();
        let destination = Destination::new(Format::Rgbx, &mut copy, 4, 3, None).unwrap();
        let e = convert(&source, destination, &options).unwrap_err();
        assert!(copy.iter().all(|&b| b == 0xEE), "written despite {e}");
        e.message
    };
    assert!(err(Options { scale: Some([1.0, 0.0, 1.0]), ..Default::default() }).contains("scale[1] is 0"));
    assert!(err(Options { mean: Some([f32::NAN, 0.0, 0.0]), ..Default::default() }).contains("finite"));
    assert!(err(Options { pad: 256.0, ..Default::default() }).contains("0 to 255"));
    assert!(err(Options { threads: Some(0), ..Default::default() }).contains("threads"));
    assert!(Destination::new(Format::Rgbx, &mut dst[1..], 4, 3, None).unwrap_err().message.contains("takes 48 bytes"));
    assert!(Destination::new(Format::Gray, &mut dst, 4, 4, None).unwrap_err().message.contains("not a destination"));
    let mut three = vec![0u8; 4 * 3 * 3];
    let bgr = Destination::new(Format::Bgr, &mut three, 4, 3, None).unwrap();
    assert!(convert(&source, bgr, &Options { pad: 1.0, ..Default::default() })
        .unwrap_err()
        .message
        .contains("no pad channel"));
    assert!(Source::new(Format::Bgr, &src[1..], 4, 3, None).unwrap_err().message.contains("too few"));
    assert!(Source::new(Format::Nv12, &src, 3, 2, None).unwrap_err().message.contains("even"));
    // Another destination size resizes; a bad geometry is refused before anything is written.
    let mut other = vec![0u8; 5 * 3 * 4];
    let t =
        convert(&source, Destination::new(Format::Rgbx, &mut other, 5, 3, None).unwrap(), &Options::default()).unwrap();
    assert_eq!((t.scale, t.content), ([5.0 / 4.0, 1.0], Rect::new(0, 0, 5, 3)));
    other.fill(7);
    let outside =
        Options { resize: Resize { roi: Some(Rect::new(2, 0, 3, 3)), ..Resize::default() }, ..Options::default() };
    let e = convert(&source, Destination::new(Format::Rgbx, &mut other, 5, 3, None).unwrap(), &outside).unwrap_err();
    assert!(e.message.contains("inside the frame") && other.iter().all(|&b| b == 7), "{e}");
}

/// The sources this file's reference covers; the camera formats (YUYV, UYVY,
/// I420) are checked against NV12 in rust/layout/kernels/tests.rs and against
/// OpenCV in tests/layout/test_layout_yuv.py.
fn table_sources() -> impl Iterator<Item = Format> {
    Format::sources().filter(|f| !matches!(f, Format::Yuyv | Format::Uyvy | Format::I420 | Format::P010 | Format::I010))
}
