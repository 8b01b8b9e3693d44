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
