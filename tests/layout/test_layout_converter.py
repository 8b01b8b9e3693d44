"""npu_zc.layout.Converter and TopK, the "checked once" forms of convert and
topk: the same bits as convert/topk for every source format, the checks made
once per kind of array (the fast path really taken), and a wrong array after
a good one still refused with convert's error, nothing written."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes (bfloat16 arrays) is not installed")

import npu_zc
from npu_zc import _core, layout
from npu_zc.errors import InvalidArgumentError
from npu_zc.layout import Converter, TopK
from test_layout import DESTINATIONS, DTYPE, IMAGENET, LEVELS, PADDED, PLANAR, SOURCES, empty_destination, normalisations, random_source, same_bits

# A few destinations covering every kind: packed u8, bf16, f16, planar f32, 3-channel f32.
SOME_DESTINATIONS = ("RGBx", "RGBx_BF16", "RGBx_FP16", "RGBP_FLOAT", "BGR_FLOAT")


def normalisation(dst_fmt: str) -> dict[str, Any]:
    return IMAGENET if DTYPE[dst_fmt] != np.uint8 else {}


class Counts:
    """How often the core converted, and how often the Python checks ran (not the core: it is only counted)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.core = self.checks = self.topk = self.topk_checks = 0
        self._wrap(monkeypatch, _core, "convert", "core")
        self._wrap(monkeypatch, layout.frames, "_source_arrays", "checks")
        self._wrap(monkeypatch, layout.converter, "_source_arrays", "checks")
        self._wrap(monkeypatch, _core, "topk", "topk")
        self._wrap(monkeypatch, layout.results, "_topk_source", "topk_checks")

    def _wrap(self, monkeypatch: pytest.MonkeyPatch, module: Any, name: str, counter: str) -> None:
        real: Callable[..., Any] = getattr(module, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            setattr(self, counter, getattr(self, counter) + 1)
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Counts:
    return Counts(monkeypatch)


def frame_source(rng: np.random.Generator, fmt: str, width: int, height: int, kind: str) -> tuple[Any, dict[str, Any]]:
    """A source of `kind` and the extra arguments convert needs for it (size=, src_stride=)."""
    frame = random_source(rng, fmt, width, height)
    if kind == "contiguous":
        return frame, {}
    if kind == "crop":  # a view into a larger image: rows apart by more than their bytes
        big = random_source(rng, fmt, width + 5, height + (4 if fmt == "NV12" else 3))
        if fmt == "NV12":  # Y and UV planes of a wider buffer
            y = big[:height, 2 : 2 + width]
            uv = big[height + 2 : height + 2 + height // 2, 2 : 2 + width]
            return (y, uv), {}
        return big[1 : 1 + height, 3 : 3 + width], {}
    if kind == "pair":  # NV12 only: the UV plane as (H/2, W/2, 2)
        return (frame[:height], frame[height:].reshape(height // 2, width // 2, 2)), {}
    if kind == "flat":  # one flat buffer whose rows are padded
        row = frame.reshape(frame.shape[0], -1)
        stride = row.shape[1] + 7
        flat = np.zeros(row.shape[0] * stride, np.uint8)
        flat.reshape(row.shape[0], stride)[:, : row.shape[1]] = row
        return flat, {"size": (width, height), "src_stride": stride}
    raise AssertionError(kind)


def source_kinds(fmt: str) -> list[str]:
    return ["contiguous", "crop", "flat"] + (["pair"] if fmt == "NV12" else [])


def fresh(fmt: str, width: int, height: int, kind: str = "frame") -> np.ndarray:
    """An empty destination of `kind`: shaped like the frame, with a batch axis, or a flat uint8 buffer."""
    dst = empty_destination(fmt, width, height)
    if kind == "batch":
        return dst[None]
    if kind == "flat":
        return dst.reshape(-1).view(np.uint8)
    return dst


# --- the same bits as convert, checked once -------------------------------------------------


@pytest.mark.parametrize("dst_fmt", SOME_DESTINATIONS)
@pytest.mark.parametrize("src_fmt", SOURCES)
def test_every_source_and_kind_of_array_writes_what_convert_writes(src_fmt: str, dst_fmt: str, counts: Counts) -> None:
    width, height = 38, 10
    norm = normalisation(dst_fmt)
    rng = np.random.default_rng(sum(map(ord, src_fmt + dst_fmt)))
    for src_kind in source_kinds(src_fmt):
        stride = frame_source(rng, src_fmt, width, height, src_kind)[1].get("src_stride")
        for dst_kind in ("frame", "batch", "flat"):
            conv = Converter(src_fmt, dst_fmt, width, height, src_stride=stride, threads=1, **norm)
            before = counts.checks
            for call in range(3):  # the first is checked; the next two, new arrays like it, are not
                src, extra = frame_source(rng, src_fmt, width, height, src_kind)
                want = fresh(dst_fmt, width, height, dst_kind)
                layout.convert(src, want, src_fmt, dst_fmt, threads=1, **norm, **extra)
                dst = fresh(dst_fmt, width, height, dst_kind)
                assert conv(src, dst) is dst
                assert same_bits(dst, want), (src_kind, dst_kind, call)
            assert counts.checks - before == 3 + 1, (src_kind, dst_kind)  # convert's three references, the converter's first



@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    src_fmt=st.sampled_from(SOURCES),
    dst_fmt=st.sampled_from(DESTINATIONS),
    width=st.integers(1, 41),
    height=st.integers(1, 9),
    norm=normalisations,
    pad=st.sampled_from([0, 1, 255]),
    level=st.sampled_from(LEVELS),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_pair_matches_convert(src_fmt, dst_fmt, width, height, norm, pad, level, seed):
    if src_fmt == "NV12":
        width, height = width + width % 2, height + height % 2
    pad_value: float = 0 if dst_fmt not in PADDED else pad if DTYPE[dst_fmt] == np.uint8 else -1.5 * pad
    conv = Converter(src_fmt, dst_fmt, width, height, pad=pad_value, simd=level, **norm)
    assert conv.kernel == layout.describe_conversion(src_fmt, dst_fmt, pad=pad_value, simd=level, **norm)
    rng = np.random.default_rng(seed)
    for _ in range(2):  # checked, then the fast path with a new frame
        src = random_source(rng, src_fmt, width, height)
        want = empty_destination(dst_fmt, width, height)
        layout.convert(src, want, src_fmt, dst_fmt, pad=pad_value, simd=level, **norm)
        dst = empty_destination(dst_fmt, width, height)
        conv(src, dst)
        assert same_bits(dst, want)


def test_gray_sources_of_two_or_three_axes(counts: Counts) -> None:
    gray = random_source(np.random.default_rng(2), "GRAY", 17, 5)
    conv = Converter("GRAY", "RGBx_FP16", 17, 5, **IMAGENET)
    want = empty_destination("RGBx_FP16", 17, 5)
    layout.convert(gray, want, "GRAY", "RGBx_FP16", **IMAGENET)
    for src in (gray, gray[:, :, None], np.ascontiguousarray(np.pad(gray, ((0, 0), (0, 3))))[:, :17]):
        for _ in range(2):
            dst = empty_destination("RGBx_FP16", 17, 5)
            conv(src, dst)
            assert same_bits(dst, want)
    assert counts.checks == 1 + 3  # the reference, then each kind of source once


def test_flat_destination_with_a_stride() -> None:
    width, height, pitch = 13, 5, 128
    src = random_source(np.random.default_rng(3), "BGR", width, height)
    conv = Converter("BGR", "RGBx_BF16", width, height, dst_stride=pitch, **IMAGENET)
    assert conv.dst_nbytes == layout.frame_nbytes("RGBx_BF16", width, height, stride=pitch) == height * pitch
    want = np.full(conv.dst_nbytes, 0x77, np.uint8)
    layout.convert(src, want, "BGR", "RGBx_BF16", dst_stride=pitch, **IMAGENET)
    for _ in range(2):
        flat = np.full(conv.dst_nbytes, 0x77, np.uint8)
        conv(src, flat)
        assert same_bits(flat, want)


def test_a_crop_of_a_larger_destination_leaves_the_rest_alone() -> None:
    src = random_source(np.random.default_rng(4), "BGR", 20, 6)
    conv = Converter("BGR", "RGBP_FLOAT", 20, 6, **IMAGENET)
    want = empty_destination("RGBP_FLOAT", 20, 6)
    layout.convert(src, want, "BGR", "RGBP_FLOAT", **IMAGENET)
    for _ in range(2):
        big = np.full((3, 8, 25), -7.0, np.float32)
        conv(src, big[:, 1:7, 2:22])
        assert same_bits(big[:, 1:7, 2:22], want)
        big[:, 1:7, 2:22] = -7.0
        assert (big == -7.0).all()


# --- the fast path ---------------------------------------------------------------------------


def test_checks_run_once_per_kind_of_array(counts: Counts) -> None:
    conv = Converter("BGR", "RGBx_BF16", 32, 8, threads=1, **IMAGENET)
    frames = [random_source(np.random.default_rng(s), "BGR", 32, 8) for s in range(10)]
    dst = empty_destination("RGBx_BF16", 32, 8)
    for frame in frames:
        conv(frame, dst)
    assert (counts.core, counts.checks) == (10, 1)
    assert same_bits(dst, layout.convert(frames[-1], empty_destination("RGBx_BF16", 32, 8), "BGR", "RGBx_BF16", **IMAGENET))
    # Another array of the same shape, dtype and strides: no checks.
    conv(frames[0], empty_destination("RGBx_BF16", 32, 8))
    assert (counts.core, counts.checks) == (12, 2)  # the reference above was a full convert
    # A destination of another kind (raw uint16 bits): checked once, then remembered too.
    raw = np.zeros((8, 32, 4), np.uint16)
    conv(frames[0], raw)
    conv(frames[1], raw)
    conv(frames[2], dst)
    assert (counts.core, counts.checks) == (15, 3)


def test_many_kinds_of_arrays_are_all_checked_and_still_converted(counts: Counts) -> None:
    """More kinds than remembered: the converter forgets and checks again; the results stay right."""
    src = random_source(np.random.default_rng(5), "BGR", 4, 3)
    conv = Converter("BGR", "RGBx", 4, 3)
    want = layout.convert(src, empty_destination("RGBx", 4, 3), "BGR", "RGBx")
    for extra in range(1, 40):
        big = np.zeros((3, 4 + extra, 4), np.uint8)
        conv(src, big[:, :4])
        assert same_bits(big[:, :4], want)
    assert counts.checks == 1 + 39


# --- bad arrays after a good one: convert's error, nothing written ---------------------------

W, H = 8, 6


BGR = random_source(np.random.default_rng(9), "BGR", W, H)


def bf16_destination() -> np.ndarray:
    return empty_destination("RGBx_BF16", W, H)


@pytest.mark.parametrize(
    "make_src, make_dst, match",
    [
        (lambda: BGR, lambda: np.zeros((H, W, 3), ml_dtypes.bfloat16), "has shape"),
        (lambda: BGR, lambda: np.zeros((1, H, W + 1, 4), ml_dtypes.bfloat16), "has shape"),
        (lambda: BGR, lambda: np.zeros((H, W, 4), np.float32), "not float32"),
        (lambda: BGR, lambda: np.zeros((H, W, 8), ml_dtypes.bfloat16)[:, :, ::2], "not contiguous along its last axis"),
        (lambda: BGR, lambda: np.zeros((H, 2 * W, 8), np.uint8)[:, ::2], "non-contiguous uint8 array"),
        (lambda: BGR, lambda: np.zeros(W * H * 8 - 1, np.uint8), "takes 384 bytes"),
        (lambda: BGR, lambda: np.zeros(W * H * 8 + 2, np.uint8), "takes 384 bytes"),
        (lambda: BGR, lambda: "not an array", "numpy array or a buffer"),
        (lambda: BGR.astype(np.float32), bf16_destination, "dtype float32"),
        (lambda: BGR[:, :, :2], bf16_destination, r"shape \(H, W, 3\)"),
        (lambda: BGR[:, :-1], bf16_destination, "7x6 frame but this Converter converts 8x6 frames"),
        (lambda: BGR[:, ::2].repeat(2, axis=1)[:-1], bf16_destination, "8x5 frame"),
        (lambda: np.zeros((H, 2 * W, 3), np.uint8)[:, ::2], bf16_destination, "strides do not describe rows"),
        (lambda: np.zeros(W * H * 3 - 1, np.uint8), bf16_destination, "too few"),
    ],
)
def test_bad_arrays_after_a_good_one(make_src: Callable[[], Any], make_dst: Callable[[], Any], match: str) -> None:
    conv = Converter("BGR", "RGBx_BF16", W, H, **IMAGENET)
    conv(BGR, bf16_destination())
    conv(BGR, bf16_destination())  # the fast path, armed for this kind of source and destination
    dst = make_dst()
    before = dst.copy() if isinstance(dst, np.ndarray) else None
    with pytest.raises(InvalidArgumentError, match=match) as info:
        conv(make_src(), dst)
    assert isinstance(info.value, ValueError) and isinstance(info.value, npu_zc.Error)
    if before is not None:
        assert same_bits(dst, before), "written despite the error"


def test_a_read_only_destination_like_a_good_one_is_refused(counts: Counts) -> None:
    conv = Converter("BGR", "RGBx", W, H)
    conv(BGR, empty_destination("RGBx", W, H))
    frozen = empty_destination("RGBx", W, H)
    frozen.setflags(write=False)
    with pytest.raises(InvalidArgumentError, match="read-only"):
        conv(BGR, frozen)
    assert (frozen == 0xA5).all()
    with npu_zc.alloc(conv.dst_nbytes, "memfd") as buf:
        view = buf.map("uint8", conv.dst_shape, writable=False)
        with pytest.raises(InvalidArgumentError, match="read-only"):
            conv(BGR, view)
        del view
    assert counts.core == 1


def test_a_destination_that_is_the_source_is_refused_even_on_the_fast_path() -> None:
    conv = Converter("RGBA", "RGBx", W, H)
    src, dst = np.zeros((H, W, 4), np.uint8), np.zeros((H, W, 4), np.uint8)
    conv(src, dst)
    conv(src, dst)  # same signatures from now on
    shared = np.arange(H * W * 4, dtype=np.uint8).reshape(H, W, 4)
    before = shared.copy()
    with pytest.raises(InvalidArgumentError, match="overlaps the source"):
        conv(shared, shared)
    assert same_bits(shared, before)


def test_after_refusals_good_arrays_still_convert() -> None:
    conv = Converter("BGR", "RGBx_BF16", W, H, **IMAGENET)
    want = layout.convert(BGR, bf16_destination(), "BGR", "RGBx_BF16", **IMAGENET)
    for bad in (np.zeros((H, W, 3), ml_dtypes.bfloat16), np.zeros(3, np.uint8)):
        with pytest.raises(InvalidArgumentError):
            conv(BGR, bad)
        dst = bf16_destination()
        conv(BGR, dst)
        assert same_bits(dst, want)


# --- construction --------------------------------------------------------------------------------

MISSING_LEVEL = next((level for level in ("avx512", "avx2", "neon") if level not in LEVELS), None)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (("BGR", "RGBx_BF17"), {}, "unknown format name"),
        (("YUV9", "RGBx"), {}, "unknown format name"),
        (("RGBx_BF16", "RGBx"), {}, "not a source format"),
        (("BGR", "GRAY"), {}, "not a destination format"),
        (("BGR", "RGB_FLOAT"), dict(pad=1.0), "no pad channel"),
        (("BGR", "RGBx"), dict(scale=(1, 0, 1)), r"scale\[1\] is 0"),
        (("BGR", "RGBx"), dict(mean=(1, 2)), "has 2 values"),
        (("BGR", "RGBx"), dict(mean="abc"), "must be a number or 3 numbers"),
        (("BGR", "RGBx"), dict(mean=float("nan")), "finite"),
        (("BGR", "RGBx"), dict(pad=256), "0 to 255"),
        (("BGR", "RGBx"), dict(pad="x"), "pad must be a number"),
        (("BGR", "RGBx"), dict(threads=0), "threads must be at least 1"),
        (("BGR", "RGBx"), dict(threads=1.5), "threads must be an integer"),
        (("BGR", "RGBx"), dict(dst_stride=31), "shorter than one row"),
        (("BGR", "RGBx"), dict(dst_stride=1.5), "dst_stride must be an integer"),
        (("BGR", "RGBx"), dict(simd="sse9"), "unknown SIMD level"),
    ]
    + ([(("BGR", "RGBx"), dict(simd=MISSING_LEVEL), "cannot run")] if MISSING_LEVEL else []),
)
def test_construction_errors_are_converts(args: tuple[str, str], kwargs: dict[str, Any], match: str) -> None:
    """Refused when made, with the very message convert gives for the same arguments."""
    with pytest.raises(InvalidArgumentError, match=match) as made:
        Converter(*args, W, H, **kwargs)
    try:
        nbytes = layout.frame_nbytes(args[1], W, H)
    except InvalidArgumentError:
        nbytes = 1  # convert refuses the format first
    dst = np.zeros(nbytes, np.uint8)
    with pytest.raises(InvalidArgumentError) as converted:
        layout.convert(BGR, dst, *args, **kwargs)
    assert str(made.value) == str(converted.value)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((1, "RGBx", W, H), {}, "must be a name"),
        (("BGR", "RGBx", 0, H), {}, "0x6 pixels is empty"),
        (("BGR", "RGBx", W, -2), {}, "8x-2 pixels is empty"),
        (("BGR", "RGBx", 8.0, H), {}, "width must be an integer"),
        (("NV12", "RGBx", 5, 4), {}, "even"),
        (("BGR", "RGBx", W, H), dict(src_stride=5), "shorter than one row"),
        (("BGR", "RGBx", W, H), dict(src_stride=-24), "src_stride must be the number of bytes"),
        (("BGR", "RGBx", W, H), dict(simd=2), "simd must be a name"),
    ],
)
def test_construction_errors(args: tuple[Any, ...], kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        Converter(*args, **kwargs)


def test_attributes_repr_and_read_only() -> None:
    conv = Converter("bgr", "rgbx_bf16", 224, 224, threads=1, **IMAGENET)
    assert (conv.src_format, conv.dst_format, conv.width, conv.height) == ("BGR", "RGBx_BF16", 224, 224)
    assert conv.mean == IMAGENET["mean"] and conv.scale == IMAGENET["scale"] and conv.threads == 1
    assert (conv.pad, conv.src_stride, conv.dst_stride, conv.simd) == (0.0, None, None, None)
    assert conv.kernel == layout.describe_conversion("BGR", "RGBx_BF16", **IMAGENET)
    assert conv.src_nbytes == 224 * 224 * 3 and conv.dst_nbytes == layout.frame_nbytes("RGBx_BF16", 224, 224)
    assert conv.dst_shape == (224, 224, 4)
    assert Converter("NV12", "RGBP_FLOAT", 6, 4).src_nbytes == 36
    assert Converter("NV12", "RGBP_FLOAT", 6, 4).dst_shape == (3, 4, 6)
    assert Converter("BGR", "BGR_FLOAT", 6, 4, mean=1).mean == (1.0, 1.0, 1.0)
    assert repr(conv) == (
        "Converter('BGR', 'RGBx_BF16', 224, 224, mean=(123.675, 116.28, 103.53), scale=(58.395, 57.12, 57.375), threads=1)"
    )
    again = eval(repr(Converter("NV12", "RGBx", 6, 4, pad=255, dst_stride=64, simd="scalar")), {"Converter": Converter})
    assert (again.src_format, again.pad, again.dst_stride, again.simd) == ("NV12", 255.0, 64, "scalar")
    with pytest.raises(AttributeError):
        conv.width = 100  # type: ignore[misc]
    with pytest.raises(AttributeError):
        conv.anything = 1  # type: ignore[attr-defined]


def test_exported() -> None:
    assert {"Converter", "TopK"} <= set(layout.__all__) and {"Converter", "TopK"} <= set(npu_zc.__all__)
    assert npu_zc.Converter is Converter and npu_zc.TopK is TopK


# --- DmaBuf destinations and threads --------------------------------------------------------------


@pytest.mark.parametrize("src_fmt, dst_fmt", [("BGR", "RGBx_FP16"), ("NV12", "RGBx_BF16"), ("RGBA", "RGBP_FLOAT")])
def test_dmabuf_destination(src_fmt: str, dst_fmt: str, counts: Counts) -> None:
    width, height = 24, 16
    conv = Converter(src_fmt, dst_fmt, width, height, **IMAGENET)
    rng = np.random.default_rng(7)
    with npu_zc.alloc(conv.dst_nbytes, "memfd") as buf:
        for _ in range(3):
            src = random_source(rng, src_fmt, width, height)
            want = layout.convert(src, empty_destination(dst_fmt, width, height), src_fmt, dst_fmt, **IMAGENET)
            view = conv(src, buf)  # the buffer's mapping, as convert returns it
            assert view.dtype == np.uint8 and view.nbytes == conv.dst_nbytes
            assert same_bits(view.view(want.dtype).reshape(want.shape), want)
            del view
        assert buf.views == 0
    assert counts.checks == 3 + 1  # the three references, the converter's first call


def test_dmabuf_of_the_wrong_size_is_refused() -> None:
    conv = Converter("BGR", "RGBx", W, H)
    with npu_zc.alloc(conv.dst_nbytes + 8192, "memfd") as buf:
        with pytest.raises(InvalidArgumentError, match="buffer has"):
            conv(BGR, buf)
        assert buf.views == 0
    with pytest.raises(InvalidArgumentError, match="takes 192 bytes"):
        conv(BGR, np.zeros(4096, np.uint8))


@pytest.mark.parametrize("threads", [1, 2, None])
def test_threads(threads: int | None) -> None:
    width, height = 1922, 34  # large enough for several threads
    src = random_source(np.random.default_rng(8), "NV12", width, height)
    conv = Converter("NV12", "RGBx_BF16", width, height, threads=threads, **IMAGENET)
    assert conv.threads == threads
    want = layout.convert(src, empty_destination("RGBx_BF16", width, height), "NV12", "RGBx_BF16", threads=1, **IMAGENET)
    for _ in range(2):
        dst = empty_destination("RGBx_BF16", width, height)
        conv(src, dst)
        assert same_bits(dst, want)


def test_one_converter_from_several_threads() -> None:
    conv = Converter("BGR", "RGBP_FLOAT", 640, 64, threads=1, **IMAGENET)
    frames = [random_source(np.random.default_rng(s), "BGR", 640, 64) for s in range(4)]
    wants = [layout.convert(f, empty_destination("RGBP_FLOAT", 640, 64), "BGR", "RGBP_FLOAT", **IMAGENET) for f in frames]

    def run(i: int) -> bool:
        dst = empty_destination("RGBP_FLOAT", 640, 64)
        conv(frames[i % 4], dst)
        return same_bits(dst, wants[i % 4])

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(run, range(24)))


# --- TopK --------------------------------------------------------------------------------------------


def scores(rng: np.random.Generator, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, endpoint=True, dtype=dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, ml_dtypes.bfloat16, np.float16, np.float32])
@pytest.mark.parametrize("shape", [(1000,), (1, 1000), (3, 7), (2, 2, 5)])
def test_topk_matches_topk(dtype: Any, shape: tuple[int, ...], counts: Counts) -> None:
    rng = np.random.default_rng(10)
    for k, quantised in ((1, {}), (min(5, shape[-1]), {}), (shape[-1], dict(scale=0.25, zero_point=3))):
        top = TopK(k, **quantised)
        for _ in range(3):
            src = scores(rng, dtype, shape)
            got, want = top(src), layout.topk(src, k, **quantised)
            for a, b in zip(got, want):
                assert a.shape == b.shape == shape[:-1] + (k,) and a.dtype == b.dtype
                assert same_bits(a, b)
    assert counts.topk_checks == 3 + 3 * 3  # each TopK once; layout.topk every time


def test_topk_fast_path_and_bad_arrays(counts: Counts) -> None:
    top = TopK(5)
    good = np.arange(1000, dtype=np.float32)
    for _ in range(4):
        indices, values = top(good)
    assert list(indices) == [999, 998, 997, 996, 995] and (counts.topk, counts.topk_checks) == (4, 1)
    with pytest.raises(InvalidArgumentError, match="not contiguous"):
        top(np.arange(2000, dtype=np.float32)[::2])
    with pytest.raises(InvalidArgumentError, match="dtype float64"):
        top(good.astype(np.float64))
    with pytest.raises(InvalidArgumentError, match="k = 5 but each row has 3 values"):
        top(good[:3])
    with pytest.raises(InvalidArgumentError, match="last axis"):
        top(np.array(1.0, np.float32))
    with pytest.raises(InvalidArgumentError, match="numpy array or a buffer"):
        top([1.0, 2.0])  # type: ignore[arg-type]
    assert list(top(good)[0]) == [999, 998, 997, 996, 995]
    with pytest.raises(InvalidArgumentError, match="k = 5 but each row has 3 values"):
        top(good[:3])  # still refused: a failed array is never remembered


def test_topk_dmabuf_source() -> None:
    """A DmaBuf is read as its mapping (uint8 bytes, as layout.topk reads it), mapped on each call."""
    top = TopK(3)
    with npu_zc.alloc(4096, "memfd") as buf:
        view = buf.map("uint8", (4096,))
        view[:] = np.arange(4096) % 251
        view[17] = 255
        del view
        for _ in range(2):
            indices, values = top(buf)
            want = layout.topk(buf, 3)
            assert list(indices) == [17, 250, 501] == list(want[0]) and list(values) == [255, 250, 250]
            del indices, values, want
        assert buf.views == 0


@pytest.mark.parametrize(
    "k, kwargs, match",
    [(0, {}, "k must be at least 1"), (-1, {}, "k must be at least 1"), (2.5, {}, "k must be an integer"),
     (3, dict(scale=0.0), "positive finite"), (3, dict(scale=math.inf), "positive finite"), (3, dict(scale="x"), "scale must be a number"),
     (3, dict(scale=1.0, zero_point=0.5), "zero_point must be an integer")],
)  # fmt: skip
def test_topk_construction_errors(k: Any, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        TopK(k, **kwargs)


def test_topk_attributes_and_repr() -> None:
    top = TopK(5, scale=0.5, zero_point=-3)
    assert (top.k, top.scale, top.zero_point) == (5, 0.5, -3)
    assert repr(top) == "TopK(5, scale=0.5, zero_point=-3)" and repr(TopK(2)) == "TopK(2)"
    with pytest.raises(AttributeError):
        top.k = 3  # type: ignore[misc]
