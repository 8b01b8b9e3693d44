use super::*;

#[test]
fn fourcc_names_round_trip() {
    assert_eq!(Fourcc::parse("YUYV").unwrap(), Fourcc::YUYV);
    assert_eq!(Fourcc::parse("yuy2").unwrap(), Fourcc::YUYV);
    assert_eq!(Fourcc::parse("I420").unwrap(), Fourcc::I420);
    assert_eq!(Fourcc::I420.name(), "I420");
    assert_eq!(Fourcc::parse("RGB3").unwrap().name(), "RGB3");
    assert_eq!(Fourcc(0x5659_5559).name(), "YUYV");
    // Big-endian twins (v4l2_fourcc_be: bit 31 set) by name, not as a stray byte.
    let y16_be = Fourcc(u32::from_le_bytes(*b"Y16 ") | 1 << 31);
    assert_eq!(y16_be.name(), "Y16-BE");
    assert_eq!(Fourcc::parse("Y16-BE").unwrap(), y16_be);
    assert!(Fourcc::parse("").is_err());
    assert!(Fourcc::parse("TOOLONG").is_err());
}

#[test]
fn frame_sizes_contain() {
    let d = FrameSizes::Discrete(vec![(640, 480), (1280, 720)]);
    assert!(d.contains(640, 480) && !d.contains(640, 360));
    let s = FrameSizes::Stepwise { min: (16, 16), max: (1920, 1080), step: (16, 8) };
    assert!(s.contains(640, 480) && !s.contains(641, 480) && !s.contains(2000, 480));
    assert_eq!(d.to_string(), "640x480, 1280x720");
}

#[test]
fn missing_node_is_not_found() {
    let e = Device::open("/dev/video-npu-zc-missing").unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert!(e.message.contains("/dev/video-npu-zc-missing"), "{}", e.message);
}

#[test]
fn a_file_that_is_not_a_device_is_refused() {
    let e = Device::open("/dev/null").unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotACamera, "{e}");
}

/// V4L2's colour fields to the layout engine's standards, defaults included
/// (`V4L2_MAP_YCBCR_ENC_DEFAULT`, `V4L2_MAP_QUANTIZATION_DEFAULT`).
#[test]
fn yuv_colour_follows_v4l2s_fields_and_defaults() {
    let format = |colorspace, ycbcr_enc, quantization| Format {
        width: 640,
        height: 480,
        fourcc: Fourcc::YUYV,
        bytesperline: 1280,
        sizeimage: 614_400,
        colorspace,
        ycbcr_enc,
        quantization,
    };
    // (colorspace, ycbcr_enc, quantization) -> (matrix, range)
    let cases = [
        ((0, 0, 0), Some(("bt601", "limited"))),   // nothing said: SD
        ((1, 0, 0), Some(("bt601", "limited"))),   // SMPTE170M
        ((3, 0, 0), Some(("bt709", "limited"))),   // REC709
        ((7, 0, 0), Some(("bt601", "full"))),      // JPEG
        ((8, 0, 0), Some(("bt601", "limited"))),   // sRGB: its YUV is 601 limited
        ((10, 0, 0), Some(("bt2020", "limited"))), // BT2020
        ((3, 0, 1), Some(("bt709", "full"))),      // REC709, full range
        ((7, 2, 2), Some(("bt709", "limited"))),   // explicit fields win
        ((8, 5, 0), Some(("bt601", "limited"))),   // sYCC
        ((2, 0, 0), None),                         // SMPTE240M
        ((10, 7, 0), None),                        // BT.2020 constant luminance
    ];
    for ((c, e, q), want) in cases {
        assert_eq!(format(c, e, q).yuv_colour(), want, "colorspace {c}, ycbcr_enc {e}, quantization {q}");
    }
}

#[test]
fn p010_is_a_fourcc_of_its_own_and_a_layout_source() {
    assert_eq!(Fourcc::parse("P010").unwrap(), Fourcc::P010);
    assert_eq!(Fourcc::parse("p010le").unwrap(), Fourcc::P010); // FFmpeg's name
    assert_eq!(Fourcc::P010.name(), "P010");
    assert_eq!(Fourcc::P010.0, 0x3031_3050); // v4l2_fourcc('P', '0', '1', '0')
    let engine = |name: &str| Fourcc::parse(name).unwrap().source_format();
    assert_eq!(engine("P010"), Some("P010"));
    assert_eq!(engine("NV12"), Some("NV12"));
    assert_eq!(engine("I420"), Some("I420"));
    assert_eq!(engine("RGB3"), Some("RGB"));
    assert_eq!(engine("GREY"), Some("GRAY"));
    // Not read by the engine: compressed, 12-bit, tiled 10-bit, OpenCV-only.
    for name in ["MJPG", "P012", "T010", "YVYU", "NM12"] {
        assert_eq!(engine(name), None, "{name}");
    }
    // Its colour standard comes from the negotiated format as for NV12: HDR
    // video says BT.2020 (colorspace 10), full range when quantization is 1.
    let hdr = Format { colorspace: 10, quantization: 1, ..format(Fourcc::P010, 640, 480, 1280) };
    assert_eq!(hdr.yuv_colour(), Some(("bt2020", "full")));
}

fn format(fourcc: Fourcc, width: u32, height: u32, bytesperline: u32) -> Format {
    Format { width, height, fourcc, bytesperline, sizeimage: 0, colorspace: 0, ycbcr_enc: 0, quantization: 0 }
}

/// A frame's view, as `Frame.array()` shows it: shape, byte strides, sample size.
#[test]
fn views_follow_the_format_and_its_pitch() {
    let view = |f: Format| {
        let v = f.view(usize::MAX).unwrap();
        (v.shape, v.strides, v.sample_bytes, v.span)
    };
    // P010: Y rows then UV rows, one 2-D uint16 view at the driver's pitch.
    assert_eq!(view(format(Fourcc::P010, 640, 480, 1280)), (vec![720, 640], vec![1280, 2], 2, 640 * 480 * 3));
    assert_eq!(view(format(Fourcc::P010, 640, 480, 1344)), (vec![720, 640], vec![1344, 2], 2, 1344 * 719 + 1280));
    assert_eq!(view(format(Fourcc::NV12, 640, 480, 704)), (vec![720, 640], vec![704, 1], 1, 704 * 719 + 640));
    assert_eq!(view(format(Fourcc::NV12, 6, 5, 6)).0, vec![8, 6]); // ceil(5 / 2) chroma rows
    assert_eq!(view(format(Fourcc::YUYV, 640, 480, 1280)), (vec![480, 640, 2], vec![1280, 2, 1], 1, 614_400));
    assert_eq!(view(format(Fourcc::I420, 640, 480, 640)), (vec![720, 640], vec![640, 1], 1, 460_800));
    // Padded I420: chroma rows at half the pitch, no single 2-D view: flat bytes.
    let padded = 704 * 480 + 2 * 352 * 240;
    assert_eq!(view(format(Fourcc::I420, 640, 480, 704)), (vec![padded], vec![1], 1, padded));
    // A format without a known layout is its flat bytes, as many as there are.
    let mjpg = format(Fourcc::parse("MJPG").unwrap(), 640, 480, 0);
    assert_eq!(mjpg.view(1234).unwrap().shape, vec![1234]);
}

#[test]
fn a_pitch_or_a_frame_too_short_is_refused_saying_which() {
    let p010 = format(Fourcc::P010, 640, 480, 1280);
    let e = format(Fourcc::P010, 640, 480, 1278).view(usize::MAX).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unsupported);
    assert!(e.message.contains("bytesperline 1278 is shorter than a row (1280 bytes)"), "{}", e.message);
    let e = format(Fourcc::P010, 640, 480, 1281).view(usize::MAX).unwrap_err();
    assert!(e.message.contains("bytesperline 1281 is odd"), "{}", e.message);
    let e = format(Fourcc::NV12, 640, 480, 639).view(usize::MAX).unwrap_err();
    assert!(e.message.contains("shorter than a row (640 bytes)"), "{}", e.message);
    // One byte short of the last UV row: refused; the exact size is fine.
    let e = p010.view(921_599).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unsupported);
    assert!(e.message.starts_with("640x480 P010: the frame holds 921599 bytes"), "{}", e.message);
    assert!(e.message.contains("720 rows at bytesperline 1280 need 921600"), "{}", e.message);
    assert!(p010.view(921_600).is_ok());
    // Absurd driver numbers saturate instead of overflowing.
    assert!(format(Fourcc::P010, 65_536, u32::MAX, u32::MAX - 1).view(usize::MAX - 1).is_err());
}

proptest::proptest! {
    /// For every known layout, the span is exactly the bytes the view
    /// reaches (last sample's end), within the frame: `span` bytes are
    /// accepted, one fewer refused.
    #[test]
    fn a_views_span_is_the_bytes_it_reaches(
        which in 0usize..7, width in 1u32..300, height in 1u32..200, pad in 0u32..130,
    ) {
        let (name, bytes_per_pixel) = [("P010", 2), ("NV12", 1), ("NV21", 1), ("YUYV", 2), ("I420", 1), ("RGB3", 3), ("GREY", 1)][which];
        let pitch = width * bytes_per_pixel + pad * if name == "P010" { 2 } else { 1 };
        let f = format(Fourcc::parse(name).unwrap(), width, height, pitch);
        let v = f.view(usize::MAX).unwrap();
        let last: usize = v.shape.iter().zip(&v.strides).map(|(n, s)| (n - 1) * s).sum();
        proptest::prop_assert_eq!(v.span, last + v.sample_bytes);
        proptest::prop_assert!(f.view(v.span).is_ok());
        proptest::prop_assert!(f.view(v.span - 1).is_err());
    }
}

#[test]
fn every_camera_format_the_engine_reads_is_named_and_a_layout_source() {
    for (camera, engine) in SOURCE_FORMATS {
        let fourcc = Fourcc::parse(camera).unwrap();
        assert_eq!(fourcc.name(), camera, "npu_zc's own name, as Camera.format gives it");
        assert_eq!(fourcc.source_format(), Some(engine));
        let format: crate::layout::Format = engine.parse().unwrap();
        assert!(format.is_source(), "{engine} is not a layout source");
    }
}

#[test]
fn the_memory_policy_refuses_what_cannot_work_before_opening_a_device() {
    use crate::buffer::{self, HeapSpec};
    let invalid = ErrorKind::Buffer(buffer::ErrorKind::InvalidInput);
    let refused = |memory: &str, heap: &str, pool: bool| BufferPlan::choose(memory, heap, pool).unwrap_err();
    assert_eq!(refused("mmap", "auto", true).kind, invalid);
    assert_eq!(refused("dmabuf", "memfd", false).kind, invalid);
    let unknown = refused("mapped", "auto", false);
    assert_eq!(unknown.kind, invalid);
    assert!(unknown.message.contains("\"mapped\""), "{}", unknown.message);
    // A bad heap name is the buffer core's own error, kept as it was.
    let bad_heap = refused("dmabuf", "a/b", false);
    assert_eq!((bad_heap.kind, bad_heap.message.as_str()), (invalid, "heap name \"a/b\" contains '/'"));

    assert_eq!(BufferPlan::choose("mmap", "auto", false).unwrap(), BufferPlan::Driver);
    assert_eq!(BufferPlan::choose("auto", "auto", true).unwrap(), BufferPlan::Caller);
    let named = HeapSpec::DmaHeap("system".into());
    assert_eq!(
        BufferPlan::choose("dmabuf", "system", false).unwrap(),
        BufferPlan::Heap { spec: named.clone(), fallback: false }
    );
    // "auto" falls back to the driver's buffers when the driver refuses ours.
    assert_eq!(BufferPlan::choose("auto", "system", false).unwrap(), BufferPlan::Heap { spec: named, fallback: true });
    // memfd is no DMA-BUF: "auto" takes the first usable heap instead, or the driver's buffers.
    match (BufferPlan::choose("auto", "memfd", false).unwrap(), auto_heap()) {
        (BufferPlan::Heap { spec, fallback: true }, Some(auto)) => assert_eq!(spec, auto),
        (BufferPlan::Driver, None) => {}
        (plan, auto) => panic!("memory=auto, heap=memfd chose {plan:?} with auto_heap() {auto:?}"),
    }
    match BufferPlan::choose("dmabuf", "auto", false) {
        Ok(BufferPlan::Heap { spec, fallback: false }) => assert_eq!(Some(spec), auto_heap()),
        Err(e) => assert!(e.kind == ErrorKind::Unsupported && auto_heap().is_none(), "{e:?}"),
        Ok(plan) => panic!("memory=dmabuf chose {plan:?}"),
    }
}
