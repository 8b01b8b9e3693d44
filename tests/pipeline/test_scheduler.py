"""The fair scheduler of Streams, alone (no model, no OpenVINO, no decoder): lanes, the least-served pick without
credit for idle time, a held lane served first, live lanes keeping the newest frames (no more than their source
lends), a file's back-pressure, lanes added and removed while feeding threads pick, persistent or not."""

from __future__ import annotations

import threading
import types
from typing import Any

import pytest

from npu_zc.pipeline.feeding import read_source
from npu_zc.pipeline.scheduler import FILE_LANE_FRAMES, IDLE_CREDIT, LIVE_FRAMES, MAX_LIVE_FRAMES, Lane, Scheduler

WAIT_S = 30.0


class Frame:
    """A decoded frame as the scheduler sees it: released once, maybe with frames lost before it."""

    def __init__(self, log: list[Any], tag: Any = None, lost_before: int = 0) -> None:
        self.log, self.tag, self.lost_before = log, tag, lost_before

    def release(self) -> None:
        self.log.append(self.tag)


def lanes(scheduler: Scheduler[Lane], count: int, *, live: bool = False) -> list[Lane]:
    made = [Lane(k, f"s{k}", live, scheduler.lock) for k in range(count)]
    for lane in made:
        scheduler.add(lane)
    return made


def test_least_served_no_credit_for_idle_time_and_a_held_lane_first() -> None:
    """A lane that was idle starts again level with the others (it does not take every turn to catch up), and a
    lane held by one feeding thread while the others went round is served first."""
    scheduler: Scheduler[Lane] = Scheduler()
    a, b, c = lanes(scheduler, 3)
    released: list[Any] = []

    def pick() -> Lane:
        """One pick by a feeding thread, and the lane's decoder putting its next frame in."""
        picked = scheduler.next()
        assert picked is not None
        scheduler.let_go(picked[0])
        with scheduler.lock:
            scheduler.arrive(picked[0], Frame(released))
        return picked[0]

    with scheduler.lock:
        for _ in range(2):
            scheduler.arrive(a, Frame(released))
            scheduler.arrive(b, Frame(released))
    order = [pick().stream for _ in range(40)]  # a and b always have a frame; c has none
    assert order.count(0) == order.count(1) == 20
    with scheduler.lock:
        scheduler.arrive(c, Frame(released))  # c starts late: level with a and b, not 20 frames behind
    order = [pick().stream for _ in range(30)]
    # a third each, give or take the frame of catching up a lane may take (with full credit c would take 20 of 30)
    assert all(abs(order.count(s) - 10) <= IDLE_CREDIT for s in (0, 1, 2)), order
    assert order[:4].count(2) <= 2, order

    held = scheduler.next()  # one feeding thread holds a lane...
    assert held is not None
    others = [pick().stream for _ in range(4)]  # ...while the other goes round the rest
    assert held[0].stream not in others
    with scheduler.lock:
        scheduler.arrive(held[0], Frame(released))  # its decoder had put the next frame in meanwhile
    scheduler.let_go(held[0])
    assert pick() is held[0]  # the lane it held is behind: served first


def test_a_live_lane_of_one_frame_keeps_the_newest_and_counts_what_it_lost() -> None:
    scheduler: Scheduler[Lane] = Scheduler(live_frames=1)
    (live,) = lanes(scheduler, 1, live=True)
    released: list[Any] = []
    with scheduler.lock:
        assert scheduler.arrive(live, Frame(released, 0)) == 0
        assert scheduler.arrive(live, Frame(released, 1, lost_before=2)) == 3  # two lost before it, and frame 0
        assert scheduler.arrive(live, Frame(released, 2)) == 1
    picked = scheduler.next()
    assert picked is not None and picked[1].tag == 2 and released == [0, 1]


def test_a_live_lane_keeps_the_two_newest_by_default() -> None:
    scheduler: Scheduler[Lane] = Scheduler()
    assert scheduler.live_frames == LIVE_FRAMES == 2
    (live,) = lanes(scheduler, 1, live=True)
    released: list[Any] = []
    with scheduler.lock:
        assert scheduler.arrive(live, Frame(released, 0)) == 0
        assert scheduler.arrive(live, Frame(released, 1)) == 0  # room for two: none lost
        assert scheduler.arrive(live, Frame(released, 2, lost_before=1)) == 2  # one lost before it, and frame 0
    first = scheduler.next()
    assert first is not None
    scheduler.let_go(first[0])
    second = scheduler.next()
    assert second is not None and (first[1].tag, second[1].tag) == (1, 2) and released == [0]


class Lending:
    """A live source that lends ``most_held`` of its frames at once (a camera: its buffers less one)."""

    live, name = True, "lending"

    def __init__(self, most_held: int | None, count: int, log: list[Any]) -> None:
        self.most_held, self.count, self.log = most_held, count, log

    def frames(self, stop: Any = None) -> Any:
        return (Frame(self.log, k) for k in range(self.count))


@pytest.mark.parametrize(("most_held", "kept"), [(1, [3]), (5, [2, 3]), (None, [2, 3])])
def test_a_live_lane_keeps_no_more_than_its_source_lends(most_held: int | None, kept: list[int]) -> None:
    """A source's reader fits its live lane to what the source lends (a camera of two buffers: one frame waits, so
    that a stalled model leaves its driver a buffer); more than the scheduler's two, or nothing said: two."""
    scheduler: Scheduler[Lane] = Scheduler()
    (live,) = lanes(scheduler, 1, live=True)
    released: list[Any] = []
    figures = types.SimpleNamespace(dropped=0, stopped=False, done=False, error=None, reconnects=0, copied=0)
    read_source(scheduler, live, Lending(most_held, 4, released), figures)
    assert (figures.done, figures.error) == (True, None)
    assert [frame.tag for frame in live.frames] == kept and released == list(range(4 - len(kept)))
    assert figures.dropped == 4 - len(kept)


@pytest.mark.parametrize("live_frames", [0, MAX_LIVE_FRAMES + 1, 1.0, True])
def test_live_frames_out_of_range_is_refused(live_frames: Any) -> None:
    with pytest.raises(ValueError, match=f"live_frames is a whole number from 1 to {MAX_LIVE_FRAMES}"):
        Scheduler(live_frames=live_frames)


def test_a_files_decoder_waits_for_room_until_a_frame_is_taken_or_it_is_stopped() -> None:
    scheduler: Scheduler[Lane] = Scheduler()
    (file,) = lanes(scheduler, 1)
    released: list[Any] = []
    with scheduler.lock:
        for k in range(FILE_LANE_FRAMES):
            assert scheduler.wait_for_room(file)
            scheduler.arrive(file, Frame(released, k))
    waited: list[bool] = []
    decoder = threading.Thread(target=lambda: waited.append(_room(scheduler, file)))
    decoder.start()
    picked = scheduler.next()  # a feeding thread takes one: the decoder goes on
    decoder.join(WAIT_S)
    assert picked is not None and waited == [True]
    with scheduler.lock:
        scheduler.arrive(file, Frame(released, "next"))
    decoder = threading.Thread(target=lambda: waited.append(_room(scheduler, file)))
    decoder.start()
    scheduler.stop()  # a full lane and a stop: the decoder is let go
    decoder.join(WAIT_S)
    assert waited == [True, False]


def _room(scheduler: Scheduler[Lane], lane: Lane) -> bool:
    with scheduler.lock:
        return scheduler.wait_for_room(lane)


def test_next_ends_when_every_lane_has_ended_unless_persistent() -> None:
    scheduler: Scheduler[Lane] = Scheduler()
    a, b = lanes(scheduler, 2)
    scheduler.ended(a)
    scheduler.ended(b)
    assert scheduler.next() is None
    persistent: Scheduler[Lane] = Scheduler(persistent=True)
    got: list[Any] = []
    feeder = threading.Thread(target=lambda: got.append(persistent.next()))
    feeder.start()  # no lane at all: it waits
    lane = Lane(7, "late", False, persistent.lock)
    persistent.add(lane)
    with persistent.lock:
        persistent.arrive(lane, Frame([], "first"))
    feeder.join(WAIT_S)
    assert got[0][0] is lane and got[0][1].tag == "first"
    persistent.let_go(lane)
    persistent.ended(lane)
    feeder = threading.Thread(target=lambda: got.append(persistent.next()))
    feeder.start()  # every lane ended: a persistent scheduler still waits...
    feeder.join(0.3)
    assert feeder.is_alive()
    persistent.stop()  # ...until stopped
    feeder.join(WAIT_S)
    assert got[1] is None


def test_lanes_added_and_removed_while_feeding_threads_pick() -> None:
    """Three feeding threads pick while lanes come and go: each lane's frames are taken in their order, never two of
    a lane at once, a removed lane's waiting frames are released and no more of its frames are taken, and a lane
    added later starts level with the others."""
    scheduler: Scheduler[Lane] = Scheduler(persistent=True)
    steady = lanes(scheduler, 2)
    taken: dict[int, list[Any]] = {}
    inside: set[int] = set()
    overlaps: list[int] = []
    guard = threading.Lock()

    def feeding() -> None:
        while (picked := scheduler.next()) is not None:
            lane, frame = picked
            with guard:
                if lane.stream in inside:
                    overlaps.append(lane.stream)
                inside.add(lane.stream)
                taken.setdefault(lane.stream, []).append(frame.tag)
            with guard:
                inside.discard(lane.stream)
            scheduler.let_go(lane)

    feeders = [threading.Thread(target=feeding) for _ in range(3)]
    for feeder in feeders:
        feeder.start()
    released: list[Any] = []
    counters = {lane.stream: 0 for lane in steady}

    def put(lane: Lane, n: int) -> None:
        for _ in range(n):
            with scheduler.lock:
                if lane.removed:
                    return
                scheduler.wait_for_room(lane)
                scheduler.arrive(lane, Frame(released, counters[lane.stream]))
                counters[lane.stream] += 1

    put(steady[0], 50)
    extra = Lane(2, "extra", False, scheduler.lock)
    scheduler.add(extra)
    counters[2] = 0
    put(extra, 20)
    put(steady[1], 30)
    with scheduler.lock:
        scheduler.arrive(extra, Frame(released, "waiting"))
    scheduler.remove(extra)
    assert extra.stop.is_set() and extra not in scheduler.lanes
    put(extra, 5)  # its decoder, told to stop, puts nothing more in
    put(steady[0], 10)
    scheduler.stop()
    for feeder in feeders:
        feeder.join(WAIT_S)
    assert not overlaps
    assert taken[0] == list(range(60)) and taken[1] == list(range(30))
    got = [tag for tag in taken[2] if tag != "waiting"]
    assert got == list(range(20))
    assert ("waiting" in released) != ("waiting" in taken[2])  # taken before the removal, or released by it


@pytest.mark.parametrize("count", [0, 1])
def test_stop_before_a_run_is_forgotten_at_its_start(count: int) -> None:
    scheduler: Scheduler[Lane] = Scheduler()
    made = lanes(scheduler, count)
    scheduler.stop()
    scheduler.start()
    assert not scheduler.stopped.is_set() and not any(lane.stop.is_set() for lane in made)
