"""10-bit YUV sources: P010 (NV12's layout in little-endian u16, the value in
the top 10 bits: HEVC Main10 decoders, VA-API, FFmpeg's ``p010le``) and I010
(I420's layout, the value in the low 10 bits: FFmpeg's ``yuv420p10le``), on
every code path this CPU has.

The reference, written once here (docs/layout.md, "10-bit sources"): the
standard's matrix from its luma weights Kr, Kb in float64, scaled for 10-bit
samples (limited range: luma 255/876 with Y offset 64, chroma 255/896; full
range: 255/1023 both), each coefficient rounded to the nearest 2^-20; then
``((Y - offset) * cy + 2^19 + c * (U - 512) + ...) >> 20`` saturated to a
byte. The engine equals it exactly; it is within 1 level of the matrix in
float; FFmpeg's swscale is measured against both.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import npu_zc
from npu_zc import layout
from npu_zc.errors import InvalidArgumentError

LEVELS, _ = layout.simd_levels()
MATRICES = ("bt601", "bt709", "bt2020")
RANGES = ("limited", "full")
STANDARDS = [(m, r) for m in MATRICES for r in RANGES]
WEIGHTS = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722), "bt2020": (0.2627, 0.0593)}
FFMPEG_SPACES = {"bt601": "ITU601", "bt709": "ITU709", "bt2020": "BT2020"}


def float_matrix(matrix: str, range_: str) -> tuple[int, float, float, float, float, float]:
    """(Y offset, cy, cvr, cvg, cug, cub) of the standard for 10-bit samples, in float."""
    kr, kb = WEIGHTS[matrix]
    kg = 1 - kr - kb
    luma, chroma, offset = (255 / 876, 255 / 896, 64) if range_ == "limited" else (255 / 1023, 255 / 1023, 0)
    return (
        offset,
        luma,
        2 * (1 - kr) * chroma,
        -2 * kr * (1 - kr) / kg * chroma,
        -2 * kb * (1 - kb) / kg * chroma,
        2 * (1 - kb) * chroma,
    )


def decode(y: np.ndarray, u: np.ndarray, v: np.ndarray, matrix: str, range_: str) -> np.ndarray:
    """(H, W, 3) RGB of full-size 10-bit Y, U, V planes: the documented reference."""
    offset, *c = float_matrix(matrix, range_)
    cy, cvr, cvg, cug, cub = (int(np.floor(x * (1 << 20) + 0.5)) for x in c)
    yy = (y.astype(np.int64) - offset) * cy + (1 << 19)
    uu, vv = u.astype(np.int64) - 512, v.astype(np.int64) - 512
    rgb = [(yy + t) >> 20 for t in (cvr * vv, cvg * vv + cug * uu, cub * uu)]
    return np.clip(np.stack(rgb, axis=-1), 0, 255).astype(np.uint8)


def decode_float(y: np.ndarray, u: np.ndarray, v: np.ndarray, matrix: str, range_: str) -> np.ndarray:
    """The standard's matrix in float64, rounded to nearest once."""
    offset, cy, cvr, cvg, cug, cub = float_matrix(matrix, range_)
    yy, uu, vv = (y.astype(float) - offset) * cy, u.astype(float) - 512, v.astype(float) - 512
    rgb = [yy + cvr * vv, yy + cvg * vv + cug * uu, yy + cub * uu]
    return np.clip(np.floor(np.stack(rgb, axis=-1) + 0.5), 0, 255).astype(np.uint8)


def full_size(c: np.ndarray) -> np.ndarray:
    return np.repeat(np.repeat(c, 2, axis=0), 2, axis=1)


def words(rng: np.random.Generator, width: int, height: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random Y, U, V words (all 16 bits random: the bits outside a sample are ignored)."""
    y = rng.integers(0, 1 << 16, (height, width), dtype=np.uint16)
    u = rng.integers(0, 1 << 16, (height // 2, width // 2), dtype=np.uint16)
    v = rng.integers(0, 1 << 16, (height // 2, width // 2), dtype=np.uint16)
    return y, u, v


def p010(y: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """One P010 buffer (H * 3 / 2, W) of uint16."""
    uv = np.stack([u, v], axis=-1).reshape(u.shape[0], -1)
    return np.concatenate([y, uv])


def i010(y: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """One I010 buffer (H * 3 / 2, W) of uint16: Y, then U, then V."""
    width = y.shape[1]
    return np.concatenate([y, u.reshape(-1, width), v.reshape(-1, width)])


def sample(fmt: str, w: np.ndarray) -> np.ndarray:
    return (w >> 6) if fmt == "P010" else (w & 0x3FF)


def empty(fmt: str, width: int, height: int) -> np.ndarray:
    return np.zeros((height, width, 3 if fmt in ("RGB", "BGR") else 4), np.uint8)


@pytest.mark.parametrize("matrix,range_", STANDARDS)
def test_reference_is_the_standard_within_one_level(matrix: str, range_: str) -> None:
    """Every 10-bit Y with many U, V: the fixed point is within 1 of the float matrix."""
    rng = np.random.default_rng(5)
    y = np.tile(np.arange(1024), 64)
    u, v = rng.integers(0, 1024, y.size), rng.integers(0, 1024, y.size)
    diff = decode(y, u, v, matrix, range_).astype(int) - decode_float(y, u, v, matrix, range_).astype(int)
    assert np.abs(diff).max() <= 1


@pytest.mark.parametrize("fmt", ["P010", "I010"])
@pytest.mark.parametrize("matrix,range_", STANDARDS)
def test_every_level_and_layout_equals_the_reference(fmt: str, matrix: str, range_: str) -> None:
    """One buffer and planes, every SIMD level, every u8 destination, rows
    longer than a vector step with odd tails, random bits outside the sample."""
    width, height = 70, 8
    y, u, v = words(np.random.default_rng(11), width, height)
    want = decode(sample(fmt, y), full_size(sample(fmt, u)), full_size(sample(fmt, v)), matrix, range_)
    uv = np.stack([u, v], axis=-1).reshape(height // 2, -1)
    sources = [p010(y, u, v), (y, uv)] if fmt == "P010" else [i010(y, u, v), (y, u, v)]
    for simd in LEVELS:
        for src in sources:
            for dst_fmt, order in (("RGB", [0, 1, 2]), ("BGR", [2, 1, 0]), ("RGBx", [0, 1, 2]), ("BGRx", [2, 1, 0])):
                out = layout.convert(src, empty(dst_fmt, width, height), fmt, dst_fmt, matrix=matrix, range=range_, simd=simd)
                np.testing.assert_array_equal(out[..., :3], want[..., order], err_msg=f"{fmt} {simd} -> {dst_fmt}")


@pytest.mark.parametrize("fmt", ["P010", "I010"])
def test_float_destinations_and_resizing_read_the_decoded_pixels(fmt: str) -> None:
    """Into float layouts and through a resize, a 10-bit frame gives what its
    8-bit RGB decoding gives through the RGB path (docs: decoded to u8 first)."""
    width, height = 64, 40
    y, u, v = words(np.random.default_rng(3), width, height)
    rgb = decode(sample(fmt, y), full_size(sample(fmt, u)), full_size(sample(fmt, v)), "bt709", "limited")
    src = p010(y, u, v) if fmt == "P010" else i010(y, u, v)
    norm = dict(mean=(123.675, 116.28, 103.53), scale=(58.395, 57.12, 57.375), matrix="bt709")
    for simd in LEVELS:
        for dst_fmt, dtype, shape in (("RGBP_FLOAT", np.float32, (3, height, width)), ("RGBx_FP16", np.float16, (height, width, 4))):
            got = layout.convert(src, np.zeros(shape, dtype), fmt, dst_fmt, simd=simd, **norm)  # type: ignore[arg-type]
            want = layout.convert(rgb, np.zeros(shape, dtype), "RGB", dst_fmt, simd=simd, mean=norm["mean"], scale=norm["scale"])
            np.testing.assert_array_equal(got, want, err_msg=f"{fmt} {simd} -> {dst_fmt}")
        got_rgbx = np.zeros((24, 32, 4), np.uint8)
        want_rgbx = np.zeros((24, 32, 4), np.uint8)
        t = layout.convert(src, got_rgbx, fmt, "RGBx", simd=simd, matrix="bt709", fit="letterbox", fill=114)
        layout.convert(rgb, want_rgbx, "RGB", "RGBx", simd=simd, fit="letterbox", fill=114)
        np.testing.assert_array_equal(got_rgbx, want_rgbx, err_msg=f"{fmt} {simd} letterbox")
        assert t.scale == pytest.approx((0.5, 0.5))


@pytest.mark.parametrize("fmt", ["P010", "I010"])
@pytest.mark.parametrize("matrix,range_", STANDARDS)
def test_ffmpegs_swscale(fmt: str, matrix: str, range_: str) -> None:
    """FFmpeg's swscale (PyAV ``reformat`` of a ``p010le`` / ``yuv420p10le``
    frame to rgb24, point sampling so that chroma is not interpolated) decodes
    10-bit samples within 4 levels of the engine (limited; 3 full): its
    10-bit path keeps fewer bits and truncates, about 1 level low on
    average, where the engine is within 1 of the float matrix and unbiased
    (docs/layout.md). Samples in the nominal range only."""
    av = pytest.importorskip("av", reason="PyAV is not installed")
    width, height = 64, 32
    rng = np.random.default_rng(29)
    lo, hi, c_hi = (64, 940, 960) if range_ == "limited" else (0, 1023, 1023)
    y = rng.integers(lo, hi + 1, (height, width), dtype=np.uint16)
    u = rng.integers(lo, c_hi + 1, (height // 2, width // 2), dtype=np.uint16)
    v = rng.integers(lo, c_hi + 1, (height // 2, width // 2), dtype=np.uint16)
    if fmt == "P010":
        src = p010(y << 6, u << 6, v << 6)
        frame = av.VideoFrame(width, height, "p010le")
        planes = [src[:height], src[height:]]
    else:
        src = i010(y, u, v)
        frame = av.VideoFrame(width, height, "yuv420p10le")
        planes = [y, u, v]
    for plane, data in zip(frame.planes, planes):
        rows = np.frombuffer(plane, np.uint8).reshape(-1, plane.line_size)
        rows[: data.shape[0], : data.nbytes // data.shape[0]] = data.view(np.uint8)
    theirs = frame.reformat(
        format="rgb24",
        src_colorspace=FFMPEG_SPACES[matrix],
        src_color_range="JPEG" if range_ == "full" else "MPEG",
        dst_color_range="JPEG",
        interpolation="POINT",
    ).to_ndarray().astype(int)
    ours = layout.convert(src, empty("RGB", width, height), fmt, "RGB", matrix=matrix, range=range_).astype(int)
    exact = decode_float(y, full_size(u), full_size(v), matrix, range_).astype(int)
    assert np.abs(ours - theirs).max() <= (4 if range_ == "limited" else 3), f"{matrix} {range_}"
    ours_off, theirs_off = np.abs(ours - exact), np.abs(theirs - exact)
    assert ours_off.max() <= 1
    assert ours_off.mean() < theirs_off.mean(), f"{matrix} {range_}: {ours_off.mean():.3f} vs swscale's {theirs_off.mean():.3f}"


def test_planes_with_their_own_strides_and_the_converter() -> None:
    """A decoder's planes, each row-padded (views into larger arrays), decode
    as the packed frame; a Converter takes them frame after frame."""
    width, height = 66, 12
    y, u, v = words(np.random.default_rng(23), width, height)
    for fmt, packed in (("P010", p010(y, u, v)), ("I010", i010(y, u, v))):
        want = layout.convert(packed, empty("RGB", width, height), fmt, "RGB", matrix="bt2020")
        if fmt == "P010":
            planes: list[np.ndarray] = [y, np.stack([u, v], axis=-1).reshape(height // 2, -1)]
        else:
            planes = [y, u, v]
        padded = [np.full((p.shape[0], p.shape[1] + 6), 0xEEEE, np.uint16) for p in planes]
        for big, p in zip(padded, planes):
            big[:, : p.shape[1]] = p
        views = tuple(big[:, : p.shape[1]] for big, p in zip(padded, planes))
        got = layout.convert(views, empty("RGB", width, height), fmt, "RGB", matrix="bt2020")
        np.testing.assert_array_equal(got, want, err_msg=fmt)
        to_rgb = npu_zc.Converter(fmt, "RGB", width, height, matrix="bt2020", threads=1)
        for _ in range(3):
            np.testing.assert_array_equal(to_rgb(views, empty("RGB", width, height)), want, err_msg=f"{fmt} Converter")
        np.testing.assert_array_equal(to_rgb(packed, empty("RGB", width, height)), want, err_msg=f"{fmt} Converter")


@pytest.mark.parametrize(
    "make,words_",
    [
        (lambda: (np.zeros((8, 6), np.uint16), "P010", {}), "multiple of 3"),
        (lambda: (np.zeros((6, 5), np.uint16), "P010", {}), "must be even"),
        (lambda: (np.zeros((6, 4), np.uint8), "P010", {}), "frames are uint16"),
        (lambda: ((np.zeros((4, 4), np.uint16), np.zeros((2, 4), np.uint8)), "P010", {}), "frames are uint16"),
        (lambda: ((np.zeros((4, 4), np.uint16), np.zeros((2, 2), np.uint16), np.zeros((1, 2), np.uint16)), "I010", {}), "V plane"),
        (lambda: (np.zeros(49, np.uint8)[1:], "P010", {"size": (4, 4)}), "odd byte address"),
        (lambda: (np.zeros(47, np.uint8), "P010", {"size": (4, 4)}), "too few"),
        (lambda: (np.zeros(200, np.uint8), "P010", {"size": (4, 4), "src_stride": 9}), "odd"),
        (lambda: (np.zeros(200, np.uint8), "I010", {"size": (4, 4), "src_stride": 10}), "not supported here"),
    ],
)
def test_bad_frames_are_refused_and_nothing_is_written(make: Any, words_: str) -> None:
    src, fmt, kwargs = make()
    out = np.full((4, 4, 3), 7, np.uint8)
    with pytest.raises(InvalidArgumentError, match=words_):
        layout.convert(src, out, fmt, "RGB", **kwargs)
    assert (out == 7).all()


def test_ffmpeg_names_and_the_kernels() -> None:
    """FFmpeg's names are accepted; the plan names its 10-bit decoder."""
    width, height = 8, 4
    y, u, v = words(np.random.default_rng(2), width, height)
    a = layout.convert(p010(y, u, v), empty("RGB", width, height), "p010le", "RGB")
    b = layout.convert(i010(y, u, v), empty("RGB", width, height), "yuv420p10le", "RGB")
    np.testing.assert_array_equal(a, decode(y >> 6, full_size(u >> 6), full_size(v >> 6), "bt601", "limited"))
    np.testing.assert_array_equal(b, decode(y & 1023, full_size(u & 1023), full_size(v & 1023), "bt601", "limited"))
    for simd in LEVELS:
        assert "p010" in layout.describe_conversion("P010", "RGBx", simd=simd)
        assert "i010" in layout.describe_conversion("I010", "RGB", simd=simd)


def test_a_ten_bit_video_is_read_in_place() -> None:
    """A 10-bit video (FFV1 yuv420p10le, made here) comes out of a
    VideoSource as I010 planes of the decoder's own buffers, not copied, in
    the stream's colours; a p010le frame (what hardware decoders give) as a
    P010 pair. Both decode as the reference."""
    av = pytest.importorskip("av", reason="PyAV is not installed")
    import tempfile

    from npu_zc.sources.video import VideoSource

    width, height = 64, 48
    rng = np.random.default_rng(41)
    y = rng.integers(64, 941, (height, width), dtype=np.uint16)
    u, v = (rng.integers(64, 961, (height // 2, width // 2), dtype=np.uint16) for _ in range(2))
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/ten_bit.mkv"
        with av.open(path, "w") as container:
            stream = container.add_stream("ffv1", rate=25)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p10le"
            stream.codec_context.colorspace = 1  # BT.709
            frame = av.VideoFrame(width, height, "yuv420p10le")
            for plane, data in zip(frame.planes, (y, u, v)):
                rows = np.frombuffer(plane, np.uint8).reshape(-1, plane.line_size)
                rows[: data.shape[0], : data.nbytes // data.shape[0]] = data.view(np.uint8)
            for packet in stream.encode(frame):
                container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
        source = VideoSource(path)
        decoded = next(iter(source.frames()))
        assert (decoded.format, decoded.copied, decoded.matrix, decoded.range) == ("I010", False, "bt709", "limited")
        assert all(p.dtype == np.uint16 for p in decoded.planes)
        out = layout.convert(decoded.planes, empty("RGB", width, height), "I010", "RGB", matrix=decoded.matrix)
        np.testing.assert_array_equal(out, decode(y, full_size(u), full_size(v), "bt709", "limited"))
        p010_frame = decoded.owner.reformat(format="p010le")
        as_p010 = source._frame(p010_frame, 0, 0, None)
        assert (as_p010.format, as_p010.copied) == ("P010", False)
        out = layout.convert(as_p010.planes, empty("RGB", width, height), "P010", "RGB", matrix=decoded.matrix)
        np.testing.assert_array_equal(out, decode(y, full_size(u), full_size(v), "bt709", "limited"))
        decoded.release()
