"""The service's own cost: N streams through ``Streams`` alone, then the same streams through ``npu-zc serve``'s
``Service`` (a line and a zone on every stream, MQTT to a local mosquitto, /metrics scraped every second, every
stream's live tile fetched every second as the live view's page does, from a process of its own as a browser is),
in one run; frames a second of each and their ratio (the target: the service costs at most 5% of the frames a second).

    python3 benches/bench_serve.py [--streams 32] [--seconds 20] [--warmup 5] [--model DIR_OR_XML] [--device CPU]

The clip: a red square going back and forth on grey (640x640, H.264), unpaced (files: no frame dropped, the
frame rate is what the machine does). The model: ``--model``, or the tests' red-square YOLOv8 (a real YOLO head
built with OpenVINO's opset API, tests/conftest.py) that finds the square, so that the tracker, lines and zones
have work on every frame. Without ``mosquitto`` on PATH the service runs without MQTT (said in the output).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import results

ROOT = Path(__file__).resolve().parents[1]


def red_square_model(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import save_red_square_yolo  # the tests' builder: one definition of the model

    model: Path = save_red_square_yolo(folder / "red_square_openvino_model")
    return model


def clip(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests" / "serve"))
    sys.path.insert(0, str(ROOT / "tests"))
    from serve_helpers import back_and_forth, square_clip

    path: Path = square_clip(folder / "square.mp4", back_and_forth(40))
    return path


def frames(stats: list[Any]) -> int:
    return sum(s.frames for s in stats)


def measure(stats: Any, warmup: float, seconds: float) -> float:
    time.sleep(warmup)
    f0, t0 = frames(stats()), time.monotonic()
    time.sleep(seconds)
    return (frames(stats()) - f0) / (time.monotonic() - t0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    from npu_zc.cli import arguments

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=arguments.positive, default=32)
    parser.add_argument("--seconds", type=arguments.seconds(), default=20.0)
    parser.add_argument("--warmup", type=arguments.seconds(zero=True), default=5.0)
    parser.add_argument("--model")
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--no-mqtt", action="store_true", help="the service without MQTT (what its share costs)")
    parser.add_argument("--no-http", action="store_true", help="the service without HTTP, metrics scrapes and the live view")
    parser.add_argument("--json", help="where to write the results (default benches/results/)")
    args = parser.parse_args()

    import npu_zc
    from npu_zc.pipeline import Pipeline
    from npu_zc.serve import Service

    tmp = results.scratch("bench_serve-")
    model = Path(args.model) if args.model else red_square_model(tmp)
    video = clip(tmp)
    names = [f"cam{k:02d}" for k in range(args.streams)]

    # Streams alone: the same pipeline settings the service uses (throughput hint, ByteTrack).
    pipeline = Pipeline(model, args.device, hint="throughput")
    streams = npu_zc.Streams([str(video)] * args.streams, pipeline, names=names, tracker=npu_zc.Tracker)
    runner = threading.Thread(target=streams.run, kwargs={"duration": args.warmup + args.seconds + 2})
    runner.start()
    alone = measure(lambda: streams.stats, args.warmup, args.seconds)
    runner.join()
    streams.close()
    pipeline.close()
    if not alone:
        raise SystemExit(f"Streams alone delivered no frame in {args.seconds:g} s after a {args.warmup:g} s warm-up: "
                         "nothing to compare the service with (a longer --warmup or --seconds)")  # fmt: skip

    broker = None
    mqtt: dict[str, Any] | None = None
    if shutil.which("mosquitto") and not args.no_mqtt:
        port = free_port()
        (tmp / "m.conf").write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
        broker = subprocess.Popen(["mosquitto", "-c", str(tmp / "m.conf")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        mqtt = {"host": "127.0.0.1", "port": port, "prefix": "bench"}
    config: dict[str, Any] = {
        "model": str(model), "device": args.device, "streams": [{"name": n, "source": str(video)} for n in names],
        "lines": [{"name": f"{n}-line", "stream": n, "start": [320, 20], "end": [320, 620]} for n in names],
        "zones": [{"name": f"{n}-zone", "stream": n, "polygon": [[400, 0], [639, 0], [639, 400], [400, 400]]} for n in names],
        "http": False if args.no_http else {"port": 0}, "latency_budget_ms": 0,
    }  # fmt: skip
    if mqtt is not None:
        config["mqtt"] = mqtt
    service = Service(config)
    service.start()
    # The live view's page, in a process of its own as a browser is: /streams, every tile, /metrics, once a second
    # (in this process, the client's own Python would be counted against the service).
    browser = None
    if not args.no_http:
        browse = ("import sys, time, urllib.request\n"
                  "base, names = sys.argv[1], sys.argv[2:]\n"
                  "while True:\n"
                  "    time.sleep(1.0)\n"
                  "    for path in ['/streams', '/metrics', *(f'/live/{n}.jpg' for n in names)]:\n"
                  "        try:\n"
                  "            urllib.request.urlopen(base + path, timeout=5).read()\n"
                  "        except OSError:\n"
                  "            pass\n")  # fmt: skip
        browser = subprocess.Popen([sys.executable, "-c", browse, f"http://127.0.0.1:{service.port}", *names])
    assert service.streams is not None
    served = measure(lambda: service.streams.stats if service.streams else [], args.warmup, args.seconds)
    events = service.mqtt.events if service.mqtt is not None else None
    if browser is not None:
        browser.terminate()
        browser.wait()
    service.stop()
    if broker is not None:
        broker.terminate()
        broker.wait()
    result = {"streams": args.streams, "seconds": args.seconds, "model": model.name, "device": args.device,
              "streams_fps": round(alone, 1), "service_fps": round(served, 1), "ratio": round(served / alone, 3),
              "mqtt": mqtt is not None, "events": events}  # fmt: skip
    print(f"{args.streams} streams: Streams alone {alone:.1f} FPS, with the service {served:.1f} FPS "
          f"({served / alone:.1%} of it); MQTT {'on' if mqtt else 'off (no mosquitto)'}, events {events}")  # fmt: skip
    print(json.dumps(result))
    parts = [name for name, on in (("analytics", True), ("MQTT", mqtt is not None), ("HTTP + live view", not args.no_http)) if on]
    tag = "".join(f"--{flag}" for flag, off in (("no-mqtt", mqtt is None), ("no-http", args.no_http)) if off)
    table = {"title": f"The service's cost: {args.streams} streams, {' + '.join(parts)}",
             "note": f"{model.name} on {args.device}, unpaced 640x640 H.264 clips, {args.seconds:g} s after a {args.warmup:g} s "
                     "warm-up, the page's requests from a process of its own. Target: the service costs at most 5% of the frames "
                     "a second (ratio >= 0.95).",
             "columns": ["streams", "Streams alone FPS", "with the service FPS", "ratio", "MQTT events"],
             "rows": [[args.streams, result["streams_fps"], result["service_fps"], result["ratio"], events]]}  # fmt: skip
    path = results.save("bench_serve", [table], title="The service's own cost",
                        path=args.json or results.RESULTS / f"bench_serve--{results.machine()['slug']}{tag}.json")
    print("results", path)


if __name__ == "__main__":
    main()
