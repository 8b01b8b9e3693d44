"""A real RTSP server on 127.0.0.1 for the streams tests: GStreamer's RTSP server (Debian's, run with /usr/bin/python3).

    /usr/bin/python3 rtsp_server.py PORT /cam1=/path/clip.mp4 [/cam2=/path/clip.mkv ...]

Each mount serves its H.264 or HEVC clip in real time, from the start for each
client, with no re-encoding (the clip's own packets, repayloaded). Prints
"ready" once listening; runs until killed.
"""

import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def launch(path: str) -> str:
    demux = "matroskademux" if path.endswith(".mkv") else "qtdemux"
    codec = "h265" if path.endswith(".mkv") else "h264"
    return f"( filesrc location={path} ! {demux} ! {codec}parse ! rtp{codec}pay name=pay0 pt=96 config-interval=1 )"


def main() -> None:
    Gst.init(None)
    port, mounts = sys.argv[1], sys.argv[2:]
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(port)
    table = server.get_mount_points()
    for mount in mounts:
        name, _, path = mount.partition("=")
        factory = GstRtspServer.RTSPMediaFactory()
        factory.set_launch(launch(path))
        factory.set_shared(False)
        table.add_factory(name, factory)
    if server.attach(None) == 0:
        sys.exit(f"cannot listen on 127.0.0.1:{port}")
    print("ready", flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    main()
