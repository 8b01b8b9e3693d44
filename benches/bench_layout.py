"""Layout conversion speed: npu_zc.layout against the physical limit
(memcpy of the same bytes) and the best composition a user would write with
OpenCV + numpy + ml_dtypes, all timed in the same run.

    python benches/bench_layout.py                 # 1920x1080, one thread
    python benches/bench_layout.py --size 3840x2160 --threads 2
    python benches/bench_layout.py --threads-sweep 1,2,4,8,16   # scaling, 1080p and 4K
    python benches/bench_layout.py --only "fast rounding"      # only the rows whose name contains it

EdgeFirst (``edgefirst-image`` on PyPI, its CPU path: the GL backend is
disabled) is timed beside OpenCV for the YUV cases it has, where installed;
its kernels round differently (up to 2-3 levels from OpenCV), ours are
bit-exact, and the "fast rounding" rows (``rounding="fast"``) within 1 level. Tables are recorded with benches/results.py.

Like for like with a pipeline's per-frame path and with EdgeFirst's images (made once, in its own memory): npu_zc
is a ``layout.Converter`` made once (``layout.convert`` checks every argument on each call: microseconds more), and
the frames and destinations lie page-aligned, as the pipeline's buffers (mmaps) do (FFmpeg's planes are 64-byte
aligned); numpy's own large arrays start 16 bytes past a cache line, which splits half of a kernel's 32-byte stores.

"memcpy of the same bytes": a conversion reads R bytes and writes W bytes;
copying (R + W) / 2 bytes with memcpy (numpy.copyto of contiguous arrays) also
moves R + W bytes, the least any conversion can move. Every timing is the
best (or, with --stat median, the median) of --runs calls after a warm-up,
buffers allocated once, outside the timing: the best is what the machine can
do, the least disturbed by other processes. npu_zc and its memcpy are timed
in alternating blocks (--rounds), so that the ratio between them does not
depend on which of the two a burst of other work happened to hit. OpenCV runs single-threaded with
--threads 1 (cv2.setNumThreads).
"""

from __future__ import annotations

import argparse
import mmap
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Literal, TypedDict

import cv2
import ml_dtypes
import numpy as np

from npu_zc import _core, layout
import results
import timing
from timing import memcpy_of, paired_ms, time_ms

if TYPE_CHECKING:
    from edgefirst.image import ImageProcessor
    from numpy.typing import DTypeLike


def page_aligned(shape: tuple[int, ...], dtype: DTypeLike, like: np.ndarray | None = None) -> np.ndarray:
    """An array in an anonymous mapping (page-aligned, as the pipeline's buffers are), holding ``like``'s values."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    array = np.frombuffer(mmap.mmap(-1, max(1, nbytes)), dtype, count=int(np.prod(shape))).reshape(shape)
    if like is not None:
        array[...] = like
    return array


def aligned(array: np.ndarray) -> np.ndarray:
    return page_aligned(array.shape, array.dtype, array)


def cvt_color(src: np.ndarray, code: int, dst: np.ndarray) -> Callable[[], object]:
    """cv2.cvtColor from ``src`` into ``dst``, its arguments bound now (a loop's, where the peer is made in one)."""
    return lambda: cv2.cvtColor(src, code, dst=dst)


MEAN = np.array([123.675, 116.28, 103.53], np.float32)
STD = np.array([58.395, 57.12, 57.375], np.float32)


class Normalisation(TypedDict, total=False):
    """The Converter's normalisation, quantisation and rounding arguments a case gives."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    quant_scale: float
    zero_point: int
    rounding: Literal["exact", "fast"]


NORM: Normalisation = dict(mean=tuple(MEAN.tolist()), scale=tuple(STD.tolist()))


@dataclass
class Row:
    case: str
    ours: float
    memcpy: float
    composition: float | None
    composition_name: str
    kernel: str
    edgefirst: float | None = None


def edgefirst_converter(src: np.ndarray, src_fmt: str, dst_fmt: str, width: int, height: int) -> Callable[[], object] | None:
    """EdgeFirst's CPU conversion of the same frame (images made once), or
    None where it is not installed or has no such pair."""
    try:
        os.environ.setdefault("EDGEFIRST_DISABLE_GL", "1")  # its CPU path (no GPU here; llvmpipe is refused anyway)
        os.environ.setdefault("RUST_LOG", "error")
        from edgefirst.image import ImageProcessor, PixelFormat
    except ImportError:
        return None
    formats = {"NV12": "Nv12", "YUYV": "Yuyv", "RGBx": "Rgba", "RGB": "Rgb", "BGR": None, "BGRx": "Bgra"}
    src_name, dst_name = formats.get(src_fmt), formats.get(dst_fmt)
    if src_name is None or dst_name is None:
        return None
    global _EDGEFIRST
    if _EDGEFIRST is None:
        _EDGEFIRST = ImageProcessor()
    proc = _EDGEFIRST
    source = proc.create_image(width, height, getattr(PixelFormat, src_name))
    source.from_numpy(src.reshape(source.shape))
    dst = proc.create_image(width, height, getattr(PixelFormat, dst_name))
    return lambda: proc.convert(source, dst)


_EDGEFIRST: ImageProcessor | None = None


def best(candidates: dict[str, Callable[[], object]], runs: int) -> tuple[float, str]:
    timed = {name: time_ms(fn, runs) for name, fn in candidates.items()}
    name = min(timed, key=timed.__getitem__)
    return timed[name], name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", help="WIDTHxHEIGHT (default 1920x1080; for --threads-sweep, 1080p and 4K)")
    parser.add_argument("--threads", type=int, default=1, help="threads for npu_zc and OpenCV (default 1)")
    parser.add_argument("--runs", type=int, default=60, help="timed calls per measurement (default 60)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="alternating blocks of npu_zc and memcpy calls the runs are split into (default 5)")
    parser.add_argument("--stat", choices=("min", "median"), default="min", help="best or median of the runs (default: best)")
    parser.add_argument("--only", metavar="SUBSTRING",
                        help="time only the conversions whose name contains SUBSTRING, e.g. 'fast rounding' "
                             "(neither recorded in benches/results nor checked against the targets)")
    parser.add_argument("--threads-sweep", metavar="N,N,...",
                        help="instead: per thread count, npu_zc against OpenCV and a multi-threaded memcpy, "
                             "at 1920x1080 and 3840x2160 (or --size)")
    parser.add_argument("--json", help="where to write the results (default benches/results/)")
    args = parser.parse_args()
    timing.use_stat(args.stat)
    if args.threads_sweep:
        sizes = [args.size] if args.size else ["1920x1080", "3840x2160"]
        threads_sweep([int(n) for n in args.threads_sweep.split(",")], sizes, args.runs, args.rounds, args.json)
        return
    width, height = (int(v) for v in (args.size or "1920x1080").lower().split("x"))
    threads, runs = args.threads, args.runs
    cv2.setNumThreads(threads)

    rng = np.random.default_rng(0)
    bgr = aligned(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
    nv12 = aligned(rng.integers(0, 256, (height * 3 // 2, width), dtype=np.uint8))
    rows: list[Row] = []

    def measure(case: str, src: np.ndarray, src_fmt: str, dst_fmt: str, norm: Normalisation,
                compositions: dict[str, Callable[[], object]], rounding: Literal["exact", "fast"] = "exact") -> None:
        if args.only and args.only not in case:
            return
        shape = (3, height, width) if dst_fmt.startswith("RGBP") else (height, width, 3 if dst_fmt in ("RGB", "BGR") else 4)
        dst = page_aligned(shape, {"RGBx": np.uint8, "BGRx": np.uint8, "RGB": np.uint8, "BGR": np.uint8,
                               "RGBx_BF16": ml_dtypes.bfloat16, "RGBx_FP16": np.float16, "RGBP_FLOAT": np.float32,
                               "RGBP_FP16": np.float16, "RGBx_I8": np.int8}[dst_fmt])
        moved = src.nbytes + dst.nbytes
        # (an older npu_zc has no rounding=)
        how: Normalisation = {**norm, "rounding": rounding} if rounding != "exact" else norm
        convert = layout.Converter(src_fmt, dst_fmt, width, height, threads=threads, **how)
        ours, copy = paired_ms(lambda: convert(src, dst), memcpy_of(moved // 2), runs, args.rounds)  # moved = read + written
        comp, name = best(compositions, runs) if compositions else (None, "")
        peer = edgefirst_converter(src, src_fmt, dst_fmt, width, height) if not norm and threads == 1 else None
        theirs = time_ms(peer, runs) if peer else None
        rows.append(Row(case, ours, copy, comp, name, layout.describe_conversion(src_fmt, dst_fmt, **how), theirs))

    # --- the compositions a user would write --------------------------------
    rgba_u8 = page_aligned((height, width, 4), np.uint8)
    f32_packed = np.empty((height, width, 4), np.float32)
    bf16_packed = np.empty((height, width, 4), ml_dtypes.bfloat16)
    f16_packed = np.empty((height, width, 4), np.float16)
    planar = np.empty((3, height, width), np.float32)
    mean4 = np.append(MEAN, 0).astype(np.float32)
    inv4 = np.append(1 / STD, 0).astype(np.float32)

    def packed_float(out: np.ndarray, src: np.ndarray = bgr, code: int = cv2.COLOR_BGR2RGBA) -> Callable[[], object]:
        """cvtColor into RGBA, normalise in place, cast into `out`."""
        def run() -> None:
            cv2.cvtColor(src, code, dst=rgba_u8)
            np.subtract(rgba_u8, mean4, out=f32_packed, dtype=np.float32)
            np.multiply(f32_packed, inv4, out=f32_packed)
            out[...] = f32_packed  # the ml_dtypes / numpy cast
        return run

    def packed_float_numpy(out: np.ndarray) -> Callable[[], object]:
        def run() -> None:
            x = (bgr[..., ::-1].astype(np.float32) - MEAN) / STD
            out[..., :3] = x.astype(out.dtype)
            out[..., 3] = 0
        return run

    def planar_numpy() -> None:
        x = (bgr[..., ::-1].astype(np.float32) - MEAN) / STD
        planar[...] = x.transpose(2, 0, 1)

    def planar_numpy_inplace() -> None:
        np.subtract(bgr[..., ::-1].transpose(2, 0, 1), MEAN[:, None, None], out=planar, dtype=np.float32)
        np.divide(planar, STD[:, None, None], out=planar)

    compositions_planar_cv: dict[str, Callable[[], object]] = {}
    if hasattr(cv2, "dnn") and hasattr(cv2.dnn, "Image2BlobParams"):
        params = cv2.dnn.Image2BlobParams(
            scalefactor=tuple((1 / STD).tolist()), size=(width, height), mean=tuple(MEAN[::-1].tolist()), swapRB=True
        )
        compositions_planar_cv["cv2.dnn.blobFromImageWithParams"] = lambda: cv2.dnn.blobFromImageWithParams(bgr, params)

    measure("BGR -> RGBx (u8)", bgr, "BGR", "RGBx", {},
            {"cv2.cvtColor(BGR2RGBA, dst=)": lambda: cv2.cvtColor(bgr, cv2.COLOR_BGR2RGBA, dst=rgba_u8)})
    measure("BGR -> RGBx_BF16 (normalised)", bgr, "BGR", "RGBx_BF16", NORM,
            {"cv2.cvtColor + numpy in place + ml_dtypes": packed_float(bf16_packed),
             "numpy + ml_dtypes": packed_float_numpy(bf16_packed)})
    measure("BGR -> RGBx_FP16 (normalised)", bgr, "BGR", "RGBx_FP16", NORM,
            {"cv2.cvtColor + numpy in place": packed_float(f16_packed), "numpy": packed_float_numpy(f16_packed)})
    measure("BGR -> RGBP_FLOAT (normalised)", bgr, "BGR", "RGBP_FLOAT", NORM,
            {"numpy": planar_numpy, "numpy in place": planar_numpy_inplace, **compositions_planar_cv})
    measure("NV12 -> RGBx (u8)", nv12, "NV12", "RGBx", {},
            {"cv2.cvtColor(YUV2RGBA_NV12, dst=)": lambda: cv2.cvtColor(nv12, cv2.COLOR_YUV2RGBA_NV12, dst=rgba_u8)})
    rgb_u8 = page_aligned((height, width, 3), np.uint8)
    measure("NV12 -> RGB (u8)", nv12, "NV12", "RGB", {},
            {"cv2.cvtColor(YUV2RGB_NV12, dst=)": lambda: cv2.cvtColor(nv12, cv2.COLOR_YUV2RGB_NV12, dst=rgb_u8)})
    measure("NV12 -> RGBx_BF16 (normalised)", nv12, "NV12", "RGBx_BF16", NORM,
            {"cv2.cvtColor + numpy in place + ml_dtypes": packed_float(bf16_packed, nv12, cv2.COLOR_YUV2RGBA_NV12)})

    # Camera formats (V4L2 YUYV, UYVY, I420): the same decoding as NV12, the packed rows and I420's planes read where they lie.
    # (Left out for an npu_zc without them: A/B runs against an older wheel.)
    yuyv = aligned(rng.integers(0, 256, (height, width, 2), dtype=np.uint8))
    i420 = aligned(nv12)
    try:
        layout.convert(yuyv[:2, :4], rgba_u8[:2, :4], "YUYV", "RGBx")
        camera_formats = True
    except ValueError:
        camera_formats = False
    for case_fmt, src, code in (("YUYV", yuyv, cv2.COLOR_YUV2RGBA_YUYV), ("UYVY", yuyv, cv2.COLOR_YUV2RGBA_UYVY),
                                ("I420", i420, cv2.COLOR_YUV2RGBA_I420)):
        if camera_formats:
            measure(f"{case_fmt} -> RGBx (u8)", src, case_fmt, "RGBx", {},
                    {f"cv2.cvtColor(YUV2RGBA_{case_fmt}, dst=)": cvt_color(src, code, rgba_u8)})
            code3 = getattr(cv2, f"COLOR_YUV2RGB_{case_fmt}")
            measure(f"{case_fmt} -> RGB (u8)", src, case_fmt, "RGB", {},
                    {f"cv2.cvtColor(YUV2RGB_{case_fmt}, dst=)": cvt_color(src, code3, rgb_u8)})
    if camera_formats:
        measure("YUYV -> RGBx_BF16 (normalised)", yuyv, "YUYV", "RGBx_BF16", NORM,
                {"cv2.cvtColor + numpy in place + ml_dtypes": packed_float(bf16_packed, yuyv, cv2.COLOR_YUV2RGBA_YUYV)})

    # 10-bit video (P010: HEVC Main10 decoders) and int8 model inputs. OpenCV has no 10-bit
    # decoding: the composition a user would write drops the low bits, then decodes NV12.
    # (Left out for an npu_zc without them.)
    if {"P010", "RGBx_I8"} <= set(layout.SOURCE_FORMATS) | set(layout.DESTINATION_FORMATS):
        p010 = aligned(rng.integers(0, 1 << 16, (height * 3 // 2, width), dtype=np.uint16))
        shifted, nv12_8 = np.empty_like(p010), np.empty(p010.shape, np.uint8)

        def p010_composition() -> None:
            np.right_shift(p010, 8, out=shifted)
            np.copyto(nv12_8, shifted, casting="unsafe")
            cv2.cvtColor(nv12_8, cv2.COLOR_YUV2RGBA_NV12, dst=rgba_u8)

        measure("P010 -> RGBx (u8)", p010, "P010", "RGBx", {}, {"p010 >> 8 (numpy) + cv2.cvtColor(YUV2RGBA_NV12)": p010_composition})
        quant: Normalisation = {**NORM, "quant_scale": 0.0187, "zero_point": -3}
        f32_work, i8_out = np.empty((height, width, 4), np.float32), np.empty((height, width, 4), np.int8)

        def quantised(src: np.ndarray, code: int) -> Callable[[], object]:
            def run() -> None:
                cv2.cvtColor(src, code, dst=rgba_u8)
                np.subtract(rgba_u8, mean4, out=f32_work)
                np.multiply(f32_work, inv4 / np.float32(0.0187), out=f32_work)
                np.rint(f32_work, out=f32_work)
                np.add(f32_work, np.float32(-3), out=f32_work)
                np.clip(f32_work, -128, 127, out=f32_work)
                np.copyto(i8_out, f32_work, casting="unsafe")

            return run

        measure("BGR -> RGBx_I8 (quantised)", bgr, "BGR", "RGBx_I8", quant,
                {"cv2.cvtColor + numpy in place": quantised(bgr, cv2.COLOR_BGR2RGBA)})
        measure("NV12 -> RGBx_I8 (quantised)", nv12, "NV12", "RGBx_I8", quant,
                {"cv2.cvtColor + numpy in place": quantised(nv12, cv2.COLOR_YUV2RGBA_NV12)})
        measure("P010 -> RGBx_I8 (quantised)", p010, "P010", "RGBx_I8", quant, {})

    # numpy-only figures for the targets stated against numpy
    # The opt-in fast rounding (16-bit arithmetic, within 1 level of the exact decoding), beside the same peers.
    try:
        layout.convert(nv12[:3, :4], rgba_u8[:2, :4], "NV12", "RGBx", rounding="fast")
        fast_rounding = True
    except TypeError:
        fast_rounding = False
    if fast_rounding:
        for case_fmt, src in (("NV12", nv12), ("I420", i420)):
            for dst_fmt, out, name in (("RGBx", rgba_u8, "RGBA"), ("RGB", rgb_u8, "RGB")):
                code = getattr(cv2, f"COLOR_YUV2{name}_{case_fmt}")
                measure(f"{case_fmt} -> {dst_fmt} (u8, fast rounding)", src, case_fmt, dst_fmt, {},
                        {f"cv2.cvtColor(YUV2{name}_{case_fmt}, dst=)":
                         cvt_color(src, code, out)}, rounding="fast")
    if not args.only:
        numpy_bf16 = time_ms(packed_float_numpy(bf16_packed), runs)
        numpy_planar = time_ms(planar_numpy, runs)

    print(f"npu_zc layout benchmark: {width}x{height}, threads={threads}, {'best' if args.stat == 'min' else 'median'} of {runs} runs, "
          f"SIMD {layout.simd_levels()[1]}, OpenCV {cv2.__version__}, numpy {np.__version__}")
    print()
    header = (f"| {'conversion':32} | {'npu_zc ms':>9} | {'memcpy ms':>9} | {'vs memcpy':>9} | {'best composition ms':>19} "
              f"| {'speed-up':>8} | {'EdgeFirst ms':>12} | {'vs EdgeFirst':>12} | best composition | npu_zc kernel |")
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for r in rows:
        comp = f"{r.composition:19.3f}" if r.composition is not None else " " * 19
        speed = f"{r.composition / r.ours:7.1f}x" if r.composition is not None else " " * 8
        ef = f"{r.edgefirst:12.3f} | {r.edgefirst / r.ours:11.2f}x" if r.edgefirst is not None else f"{'':12} | {'':12}"
        print(f"| {r.case:32} | {r.ours:9.3f} | {r.memcpy:9.3f} | {r.ours / r.memcpy:8.2f}x | {comp} | {speed} | {ef} | "
              f"{r.composition_name} | {r.kernel} |")
    print()
    if args.only:
        return  # a partial table: not recorded, no targets
    columns = ["conversion", "npu_zc ms", "memcpy ms", "npu_zc / memcpy", "best composition ms", "composition / npu_zc",
               "EdgeFirst ms", "EdgeFirst / npu_zc", "best composition", "npu_zc kernel"]
    table_rows = [[r.case, round(r.ours, 4), round(r.memcpy, 4), round(r.ours / r.memcpy, 3),
                   None if r.composition is None else round(r.composition, 4),
                   None if r.composition is None else round(r.composition / r.ours, 3),
                   None if r.edgefirst is None else round(r.edgefirst, 4),
                   None if r.edgefirst is None else round(r.edgefirst / r.ours, 3), r.composition_name, r.kernel] for r in rows]
    saved = results.save("bench_layout", [{
        "title": f"{width}x{height}, threads={threads}, {'best' if args.stat == 'min' else 'median'} of {runs} runs, "
                 f"SIMD {layout.simd_levels()[1]}",
        "note": f"OpenCV {cv2.__version__}, numpy {np.__version__}; npu_zc: a layout.Converter made once, EdgeFirst: "
                "its images made once; frames and destinations page-aligned (as the pipeline's buffers); ratios above 1 "
                "in the composition and EdgeFirst columns mean npu_zc is faster",
        "columns": columns, "rows": table_rows}], title="Layout conversions against memcpy, OpenCV and EdgeFirst",
        path=args.json)
    # One record: a second save to the same file used to replace this one (EdgeFirst's columns were lost).
    print(f"results: {saved}\n")

    by = {r.case: r for r in rows}
    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"
    u8, bf, pl, nv = (by["BGR -> RGBx (u8)"], by["BGR -> RGBx_BF16 (normalised)"],
                      by["BGR -> RGBP_FLOAT (normalised)"], by["NV12 -> RGBx (u8)"])
    print("targets (single thread, 1080p):")
    print(f"  BGR -> RGBx within 1.25x of memcpy: {u8.ours / u8.memcpy:.2f}x  {verdict(u8.ours <= 1.25 * u8.memcpy)}")
    print(f"  BGR -> RGBx_BF16 within 1.25x of memcpy: {bf.ours / bf.memcpy:.2f}x  {verdict(bf.ours <= 1.25 * bf.memcpy)}")
    print(f"  BGR -> RGBx_BF16 >= 8x faster than numpy + ml_dtypes ({numpy_bf16:.2f} ms): "
          f"{numpy_bf16 / bf.ours:.1f}x  {verdict(numpy_bf16 >= 8 * bf.ours)}")
    print(f"  BGR -> RGBP_FLOAT >= 4x faster than numpy ({numpy_planar:.2f} ms): "
          f"{numpy_planar / pl.ours:.1f}x  {verdict(numpy_planar >= 4 * pl.ours)}")
    assert nv.composition is not None
    print(f"  NV12 -> RGBx at least as fast as cv2.cvtColor ({nv.composition:.3f} ms): "
          f"{nv.composition / nv.ours:.2f}x  {verdict(nv.ours <= nv.composition)}")


def memcpy_limit_ms(nbytes: int, threads: int, runs: int) -> float | None:
    """The machine's limit on `threads` threads: memcpy of `nbytes`, each
    thread copying its part 40 times after starting together (in Rust, so
    without the cost of handing out work that a conversion pays). None with
    a wheel without it."""
    seconds: Callable[[int, int, int], float] | None = (
        getattr(getattr(_core, "_bench", None), "memcpy_seconds", None) or getattr(_core, "_memcpy_seconds", None)
    )
    if seconds is None:
        return None
    return min(seconds(nbytes, threads, 40) for _ in range(max(3, runs // 10))) * 1e3


def threads_sweep(counts: list[int], sizes: list[str], runs: int, rounds: int, path: str | None = None) -> None:
    """Per thread count: a Converter (the per-frame API: arguments checked
    once), cv2.cvtColor (cv2.setNumThreads) in alternating blocks with it,
    and the memcpy limit of the same bytes on as many threads, in one run."""
    print(f"npu_zc layout thread sweep: {'min' if timing.STAT is min else 'median'} of {runs} runs, "
          f"SIMD {layout.simd_levels()[1]}, OpenCV {cv2.__version__} (cv2.getNumberOfCPUs() = {cv2.getNumberOfCPUs()}), "
          f"numpy {np.__version__}")
    print("limit: memcpy of (read + written bytes) / 2, each of n threads copying its part repeatedly "
          "(the machine's bandwidth without handing out work). x1: speed-up over one thread.")
    tables: list[dict[str, object]] = []
    for size in sizes:
        width, height = (int(v) for v in size.lower().split("x"))
        rng = np.random.default_rng(0)
        bgr = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        nv12 = rng.integers(0, 256, (height * 3 // 2, width), dtype=np.uint8)
        rgba = np.empty((height, width, 4), np.uint8)
        cases = [("BGR -> RGBx", bgr, "BGR", cv2.COLOR_BGR2RGBA), ("NV12 -> RGBx", nv12, "NV12", cv2.COLOR_YUV2RGBA_NV12)]
        for case, src, src_fmt, code in cases:
            moved = src.nbytes + rgba.nbytes
            print()
            print(f"{case}, {width}x{height} ({moved / 1e6:.1f} MB moved)")
            header = (f"| {'threads':>7} | {'npu_zc ms':>9} | {'x1':>5} | {'cv2 ms':>9} | {'x1':>5} | "
                      f"{'limit ms':>9} | {'npu_zc/cv2':>10} | {'npu_zc/limit':>12} |")
            print(header)
            print("|" + "|".join("-" * len(c) for c in header.split("|")[1:-1]) + "|")
            first: tuple[float, float] | None = None
            table: list[list[object]] = []
            tables.append({"title": f"{case}, {width}x{height}, by thread count",
                           "columns": ["threads", "npu_zc ms", "x1", "cv2 ms", "cv2 x1", "limit ms", "npu_zc / cv2",
                                       "npu_zc / limit"], "rows": table})
            for n in counts:
                cv2.setNumThreads(n)
                to_rgbx = layout.Converter(src_fmt, "RGBx", width, height, threads=n)
                ours, theirs = paired_ms(lambda: to_rgbx(src, rgba), lambda: cv2.cvtColor(src, code, dst=rgba),
                                         runs, rounds)
                limit = memcpy_limit_ms(moved // 2, n, runs)
                first = first or (ours, theirs)
                limit_cells = (f"{limit:9.3f} | {ours / theirs:9.2f}x | {ours / limit:11.2f}x" if limit else
                               f"{'-':>9} | {ours / theirs:9.2f}x | {'-':>12}")
                print(f"| {n:7} | {ours:9.3f} | {first[0] / ours:4.1f}x | {theirs:9.3f} | {first[1] / theirs:4.1f}x | "
                      f"{limit_cells} |")
                table.append([n, round(ours, 3), f"{first[0] / ours:.1f}x", round(theirs, 3), f"{first[1] / theirs:.1f}x",
                              round(limit, 3) if limit else None, f"{ours / theirs:.2f}x",
                              f"{ours / limit:.2f}x" if limit else None])
    for entry in tables:
        entry["note"] = (f"{'min' if timing.STAT is min else 'median'} of {runs} runs, npu_zc (a Converter) and cv2.cvtColor "
                     f"(cv2.setNumThreads(n), OpenCV {cv2.__version__}) in alternating blocks; limit = memcpy of "
                     "(read + written bytes) / 2, each of n threads copying its part; x1 = speed-up over one thread")
    print(f"\nresults: {results.save('bench_layout_threads', tables, title='Layout engine: scaling over threads', path=path)}")


if __name__ == "__main__":
    main()
