#!/usr/bin/env python3
"""A soak: a camera stream and a file stream through the pipeline while faults
are injected, with the process's resources sampled.

Runs where vivid and the DMA-BUF heaps exist, i.e. in the test VM:

    scripts/vm-run.sh .venv/bin/python scripts/soak.py --seconds 60      # what CI runs
    VM_TIMEOUT=2400 scripts/vm-run.sh .venv/bin/python scripts/soak.py --seconds 1800

Two streams run for the whole soak, each on its own pipeline (a tiny model,
``colour_model`` of ``tests/churn_helpers.py``, so that even the emulated CPU
of the VM infers many frames a second):

* camera: vivid's single-planar capture node through ``run_camera``, reopened
  whenever the camera goes away;
* file: a folder of photos through ``run_stream``, pass after pass; every pass
  must deliver every frame, in order, with the prediction the photo gives
  (nothing lost in file mode).

Every ``--fault-every`` seconds the next fault of this rotation is injected:

* ``unbind``: vivid's platform device unbound through sysfs, then bound again
  (the camera stream must see a CameraError, then stream again);
* ``producer``: a producer process (forked) passing pooled buffers over a
  socket, killed (SIGKILL) once it has sent one: the frames it queued arrive,
  then a PeerError;
* ``garbage``: a peer that sends random bytes with a pipe's fd, then a header
  announcing more fds than it sends (PeerError);
* ``aliasing``: a conversion whose destination is the source's own memory,
  through two mappings of one buffer (AliasingError).

Every second the process's RSS, open fds, memory mappings and threads are
sampled. At the end: each fault must have raised an ``npu_zc.Error`` (never
another exception), the file stream must have lost nothing, and the
resources must be flat: the median of the last quarter of the samples may
exceed that of the first quarter (after a warm-up) by at most RSS 24 MiB,
4 fds, 16 mappings, 2 threads. The slopes (least squares, per minute) are
printed and written with every sample to ``--out`` (default:
``$NPU_ZC_VM_OUT/soak.json``). Exit status 0 when all holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from churn_helpers import colour_model  # noqa: E402

import npu_zc  # noqa: E402
from npu_zc.pipeline import FrameSource, Pipeline, sample_photo  # noqa: E402
from npu_zc.pipeline.camera import run_camera  # noqa: E402
from npu_zc.pipeline.single_stream import run_stream  # noqa: E402
from npu_zc.runtime import CompileOptions  # noqa: E402

VIVID = Path("/sys/bus/platform/drivers/vivid")
CAMERA_NAME = "vivid-000-vid-cap"
LIMITS = {"rss_mib": 24.0, "fds": 4, "maps": 16, "threads": 2}
"""How far the last quarter's median may sit above the first quarter's (noise, not growth)."""
PHOTOS = ("chelsea", "coffee", "astronaut", "rocket", "cat")


# --- what is sampled -----------------------------------------------------------


def sample() -> dict[str, float]:
    """This process's RSS (MiB), open fds, memory mappings and threads, and when."""
    own = sample_process("self")
    assert own is not None
    return {"t": time.monotonic(), **own}


def children() -> list[int]:
    """The pids of this process's child processes (decoding workers, a broker)."""
    me = str(os.getpid())
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:  # ended meanwhile
                continue
            if stat.rpartition(")")[2].split()[1] == me:
                pids.append(int(pid))
    return sorted(pids)


def sample_process(pid: int | str) -> dict[str, float] | None:
    """A process's RSS (MiB), open fds, memory mappings and threads; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        with open(f"/proc/{pid}/maps") as maps:
            mappings = sum(1 for _ in maps)
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    return {"rss_mib": int(fields["VmRSS"].split()[0]) / 1024, "fds": fds, "maps": mappings,
            "threads": int(fields["Threads"])}  # fmt: skip


def trimmer() -> Any:
    """glibc's ``malloc_trim``, which hands its free memory back so that the RSS sampled next is the memory in use:
    glibc keeps what threads freed in their arenas, which streams coming and going churn. None elsewhere (musl)."""
    return getattr(ctypes.CDLL(None), "malloc_trim", None)  # the C library this process already has


def trimmed_sample(malloc_trim: Any) -> dict[str, float]:
    """:func:`sample` with the RSS read after ``malloc_trim(0)`` (see :func:`trimmer`), the RSS as it was beside as
    ``rss_untrimmed_mib``."""
    untrimmed = sample()["rss_mib"]
    if malloc_trim is not None:
        malloc_trim(0)
    return {**sample(), "rss_untrimmed_mib": untrimmed}


def churn_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    """The flags of a soak that churns streams (``--names`` taken in turn, ``--keep`` running at once), its figures
    written to ``name``.json in the temporary folder by default."""
    from npu_zc.cli.arguments import positive, seconds

    parser.add_argument("--seconds", type=seconds(), default=60, help="how long (default 60; 1800 by hand)")
    parser.add_argument("--names", type=positive, default=6, help="stream names, reused in turn (default 6)")
    parser.add_argument("--keep", type=positive, default=3, help="streams running at once (default 3)")
    parser.add_argument("--warmup", type=seconds(zero=True), default=None,
                        help="seconds left out of the comparison (default: a sixth)")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / f"{name}.json")


def warmup_of(parser: argparse.ArgumentParser, args: argparse.Namespace) -> float:
    """Seconds at the start left out of the comparison: ``--warmup``, or a sixth of the soak; refused (argparse's
    exit status 2) where it would leave nothing to compare."""
    if args.warmup is not None and args.warmup >= args.seconds:
        parser.error(f"--warmup ({args.warmup:g} s) must be shorter than --seconds ({args.seconds:g} s): "
                     "nothing would be left to compare")
    return float(args.seconds / 6 if args.warmup is None else args.warmup)


CHURN_STOP_S = 120.0
"""How long a churn may take to notice its stop and end (a REST call or a stream's removal in flight)."""


Sample = dict[str, float]


def sample_beside(churn: Callable[[], None], stop: threading.Event, seconds: float, take: Callable[[], Sample | None],
                  problem: Callable[[str], None]) -> list[Sample]:
    """``churn`` on a thread of its own, and a sample taken by ``take`` every second beside it, until ``seconds``
    pass, the churn ends, or ``take`` returns None (a finding it said); then ``stop`` is set and the churn waited
    for (up to :data:`CHURN_STOP_S`, else a problem). Returns the samples."""
    samples: list[Sample] = []
    deadline = time.monotonic() + seconds
    churner = threading.Thread(target=churn, name="soak-churn", daemon=True)
    churner.start()
    try:
        while time.monotonic() < deadline and churner.is_alive():
            taken = take()
            if taken is None:
                break
            samples.append(taken)
            time.sleep(1.0)
    finally:
        stop.set()
        churner.join(timeout=CHURN_STOP_S)
        if churner.is_alive():
            problem(f"the churn did not stop within {CHURN_STOP_S:g} s")
    return samples


def save(out: Path, name: str, result: dict[str, Any]) -> None:
    """A soak's figures and samples as JSON (a folder that cannot be written is said, not raised: the verdict
    still comes)."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))
    except OSError as exc:
        print(f"{name}: cannot write {out}: {exc}", file=sys.stderr)


def slope_per_minute(samples: list[dict[str, float]], key: str) -> float:
    if len(samples) < 2:
        return 0.0
    t = np.array([s["t"] for s in samples]) / 60
    y = np.array([s[key] for s in samples])
    return float(np.polyfit(t - t[0], y, 1)[0])


def resources_verdict(
    samples: list[dict[str, float]], since: float, limits: dict[str, float], also: tuple[str, ...] = ()
) -> tuple[dict[str, float], dict[str, float], list[str]]:
    """Over the samples from ``since`` on: each resource's growth (the last quarter's median over the first
    quarter's), its least-squares slope a minute, and a sentence for each that grew past its limit; the keys in
    ``also`` are measured, not judged."""
    steady = [s for s in samples if s["t"] >= since]
    keys = (*limits, *also)
    if len(steady) < 2:  # a soak that compared nothing must not pass
        nothing = dict.fromkeys(keys, 0.0)
        return nothing, dict(nothing), [f"{len(steady)} sample(s) after the warm-up: too few to judge the resources "
                                        "(a longer soak, or a shorter --warmup)"]  # fmt: skip
    quarter = max(1, len(steady) // 4)
    growth = {
        key: statistics.median(s[key] for s in steady[-quarter:]) - statistics.median(s[key] for s in steady[:quarter])
        for key in keys
    }  # fmt: skip
    slopes = {key: slope_per_minute(steady, key) for key in keys}
    problems = [f"{key} grew by {growth[key]:.1f} (limit {limits[key]})" for key in limits if growth[key] > limits[key]]
    return growth, slopes, problems


def report(name: str, growth: dict[str, float], slopes: dict[str, float], problems: list[str]) -> int:
    """Prints the resources' figures and every problem; the exit status: 0 when there is none."""
    print("  slopes / minute: " + ", ".join(f"{k} {v:+.2f}" for k, v in slopes.items()))
    print("  growth (last quarter - first quarter, medians): " + ", ".join(f"{k} {v:+.1f}" for k, v in growth.items()))
    for p in problems:
        print(f"  PROBLEM: {p}")
    print(f"{name}: " + ("passed" if not problems else "FAILED"))
    return 0 if not problems else 1


def conclude(name: str, out: Path, samples: list[dict[str, float]], since: float, limits: dict[str, float],
             problems: list[str], figures: dict[str, Any], summary: str, also: tuple[str, ...] = ()) -> int:
    """A soak's end: the resources' verdict added to ``problems``, every figure and sample saved to ``out``, the
    ``summary`` and the report printed; the exit status."""
    growth, slopes, grown = resources_verdict(samples, since, limits, also)
    problems = [*problems, *grown]
    save(out, name, {**figures, "growth": growth, "limits": limits, "slopes_per_minute": slopes, "samples": samples,
                     "problems": problems})  # fmt: skip
    print(summary)
    return report(name, growth, slopes, problems)


# --- the model and the photos --------------------------------------------------


def write_photos(folder: Path) -> list[str]:
    import cv2

    names = []
    for i, name in enumerate(PHOTOS):
        path = folder / f"{i:02d}-{name}.png"
        cv2.imwrite(str(path), cv2.resize(sample_photo(name), (96, 72), interpolation=cv2.INTER_AREA))
        names.append(path.name)
    return names


# --- the two streams -------------------------------------------------------------


@dataclass
class Stream:
    name: str
    frames: int = 0
    passes: int = 0
    typed_errors: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def typed(self, exc: BaseException) -> None:
        kind = type(exc).__name__
        self.typed_errors[kind] = self.typed_errors.get(kind, 0) + 1

    def failed(self, what: str) -> None:
        self.failures.append(what)
        print(f"soak: {self.name}: {what}", file=sys.stderr, flush=True)


def camera_node() -> str | None:
    for name_file in Path("/sys/class/video4linux").glob("*/name"):
        try:
            if name_file.read_text().strip() == CAMERA_NAME:
                return f"/dev/{name_file.parent.name}"
        except OSError:  # the node went away while we looked (an unbind)
            continue
    return None


def camera_loop(pipeline: Pipeline, stream: Stream, stop: threading.Event) -> None:
    try:
        _camera_loop(pipeline, stream, stop)
    except BaseException as exc:  # the thread must not die unseen
        stream.failed(f"the camera thread died: {type(exc).__name__}: {exc}")


def _camera_loop(pipeline: Pipeline, stream: Stream, stop: threading.Event) -> None:
    while not stop.is_set():
        node = camera_node()
        if node is None:  # unbound just now: it comes back
            time.sleep(0.1)
            continue
        try:
            with npu_zc.Camera(node, 640, 480, "YUYV", buffers=3, timeout=2.0) as camera:
                while not stop.is_set():
                    report = run_camera(pipeline, camera, frames=10, progress=False, keep_results=False)
                    stream.frames += report.frames
        except npu_zc.Error as exc:  # the camera went away (or was not back yet): typed, as it must be
            stream.typed(exc)
            time.sleep(0.1)
        except Exception as exc:  # noqa: BLE001 - any other exception is what the soak is looking for
            stream.failed(f"untyped {type(exc).__name__}: {exc}")
            time.sleep(0.5)


def file_loop(pipeline: Pipeline, folder: Path, expected: list[tuple[str, Any]], stream: Stream, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            report = run_stream(pipeline, FrameSource(folder), progress=False)
        except Exception as exc:  # noqa: BLE001 - nothing may fail in file mode
            stream.failed(f"{type(exc).__name__}: {exc}")
            time.sleep(0.5)
            continue
        got = [(r.name, _top(r.prediction)) for r in report.results]
        if got != expected:
            stream.failed(f"pass {stream.passes}: expected {expected}, got {got}")
        stream.frames += report.frames
        stream.passes += 1


def _top(prediction: Any) -> Any:
    return prediction[0].index if prediction else None


# --- the faults ------------------------------------------------------------------


@dataclass
class Fault:
    name: str
    injected: int = 0
    typed: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    untyped: list[str] = field(default_factory=list)

    def outcome(self, what: str) -> None:
        self.outcomes[what] = self.outcomes.get(what, 0) + 1


def expect_typed(fault: Fault, action: Callable[[], Any], *, expected: type[BaseException] = npu_zc.Error) -> None:
    fault.injected += 1
    try:
        action()
        fault.outcome("no error")
    except expected as exc:
        fault.typed += 1
        fault.outcome(type(exc).__name__)
    except Exception as exc:  # noqa: BLE001
        fault.untyped.append(f"{type(exc).__name__}: {exc}")
        fault.outcome(f"untyped {type(exc).__name__}")


def unbind_vivid(fault: Fault, camera: Stream) -> None:
    fault.injected += 1
    before = sum(camera.typed_errors.values())
    (VIVID / "unbind").write_text("vivid.0")
    time.sleep(0.5)
    (VIVID / "bind").write_text("vivid.0")
    deadline = time.monotonic() + 10
    while sum(camera.typed_errors.values()) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    if sum(camera.typed_errors.values()) > before:
        fault.typed += 1
        fault.outcome("CameraError in the camera stream")
    else:
        fault.outcome("the camera stream saw nothing")
    frames, deadline = camera.frames, time.monotonic() + 30
    while camera.frames == frames and time.monotonic() < deadline:
        time.sleep(0.05)
    if camera.frames == frames:
        camera.failed("no frame in the 30 s after vivid was bound again")


def kill_producer(fault: Fault) -> None:
    """A producer process (forked: a cold interpreter takes a minute to start in the emulated VM) that
    passes pooled buffers over a socket, killed (SIGKILL) once it has sent one: the consumer gets the
    frames already queued, then a PeerError, and closes what it received."""
    import signal

    def run() -> None:
        mine, theirs = socket.socketpair()
        pool = npu_zc.BufferPool(4, 4096)
        pid = os.fork()
        if pid == 0:  # the producer: only npu_zc's own calls, then killed
            try:
                mine.close()
                for i in range(10**9):
                    slot = pool.acquire()
                    npu_zc.send_buffers(theirs, [slot.buffer], {"frame": i})
                    slot.release()
                    time.sleep(0.01)
            finally:
                os._exit(0)
        theirs.close()
        alive = True
        try:
            with mine:
                received, _ = npu_zc.recv_buffers(mine, timeout=60)
                for b in received:
                    b.close()
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                alive = False
                while True:  # what it sent before dying, then the typed error
                    received, _ = npu_zc.recv_buffers(mine, timeout=10)
                    for b in received:
                        b.close()
        finally:
            if alive:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            pool.close()

    expect_typed(fault, run, expected=npu_zc.PeerError)


def garbage_peer(fault: Fault) -> None:
    def random_bytes() -> None:
        a, z = socket.socketpair()
        r, w = os.pipe()
        try:
            with a, z:
                a.sendmsg([os.urandom(random.randint(1, 64))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, np.array([r], np.int32).tobytes())])
                npu_zc.recv_buffers(z, timeout=2)
        finally:
            os.close(r)
            os.close(w)

    def too_many_fds() -> None:
        a, z = socket.socketpair()
        with a, z:
            a.sendall(b"NZC1" + (400).to_bytes(4, "little") + (2).to_bytes(4, "little") + b"{}")
            npu_zc.recv_buffers(z, timeout=2)

    expect_typed(fault, random_bytes, expected=npu_zc.PeerError)
    expect_typed(fault, too_many_fds, expected=npu_zc.PeerError)


def aliasing(fault: Fault) -> None:
    def attempt() -> None:
        with npu_zc.alloc(64 * 64 * 4) as buf:
            src = buf.map(shape=(64, 64, 4))
            dst = buf.map(shape=(64, 64, 4))
            try:
                npu_zc.convert(src, dst, "RGBA", "RGBx")
            finally:
                del src, dst

    expect_typed(fault, attempt, expected=npu_zc.AliasingError)


# --- the run -----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    from npu_zc.cli.arguments import seconds

    parser.add_argument("--seconds", type=seconds(), default=60, help="how long (default 60; 1800 by hand)")
    parser.add_argument("--fault-every", type=seconds(), default=4, help="seconds between faults (default 4)")
    parser.add_argument("--warmup", type=seconds(zero=True), default=None,
                        help="seconds left out of the comparison (default: a sixth)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("NPU_ZC_VM_OUT", tempfile.gettempdir())) / "soak.json")
    parser.add_argument("--no-camera", action="store_true", help="no camera stream and no unbinding (a host without vivid)")
    args = parser.parse_args(argv)
    warmup = warmup_of(parser, args)
    if not args.no_camera and (not (VIVID / "vivid.0").exists() or camera_node() is None):
        print("soak: vivid is not loaded: run it in the VM (scripts/vm-run.sh)", file=sys.stderr)
        return 2

    began = time.monotonic()
    options = CompileOptions(num_threads=1, inference_precision="f32")
    model = colour_model()
    pipelines = [Pipeline(model, "CPU", options=options, labels=["red", "green", "blue"]) for _ in range(2)]
    camera_pipeline, file_pipeline = pipelines
    folder = Path(tempfile.mkdtemp(prefix="npu_zc-soak-"))
    names = write_photos(folder)
    # What each photo gives, once, before the soak: every later pass must give the same.
    first = run_stream(file_pipeline, FrameSource(folder), progress=False)
    expected = [(r.name, _top(r.prediction)) for r in first.results]
    assert [n for n, _ in expected] == names, expected

    print(f"soak: models compiled and photos written in {time.monotonic() - began:.1f} s", flush=True)
    camera, files = Stream("camera"), Stream("file")
    stop = threading.Event()
    workers = [
        threading.Thread(target=camera_loop, args=(camera_pipeline, camera, stop), name="soak-camera", daemon=True),
        threading.Thread(target=file_loop, args=(file_pipeline, folder, expected, files, stop), name="soak-file", daemon=True),
    ]
    if args.no_camera:
        workers = workers[1:]
    for w in workers:
        w.start()

    faults = {name: Fault(name) for name in ("unbind", "producer", "garbage", "aliasing")}
    rotation = [
        (lambda: None) if args.no_camera else (lambda: unbind_vivid(faults["unbind"], camera)),
        lambda: kill_producer(faults["producer"]),
        lambda: garbage_peer(faults["garbage"]),
        lambda: aliasing(faults["aliasing"]),
    ]
    samples: list[dict[str, float]] = []
    started = time.monotonic()
    deadline = started + args.seconds

    def inject() -> None:
        """The faults, one after another on their own thread, so that sampling never waits for one."""
        n = 0
        while not stop.wait(args.fault_every) and time.monotonic() < deadline:
            name = list(faults)[n % len(rotation)]
            try:
                rotation[n % len(rotation)]()
            except Exception:  # noqa: BLE001 - a fault that could not even be injected
                traceback.print_exc()
                faults[name].untyped.append("the fault could not be injected")
            n += 1

    injector = threading.Thread(target=inject, name="soak-faults", daemon=True)
    injector.start()
    try:
        while time.monotonic() < deadline:
            samples.append(sample())
            time.sleep(1.0)
    finally:
        stop.set()
        for w in [injector, *workers]:
            w.join(timeout=120)
    for pipeline in pipelines:
        pipeline.close()

    # --- the verdict ---
    problems: list[str] = []
    for fault in faults.values():
        problems += [f"{fault.name}: {u}" for u in fault.untyped]
        if fault.injected and fault.typed < fault.injected:
            problems.append(f"{fault.name}: {fault.injected - fault.typed} of {fault.injected} gave no typed error ({fault.outcomes})")
    problems += [f"camera: {f}" for f in camera.failures] + [f"file: {f}" for f in files.failures]
    if files.passes == 0:
        problems.append("the file stream finished no pass")
    if camera.frames == 0 and not args.no_camera:
        problems.append("the camera stream delivered no frame")

    figures = {
        "seconds": args.seconds,
        "fault_every": args.fault_every,
        "warmup": warmup,
        "streams": {s.name: {"frames": s.frames, "passes": s.passes, "typed_errors": s.typed_errors, "failures": s.failures}
                    for s in (camera, files)},  # fmt: skip
        "faults": {f.name: {"injected": f.injected, "typed": f.typed, "outcomes": f.outcomes, "untyped": f.untyped}
                   for f in faults.values()},  # fmt: skip
    }
    summary = [f"soak: {args.seconds:.0f} s, a fault every {args.fault_every:.0f} s; {len(samples)} samples",
               f"  camera: {camera.frames} frames, typed errors {camera.typed_errors}",
               f"  file:   {files.frames} frames in {files.passes} passes, none lost" if not files.failures else
               f"  file:   {files.frames} frames in {files.passes} passes, {len(files.failures)} bad passes"]  # fmt: skip
    summary += [f"  fault {f.name:<9} injected {f.injected}, typed {f.typed}: {f.outcomes}" for f in faults.values()]
    return conclude("soak", args.out, samples, started + warmup, LIMITS, problems, figures, "\n".join(summary))


if __name__ == "__main__":
    sys.exit(main())
