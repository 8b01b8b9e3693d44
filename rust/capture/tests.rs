use super::*;

#[test]
fn fourcc_names_round_trip() {
    assert_eq!(Fourcc::parse("YUYV").unwrap(), Fourcc::YUYV);
    assert_eq!(Fourcc::parse("yuy2").unwrap(), Fourcc::YUYV);
    assert_eq!(Fourcc::parse("I420").unwrap(), Fourcc::I420);
    assert_eq!(Fourcc::I420.name(), "I420");
    assert_eq!(Fourcc::parse("RGB3").unwrap().name(), "RGB3");
    assert_eq!(Fourcc(0x5659_5559).name(), "YUYV");
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
