"""The fair scheduler of :class:`~npu_zc.pipeline.streams.Streams`: lanes of decoded frames, and which one the next
feeding thread takes.

Each stream has a :class:`Lane`: its decoded frames waiting for the model. A **live** lane keeps only the newest
frames (the scheduler's ``live_frames``, :data:`LIVE_FRAMES` by default; an older one is let go, counted as dropped);
a **file**'s lane holds :data:`FILE_LANE_FRAMES` and makes its decoder wait. :meth:`Scheduler.next` gives a feeding
thread the frame of the lane served least (ties: round robin), among the lanes with a frame that no other feeding
thread holds; the lane is then held until :meth:`Scheduler.let_go`, so a stream's frames are taken, and submitted, in
their order. Lanes come and go while it runs (:meth:`Scheduler.add`, :meth:`Scheduler.remove`).

Nothing here knows the model or the runtime: a frame is any object with
``release()`` and ``lost_before`` (a :class:`~npu_zc.sources.DecodedFrame`).
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Generic, TypeVar

FILE_LANE_FRAMES = 2
"""Decoded frames a file's lane holds before its decoder waits (one being read, one ready)."""

MAX_LIVE_FRAMES = 2
"""The most frames a live lane may keep: each one more is a frame time more of latency for a stream that falls
behind, and a camera's frames held are buffers its driver cannot fill (two in the lane and one being converted
leave one of a camera's default four)."""

LIVE_FRAMES = 2
"""The frames a live lane keeps unless told otherwise: a frame taken late waits instead of being lost, at up to a
frame time more of latency (one loses it; why two: docs/streams.md, "Live vs file")."""

IDLE_CREDIT = 1
"""Frames a lane that had none may still be behind the others when its next one comes (it catches up that much):
a decoder a moment late keeps its share, one idle for long gets no turns in a row for the time it was idle."""


class Lane:
    """One stream's decoded frames waiting for the model; its fields change under the scheduler's lock."""

    def __init__(self, stream: int, name: str, live: bool, lock: threading.RLock) -> None:
        self.stream = stream
        self.name = name
        self.live = live
        self.frames: collections.deque[Any] = collections.deque()
        self.ended = False
        """Its decoder has ended (or never started: a source that could not be opened)."""
        self.stop = threading.Event()
        """Stops this lane's decoder (the run's stop, the stream's removal or failure)."""
        self.room = threading.Condition(lock)
        """Notified when a feeding thread takes a frame: a file's decoder waiting for room wakes, and no other."""
        self.waiting = False
        """Its decoder waits on :attr:`room` (notified only then: a notify costs a handful of Python calls)."""
        self.keep = 1
        """The newest frames it keeps if live: the scheduler's ``live_frames`` (set by :meth:`Scheduler.add`), fewer
        where its source lends fewer (:func:`~npu_zc.pipeline.feeding.read_source`)."""
        self.served = 0
        """Frames taken by the feeding threads (raised to the scheduler's clock when the lane was idle)."""
        self.owned = False
        """A feeding thread has taken one of its frames and not yet let the lane go: the others leave it alone,
        so that its frames are submitted in order (and its converters are used by one thread at a time)."""
        self.removed = False
        """Taken out by :meth:`Scheduler.remove`: its decoder's frames no longer come in."""


L = TypeVar("L", bound=Lane)


class Scheduler(Generic[L]):
    """Lanes and the pick of the next frame, shared by the decoding and feeding threads (thread-safe).

    ``persistent``: :meth:`next` waits while no lane has a frame, even when
    every lane has ended, until :meth:`stop` (a service's run); otherwise it
    returns None once every lane has ended. ``live_frames``: the newest frames
    a live lane keeps (1 to :data:`MAX_LIVE_FRAMES`): one loses a frame
    whenever the next comes before it was taken; two absorb such a late take
    at up to a frame time more of latency.
    """

    def __init__(self, *, persistent: bool = False, live_frames: int = LIVE_FRAMES) -> None:
        if type(live_frames) is not int or not 1 <= live_frames <= MAX_LIVE_FRAMES:
            raise ValueError(f"live_frames is a whole number from 1 to {MAX_LIVE_FRAMES}, got {live_frames!r}")
        self.live_frames = live_frames
        self.lock = threading.RLock()
        """Guards the lanes and the pick; re-entrant, so that an owner (Streams) can check and add a lane in one
        step under it."""
        self.ready = threading.Condition(self.lock)
        """Notified when a lane gets a frame or ends: only the feeding threads wait on it."""
        self.persistent = persistent
        self.lanes: list[L] = []
        """The lanes now, in the order they came (replaced, never changed in place, under the lock: a reader may
        hold the old list)."""
        self.stopped = threading.Event()
        self._idle = 0
        """Feeding threads waiting on :attr:`ready` (per frame, it is notified only when one is)."""
        self._turn = 0
        """Where the next pick's round robin starts: a position in :attr:`lanes`."""
        self._clock = 0
        """The served count of the last frame taken: where an idle or new lane starts."""

    def add(self, lane: L) -> None:
        """A lane joins, level with the others (no credit for the time before it came)."""
        with self.ready:
            lane.served = self._clock
            lane.keep = self.live_frames
            if self.stopped.is_set():  # the run is ending: its decoder ends at once
                lane.stop.set()
            self.lanes = [*self.lanes, lane]
            self.ready.notify_all()

    def remove(self, lane: L) -> int:
        """A lane leaves: its decoder is told to stop, its waiting frames are let go; returns how many. A frame a
        feeding thread holds stays with that thread (it lets the lane go as usual)."""
        with self.ready:
            self.lanes = [other for other in self.lanes if other is not lane]
            lane.removed = True
            waiting = len(lane.frames)
            self._end(lane)
            return waiting

    def fail(self, lane: L) -> None:
        """A lane's stream failed: it ends, its decoder is told to stop, its waiting frames are let go."""
        with self.ready:
            lane.ended = True
            self._end(lane)

    def _end(self, lane: L) -> None:
        lane.stop.set()
        lane.room.notify_all()
        while lane.frames:
            lane.frames.popleft().release()
        self.ready.notify_all()

    def ended(self, lane: L) -> None:
        """Its decoder has ended (no more frames will come)."""
        with self.ready:
            lane.ended = True
            self.ready.notify_all()

    def start(self) -> None:
        """A run begins: the lanes' decoders may go (a stop before the run is forgotten)."""
        with self.lock:
            self.stopped.clear()
            for lane in self.lanes:
                lane.stop.clear()

    def stop(self) -> None:
        """Every decoder stops and :meth:`next` returns None once the frames held are taken."""
        self.stopped.set()
        with self.ready:
            for lane in self.lanes:
                lane.stop.set()
                lane.room.notify_all()
            self.ready.notify_all()

    def drain(self) -> None:
        """Let go of every frame still waiting (the run is over)."""
        with self.ready:
            for lane in self.lanes:
                while lane.frames:
                    lane.frames.popleft().release()

    def wait_for_room(self, lane: L) -> bool:
        """A file's decoder with a frame: waits while its lane is full (the lock held). False when told to stop."""
        if not lane.live and len(lane.frames) >= FILE_LANE_FRAMES:
            lane.waiting = True
            while len(lane.frames) >= FILE_LANE_FRAMES and not lane.stop.is_set():
                lane.room.wait(0.1)  # back-pressure: the decoder waits for the model
            lane.waiting = False
        return not lane.stop.is_set()

    def arrive(self, lane: L, frame: Any) -> int:
        """A decoded frame into its lane (the lock held): a live lane keeps only its newest ``keep`` frames.
        Returns the frames the stream lost with it: let go here, or lost before they reached the stream
        (``frame.lost_before``)."""
        if not lane.frames and not lane.owned:  # it had nothing: no credit for the time it waited, beyond a frame
            lane.served = max(lane.served, self._clock - IDLE_CREDIT)
        lost = frame.lost_before
        if lane.live:
            while len(lane.frames) >= lane.keep:  # the newest frames win
                lane.frames.popleft().release()
                lost += 1
        lane.frames.append(frame)
        if self._idle:
            self.ready.notify()
        return int(lost)

    def next(self) -> tuple[L, Any] | None:
        """The next frame to feed: of the lanes with a frame that no other feeding thread holds, the one served
        least (ties: round robin from the last one served); the lane is then held (:meth:`let_go`).
        Waits; None once stopped, or (not ``persistent``) when every lane has ended.

        "Served least" counts frames taken, with a lane that had no frame brought up to within
        :data:`IDLE_CREDIT` of the others when its next one comes (:meth:`arrive`): a lane held by a feeding
        thread while the others go round is served first when let go, and a lane that was idle or late earns no
        run of turns over the ones that kept up."""
        ready = self.ready
        with self.lock:
            while True:
                lanes = self.lanes
                count = len(lanes)
                start, best, at = self._turn % count if count else 0, None, 0
                for k in range(count):
                    lane = lanes[(start + k) % count]
                    if lane.frames and not lane.owned and (best is None or lane.served < best.served):
                        best, at = lane, (start + k) % count
                if best is not None:
                    frame = best.frames.popleft()
                    best.owned = True
                    self._clock = best.served
                    best.served += 1
                    self._turn = at + 1
                    if best.waiting:
                        best.room.notify()  # its decoder waits for room
                    return best, frame
                if self.stopped.is_set() or (not self.persistent and all(lane.ended for lane in lanes)):
                    # A lane another feeding thread holds may still have frames: that thread takes them next.
                    return None
                self._idle += 1
                try:
                    ready.wait(0.1)
                finally:
                    self._idle -= 1

    def let_go(self, lane: L) -> None:
        """The lane's frame is submitted (or refused): another feeding thread may take its next one."""
        with self.lock:
            lane.owned = False
            if lane.frames and self._idle:
                self.ready.notify()


__all__ = ["FILE_LANE_FRAMES", "IDLE_CREDIT", "LIVE_FRAMES", "MAX_LIVE_FRAMES", "Lane", "Scheduler"]
