"""Frame to model input in one pass: npu_zc.layout.convert resizing (scale,
fit, colour, normalise, cast, pack) against the best composition a user
would write with OpenCV + numpy + ml_dtypes, all in the same run.

    python benches/bench_resize.py                 # one thread
    python benches/bench_resize.py --simd avx2     # the AVX2 path (Intel Core Ultra has no AVX-512)
    python benches/bench_resize.py --runs 100 --stat median
    python benches/bench_resize.py --cold 512 --stat median   # each call's frame from memory, as a decoder leaves it

For each case: npu_zc on one thread (a Converter, as the pipeline calls it:
arguments checked once); the composition with OpenCV on one
thread (cv2.setNumThreads(1)), its buffers allocated once, writing into them
(``dst=``); OpenCV's resize alone; and "read": a memcpy of the source bytes
the resize must read (the rows it samples, every byte of those rows: a
bilinear shrink touches every cache line of a row it samples), which reads
them once and writes them once, an upper bound of the time to read them.
npu_zc and the composition are timed in alternating blocks (--rounds) so that
a burst of other work on the machine falls on both. Every timing is the best
(or median) of --runs calls after a warm-up.

By default every call reads the same source, which stays in the caches after
the first. In a pipeline each frame is new: a decoder wrote it a while ago,
on another core. ``--cold MB`` makes each call read the next of enough
copies of the source to fill MB megabytes (more than the last-level cache),
for npu_zc, the composition, ``cv2.resize`` of the source and the read alike,
so every case starts from memory.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Callable, TypedDict

import cv2
import ml_dtypes
import numpy as np

from npu_zc import layout
import results
from timing import memcpy_of, paired_ms, time_ms, use_stat


class Geometry(TypedDict, total=False):
    """The Converter's geometry arguments a case gives."""

    interpolation: str
    fit: str
    fill: int
    roi: tuple[int, int, int, int]


class Normalisation(TypedDict, total=False):
    """The Converter's normalisation arguments a case gives."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]


MEAN = np.array([123.675, 116.28, 103.53], np.float32)
STD = np.array([58.395, 57.12, 57.375], np.float32)
NORM: Normalisation = dict(mean=tuple(MEAN.tolist()), scale=tuple(STD.tolist()))
MEAN4 = np.append(MEAN, 0).astype(np.float32)
INV4 = np.append(1 / STD, 0).astype(np.float32)
def sampled_rows(interpolation: str, src_h: int, dst_h: int) -> int:
    """Distinct source rows a resize reads (OpenCV's bilinear positions; a
    row of weight 0 is not read)."""
    if interpolation == "area":
        return src_h
    scale = src_h / dst_h
    rows = set()
    for d in range(dst_h):
        f = np.float32((d + 0.5) * scale - 0.5)
        s = int(np.floor(f))
        w1 = round(float((f - np.float32(s)) * np.float32(2048)))
        w0 = 2048 - w1
        rows.update({min(max(s + k, 0), src_h - 1) for k, w in ((0, w0), (1, w1)) if w})
    return len(rows)


class Cycle:
    """A case's sources, one per call in turn: ``frame`` alone, or with copies of it filling ``megabytes``."""

    def __init__(self, frame: np.ndarray, megabytes: int) -> None:
        count = max(1, megabytes * 2**20 // frame.nbytes)
        self.frames: list[np.ndarray] = [frame, *(frame.copy() for _ in range(count - 1))]
        self.next = 0

    def __call__(self) -> np.ndarray:
        frame = self.frames[self.next]
        self.next = (self.next + 1) % len(self.frames)
        return frame

    def read(self, nbytes: int) -> Callable[[], object]:
        """A copy of ``nbytes`` of the next source (read ``nbytes``, write ``nbytes``)."""
        if len(self.frames) == 1:
            return memcpy_of(nbytes)
        out = np.empty(nbytes, np.uint8)
        return lambda: np.copyto(out, self().reshape(-1)[:nbytes])


@dataclass
class Row:
    case: str
    ours: float
    composition: float
    resize_alone: float
    read: float
    kernel: str


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=60, help="timed calls per measurement (default 60)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating blocks (default 5)")
    parser.add_argument("--stat", choices=("min", "median"), default="min", help="best or median of the runs (default: best)")
    parser.add_argument("--simd", default=None, help="npu_zc's code path, e.g. avx2 (default: the best this CPU has)")
    parser.add_argument("--cold", type=int, default=0, metavar="MB",
                        help="each call reads the next of copies of its source filling MB megabytes (default 0: one source, cached)")
    parser.add_argument("--json", help="where to write the results (default benches/results/)")
    args = parser.parse_args()
    if args.simd:  # as NPU_ZC_SIMD=... would: the results name the level (their own file, beside the best level's)
        os.environ["NPU_ZC_SIMD"] = args.simd
    use_stat(args.stat)
    runs = args.runs
    cv2.setNumThreads(1)
    rng = np.random.default_rng(0)
    bgr = Cycle(rng.integers(0, 256, (1080, 1920, 3), dtype=np.uint8), args.cold)
    nv12 = Cycle(rng.integers(0, 256, (1620, 1920), dtype=np.uint8), args.cold)
    nv12_4k = Cycle(rng.integers(0, 256, (3240, 3840), dtype=np.uint8), args.cold)
    rows: list[Row] = []

    # Buffers of the compositions, allocated once.
    small_bgr = np.empty((224, 224, 3), np.uint8)
    small_rgba = np.empty((224, 224, 4), np.uint8)
    small_f32 = np.empty((224, 224, 4), np.float32)
    rgb_1080 = np.empty((1080, 1920, 3), np.uint8)
    rgb_4k = np.empty((2160, 3840, 3), np.uint8)
    small_rgb = np.empty((224, 224, 3), np.uint8)
    boxed = np.empty((640, 640, 4), np.uint8)
    rgba_1080 = np.empty((1080, 1920, 4), np.uint8)

    def normalise_bf16(rgba: np.ndarray, out: np.ndarray) -> None:
        np.subtract(rgba, MEAN4, out=small_f32, dtype=np.float32)
        np.multiply(small_f32, INV4, out=small_f32)
        out[...] = small_f32  # the ml_dtypes cast

    def case(name: str, src: Cycle, fmt: str, dst: np.ndarray, dst_fmt: str, geometry: Geometry, norm: Normalisation,
             composition: Callable[[], object], resize_alone: Callable[[], object], read_bytes: int) -> None:
        # A Converter, as the pipeline calls it: arguments checked once.
        shape = src.frames[0].shape
        src_size = (shape[1], shape[0] * 2 // 3 if fmt in ("NV12", "I420") else shape[0])
        ours = layout.Converter(fmt, dst_fmt, dst.shape[1], dst.shape[0], src_size=src_size, threads=1, simd=args.simd,
                                **geometry, **norm)
        t_ours, t_comp = paired_ms(lambda: ours(src(), dst), composition, runs, args.rounds)
        rows.append(Row(name, t_ours, t_comp, time_ms(resize_alone, runs), time_ms(src.read(read_bytes), runs), ours.kernel))

    # 1. 1080p BGR -> 224x224 RGBx_BF16 normalised, bilinear and area.
    for interpolation, flag in (("bilinear", cv2.INTER_LINEAR), ("area", cv2.INTER_AREA)):
        out = np.empty((224, 224, 4), ml_dtypes.bfloat16)

        def composition(flag: int = flag, out: np.ndarray = out) -> None:
            cv2.resize(bgr(), (224, 224), dst=small_bgr, interpolation=flag)
            cv2.cvtColor(small_bgr, cv2.COLOR_BGR2RGBA, dst=small_rgba)
            normalise_bf16(small_rgba, out)

        def resize_alone(flag: int = flag) -> object:
            return cv2.resize(bgr(), (224, 224), dst=small_bgr, interpolation=flag)

        case(f"1080p BGR -> 224 RGBx_BF16 norm, {interpolation}", bgr, "BGR", out, "RGBx_BF16",
             dict(interpolation=interpolation), NORM, composition, resize_alone,
             sampled_rows(interpolation, 1080, 224) * 1920 * 3)

    # 2. 1080p NV12 -> 640x640 letterboxed RGBx u8 (YOLO: fill 114).
    out = np.empty((640, 640, 4), np.uint8)

    def letterbox() -> None:
        cv2.cvtColor(nv12(), cv2.COLOR_YUV2RGBA_NV12, dst=rgba_1080)
        boxed[:140] = 114
        boxed[500:] = 114
        cv2.resize(rgba_1080, (640, 360), dst=boxed[140:500], interpolation=cv2.INTER_LINEAR)

    sampled = sampled_rows("bilinear", 1080, 360)
    case("1080p NV12 -> 640 letterbox RGBx u8", nv12, "NV12", out, "RGBx", dict(fit="letterbox", fill=114), {},
         letterbox, lambda: cv2.resize(rgba_1080, (640, 360), dst=boxed[140:500], interpolation=cv2.INTER_LINEAR),
         sampled * 1920 + (sampled + 1) // 2 * 1920)

    # 3. 1080p I420 (a software decoder's frame) -> 224x224 RGBx u8, the centre square cropped (a classifier's input).
    i420 = Cycle(rng.integers(0, 256, (1620, 1920), dtype=np.uint8), args.cold)
    out = np.empty((224, 224, 4), np.uint8)
    left, top, side = 488, 68, 944
    centre = rgb_1080[top : top + side, left : left + side]

    def crop_composition() -> None:
        cv2.cvtColor(i420(), cv2.COLOR_YUV2RGB_I420, dst=rgb_1080)
        cv2.resize(centre, (224, 224), dst=small_rgb, interpolation=cv2.INTER_LINEAR)
        cv2.cvtColor(small_rgb, cv2.COLOR_RGB2RGBA, dst=out)

    sampled = sampled_rows("bilinear", side, 224)
    case("1080p I420 -> 224 RGBx u8, centre crop", i420, "I420", out, "RGBx", dict(roi=(left, top, side, side)), {},
         crop_composition, lambda: cv2.resize(centre, (224, 224), dst=small_rgb, interpolation=cv2.INTER_LINEAR),
         sampled * side + sampled * side // 2)

    # 4. 4K NV12 -> 224x224 RGBx_BF16 normalised (bilinear).
    out = np.empty((224, 224, 4), ml_dtypes.bfloat16)

    def nv12_4k_composition() -> None:
        cv2.cvtColor(nv12_4k(), cv2.COLOR_YUV2RGB_NV12, dst=rgb_4k)
        cv2.resize(rgb_4k, (224, 224), dst=small_rgb, interpolation=cv2.INTER_LINEAR)
        cv2.cvtColor(small_rgb, cv2.COLOR_RGB2RGBA, dst=small_rgba)
        normalise_bf16(small_rgba, out)

    sampled = sampled_rows("bilinear", 2160, 224)
    case("4K NV12 -> 224 RGBx_BF16 norm, bilinear", nv12_4k, "NV12", out, "RGBx_BF16", {}, NORM,
         nv12_4k_composition, lambda: cv2.resize(rgb_4k, (224, 224), dst=small_rgb, interpolation=cv2.INTER_LINEAR),
         sampled * 3840 + sampled * 3840 // 2)

    # 5. 1080p NV12 -> 960x540 RGBx u8: a halving (OpenCV's bilinear at exactly half is the 2x2 mean), every pixel read.
    out = np.empty((540, 960, 4), np.uint8)

    def halving() -> None:
        cv2.cvtColor(nv12(), cv2.COLOR_YUV2RGBA_NV12, dst=rgba_1080)
        cv2.resize(rgba_1080, (960, 540), dst=out, interpolation=cv2.INTER_LINEAR)

    case("1080p NV12 -> 960x540 RGBx u8, a halving", nv12, "NV12", out, "RGBx", {}, {}, halving,
         lambda: cv2.resize(rgba_1080, (960, 540), dst=out, interpolation=cv2.INTER_LINEAR), 1920 * 1080 * 3 // 2)

    # 6. 1080p NV12 -> 640x360 RGBx u8, area: an integer shrink (3x3 block means), every pixel read.
    out = np.empty((360, 640, 4), np.uint8)

    def blocks() -> None:
        cv2.cvtColor(nv12(), cv2.COLOR_YUV2RGBA_NV12, dst=rgba_1080)
        cv2.resize(rgba_1080, (640, 360), dst=out, interpolation=cv2.INTER_AREA)

    case("1080p NV12 -> 640x360 RGBx u8, area (3x3)", nv12, "NV12", out, "RGBx", dict(interpolation="area"), {}, blocks,
         lambda: cv2.resize(rgba_1080, (640, 360), dst=out, interpolation=cv2.INTER_AREA), 1920 * 1080 * 3 // 2)

    # 7-8. 1080p NV12 -> 1280x720 and 640x640 RGBx u8, bilinear: moderate shrinks, every source row read (the x pass's
    # long steps; a detector's input stretched).
    for width, height in ((1280, 720), (640, 640)):
        out = np.empty((height, width, 4), np.uint8)

        def resize_rgba(out: np.ndarray = out) -> object:
            return cv2.resize(rgba_1080, out.shape[1::-1], dst=out, interpolation=cv2.INTER_LINEAR)

        def moderate(resize: Callable[[], object] = resize_rgba) -> None:
            cv2.cvtColor(nv12(), cv2.COLOR_YUV2RGBA_NV12, dst=rgba_1080)
            resize()

        case(f"1080p NV12 -> {width}x{height} RGBx u8, bilinear", nv12, "NV12", out, "RGBx", {}, {}, moderate,
             resize_rgba, sampled_rows("bilinear", 1080, height) * 1920 * 3 // 2)

    # 9. 1080p BGR -> 640x640 RGBx u8, bilinear: a packed frame (OpenCV's) stretched into a detector's input.
    out, bgr_640 = np.empty((640, 640, 4), np.uint8), np.empty((640, 640, 3), np.uint8)

    def bgr_moderate() -> None:
        cv2.resize(bgr(), (640, 640), dst=bgr_640, interpolation=cv2.INTER_LINEAR)
        cv2.cvtColor(bgr_640, cv2.COLOR_BGR2RGBA, dst=out)

    case("1080p BGR -> 640x640 RGBx u8, bilinear", bgr, "BGR", out, "RGBx", {}, {}, bgr_moderate,
         lambda: cv2.resize(bgr(), (640, 640), dst=bgr_640, interpolation=cv2.INTER_LINEAR),
         sampled_rows("bilinear", 1080, 640) * 1920 * 3)

    # 10. 1080p BGR -> 960x540 RGBx u8: a packed frame halved (3-byte pixels' pair sums).
    out, bgr_540 = np.empty((540, 960, 4), np.uint8), np.empty((540, 960, 3), np.uint8)

    def bgr_halving() -> None:
        cv2.resize(bgr(), (960, 540), dst=bgr_540, interpolation=cv2.INTER_LINEAR)
        cv2.cvtColor(bgr_540, cv2.COLOR_BGR2RGBA, dst=out)

    case("1080p BGR -> 960x540 RGBx u8, a halving", bgr, "BGR", out, "RGBx", {}, {}, bgr_halving,
         lambda: cv2.resize(bgr(), (960, 540), dst=bgr_540, interpolation=cv2.INTER_LINEAR), 1920 * 1080 * 3)

    # 11. 1080p BGR -> 640x360 RGBx u8, area: a packed frame's integer shrink (3x3 block means of 3-byte pixels).
    out, bgr_360 = np.empty((360, 640, 4), np.uint8), np.empty((360, 640, 3), np.uint8)

    def bgr_blocks() -> None:
        cv2.resize(bgr(), (640, 360), dst=bgr_360, interpolation=cv2.INTER_AREA)
        cv2.cvtColor(bgr_360, cv2.COLOR_BGR2RGBA, dst=out)

    case("1080p BGR -> 640x360 RGBx u8, area (3x3)", bgr, "BGR", out, "RGBx", dict(interpolation="area"), {},
         bgr_blocks, lambda: cv2.resize(bgr(), (640, 360), dst=bgr_360, interpolation=cv2.INTER_AREA), 1920 * 1080 * 3)
    del rgb_1080

    copies = [len(c.frames) for c in (bgr, nv12, i420, nv12_4k)]
    cold = f", each call's source the next of {min(copies)}-{max(copies)} copies ({args.cold} MB)" if args.cold else ""
    print(f"npu_zc resize benchmark: one thread, {'best' if args.stat == 'min' else 'median'} of {runs} runs, "
          f"SIMD {args.simd or layout.simd_levels()[1]}{cold}, OpenCV {cv2.__version__} (1 thread), numpy {np.__version__}")
    print()
    header = (f"| {'case':42} | {'npu_zc ms':>9} | {'composition ms':>14} | {'speed-up':>8} | {'cv2.resize alone ms':>19} "
              f"| {'read ms':>7} | {'vs read':>7} | npu_zc kernels |")
    print(header)
    print("|" + "|".join("-" * len(c) for c in header.split("|")[1:-1]) + "|")
    for r in rows:
        print(f"| {r.case:42} | {r.ours:9.3f} | {r.composition:14.3f} | {r.composition / r.ours:7.1f}x | {r.resize_alone:19.3f} "
              f"| {r.read:7.3f} | {r.ours / r.read:6.2f}x | {r.kernel} |")
    print()
    print("targets: each case >= 3x faster than the composition; faster than cv2.resize alone")
    for r in rows:
        ok = r.composition >= 3 * r.ours
        print(f"  {r.case}: {r.composition / r.ours:.1f}x the composition ({'met' if ok else 'MISSED'}), "
              f"{r.resize_alone / r.ours:.2f}x cv2.resize alone")
    saved = results.save("bench_resize", [{
        "title": f"Frame to model input, one thread, SIMD {args.simd or layout.simd_levels()[1]}"
                 + (", each frame from memory" if args.cold else ""),
        "note": f"{'best' if args.stat == 'min' else 'median'} of {runs} runs in alternating blocks; composition = "
                f"cv2.resize + cvtColor + numpy + ml_dtypes (OpenCV {cv2.__version__}, 1 thread); read = memcpy of the "
                "source rows the resize samples"
                + (f"; each call's source the next of copies filling {args.cold} MB (from memory, as a frame a decoder "
                   "wrote a while ago), for the read as many bytes of it in one run; cv2.resize alone resizes the source "
                   "(BGR) or the composition's full-size intermediate, which the call before it wrote" if args.cold else ""),
        "columns": ["case", "npu_zc ms", "composition ms", "speed-up", "cv2.resize alone ms", "read ms", "npu_zc / read"],
        "rows": [[r.case, round(r.ours, 3), round(r.composition, 3), f"{r.composition / r.ours:.1f}x",
                  round(r.resize_alone, 3), round(r.read, 3), f"{r.ours / r.read:.2f}x"] for r in rows],
    }], title="Resize: frame to model input in one pass",
       path=args.json or (results.RESULTS / f"bench_resize--{results.machine()['slug']}--cold.json" if args.cold else None))
    print(f"\nresults: {saved}")


if __name__ == "__main__":
    main()
