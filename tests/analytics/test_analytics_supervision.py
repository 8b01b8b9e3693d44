"""npu_zc.LineCounter and npu_zc.Zone against supervision's LineZone and PolygonZone: the same tracks
through both, the same answers frame by frame (supervision is the reference: pip's `test` extra)."""

from __future__ import annotations

import numpy as np
import pytest

import npu_zc
from npu_zc.errors import InvalidArgumentError

sv = pytest.importorskip("supervision", reason="supervision (the reference) is in the test extra")


def random_tracks(seed: int, frames: int = 160, objects: int = 14, size: tuple[int, int] = (640, 480)) -> list[npu_zc.Detections]:
    """Objects wandering across a frame (float boxes, classes 0-2), appearing late, vanishing early, and
    missed now and then: one Detections per frame, tracked (ids as a tracker gives them)."""
    rng = np.random.default_rng(seed)
    width, height = size
    starts = rng.integers(0, frames // 2, objects)
    ends = starts + rng.integers(frames // 4, frames, objects)
    pos = rng.uniform([0, 0], [width, height], (objects, 2))
    vel = rng.uniform(-9, 9, (objects, 2))
    wh = rng.uniform(12, 90, (objects, 2))
    classes = rng.integers(0, 3, objects)
    out = []
    for f in range(frames):
        pos += vel + rng.normal(0, 2.5, pos.shape)
        pos %= [width, height]
        live = np.flatnonzero((starts <= f) & (f < ends) & (rng.random(objects) > 0.08))
        xyxy = np.concatenate([pos[live] - wh[live] / 2, pos[live] + wh[live] / 2], axis=1).astype(np.float32)
        dets = npu_zc.Detections(xyxy, np.full(len(live), 0.9, np.float32), classes[live].astype(np.int32),
                                 {0: "person", 1: "car", 2: "dog"})  # fmt: skip
        out.append(dets.with_tracks(live + 1))
    return out


def as_sv(dets: npu_zc.Detections) -> sv.Detections:
    return sv.Detections(xyxy=dets.xyxy.copy(), class_id=dets.class_ids.astype(int), tracker_id=dets.track_ids.astype(int))


LINES = [((0, 240), (640, 240)), ((320, 0), (320, 480)), ((600, 30), (40, 420)), ((100, 100), (500, 130)),
         ((200.5, 400.25), (210.75, 20.5))]  # fmt: skip
ANCHOR_SETS = [None, ("center",), ("bottom_center",), ("top_left", "bottom_right")]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("threshold", [1, 2, 3])
def test_lines_count_as_supervision_counts(seed: int, threshold: int) -> None:
    frames = random_tracks(seed)
    checked = 0
    for k, (start, end) in enumerate(LINES):
        anchors = ANCHOR_SETS[(seed + k) % len(ANCHOR_SETS)]
        kwargs = {} if anchors is None else {"anchors": anchors}
        ours = npu_zc.LineCounter(start, end, minimum_crossing_threshold=threshold, **kwargs)
        positions = {} if anchors is None else {"triggering_anchors": [sv.Position[a.upper()] for a in anchors]}
        theirs = sv.LineZone(sv.Point(*start), sv.Point(*end), minimum_crossing_threshold=threshold, **positions)
        for dets in frames:
            got_in, got_out = ours.trigger(dets)
            want_in, want_out = theirs.trigger(as_sv(dets))
            np.testing.assert_array_equal(got_in, want_in)
            np.testing.assert_array_equal(got_out, want_out)
        assert (ours.in_count, ours.out_count) == (theirs.in_count, theirs.out_count)
        assert ours.counts_per_class() == ({int(c): n for c, n in theirs.in_count_per_class.items()},
                                           {int(c): n for c, n in theirs.out_count_per_class.items()})  # fmt: skip
        checked += ours.in_count + ours.out_count
    assert checked > 0  # the tracks did cross


def test_class_filter_is_supervision_over_the_filtered_detections() -> None:
    frames = random_tracks(11)
    ours = npu_zc.LineCounter((0, 240), (640, 240), classes=[1])
    theirs = sv.LineZone(sv.Point(0, 240), sv.Point(640, 240))
    for dets in frames:
        ours.update(dets)
        theirs.trigger(as_sv(dets[dets.class_ids == 1]))
    assert (ours.in_count, ours.out_count) == (theirs.in_count, theirs.out_count)
    assert ours.in_count + ours.out_count > 0


POLYGONS = [
    [[0, 0], [320, 0], [320, 240], [0, 240]],
    [[320, 40], [520, 240], [320, 440], [120, 240]],  # 45-degree edges
    [[100, 100], [500, 100], [500, 200], [250, 200], [250, 400], [100, 400]],  # an L
]


@pytest.mark.parametrize("seed", range(6))
def test_zones_hold_what_supervision_holds(seed: int) -> None:
    frames = random_tracks(seed + 20)
    for k, polygon in enumerate(POLYGONS):
        anchor = ("bottom_center", "center", "top_left")[(seed + k) % 3]
        ours = npu_zc.Zone(polygon, anchor=anchor)
        theirs = sv.PolygonZone(np.array(polygon), triggering_anchors=[sv.Position[anchor.upper()]])
        inside = 0
        for f, dets in enumerate(frames):
            got = ours.trigger(dets, f)
            want = theirs.trigger(as_sv(dets))
            np.testing.assert_array_equal(got, want)
            assert ours.occupancy == theirs.current_count
            inside += int(want.sum())
        assert inside > 0


def test_entries_exits_and_dwell_follow_supervisions_inside_flags() -> None:
    """Entries and exits per track, derived from supervision's per-frame flags (tracks never missed here, so
    no track vanishes inside): each change from outside to inside enters, each change back leaves, and the
    dwell is the frames between."""
    frames = random_tracks(5, frames=120)
    polygon = POLYGONS[0]
    ours = npu_zc.Zone(polygon, lost_frames=1000)
    theirs = sv.PolygonZone(np.array(polygon))
    state: dict[int, int] = {}
    want_events: list[tuple[str, int, int, int | None]] = []
    got_events: list[tuple[str, int, int, int | None]] = []
    for f, dets in enumerate(frames):
        flags = theirs.trigger(as_sv(dets))
        for track, inside in zip(dets.track_ids.tolist(), flags.tolist()):
            if inside and track not in state:
                state[track] = f
                want_events.append(("zone_entered", track, f, None))
            elif not inside and track in state:
                want_events.append(("zone_left", track, f, f - state.pop(track)))
        for e in ours.update(dets, f, f / 30):
            got_events.append((e.kind, e.track_id, e.frame, e.dwell_frames))
            if e.kind == "zone_left":
                assert e.dwell_s == pytest.approx(e.dwell_frames / 30)
    # Order within a frame: by track position in both.
    assert got_events == want_events
    assert len(want_events) > 4
    assert ours.entries == sum(1 for e in want_events if e[0] == "zone_entered")


def test_bad_lines_and_zones_are_one_sentence() -> None:
    with pytest.raises(InvalidArgumentError, match="zero length"):
        npu_zc.LineCounter((5, 5), (5, 5), name="door")
    with pytest.raises(InvalidArgumentError, match="three points"):
        npu_zc.Zone([[0, 0], [1, 1]], name="lobby")
    with pytest.raises(InvalidArgumentError, match="crosses itself"):
        npu_zc.Zone([[0, 0], [10, 10], [10, 0], [0, 10]])
    with pytest.raises(InvalidArgumentError, match="anchor 'middle'"):
        npu_zc.LineCounter((0, 0), (1, 1), anchors=["middle"])
    with pytest.raises(InvalidArgumentError, match="tracked detections"):
        npu_zc.LineCounter((0, 0), (1, 1)).update(npu_zc.Detections.empty())
    # Counts and class ids are whole numbers, anchors names: NaN, inf, 2**70, 2.5, True, None or a scalar where a list
    # goes is one sentence, not int()'s or iter()'s own error.
    square = [[0, 0], [9, 0], [9, 9]]
    for junk in [float("nan"), float("inf"), 2**70, 2.5, True, None, "3", 0]:
        with pytest.raises(InvalidArgumentError, match="minimum_crossing_threshold"):
            npu_zc.LineCounter((0, 0), (1, 1), minimum_crossing_threshold=junk)
        with pytest.raises(InvalidArgumentError, match="lost_frames"):
            npu_zc.Zone(square, lost_frames=junk)
        with pytest.raises(InvalidArgumentError, match="class"):
            npu_zc.Zone(square, classes=[junk] if junk != 0 else 7)
        with pytest.raises(InvalidArgumentError, match="anchor"):
            npu_zc.LineCounter((0, 0), (1, 1), anchors=junk if junk is not None else [None])
    assert npu_zc.Zone(square, classes=np.array([0, 2]), lost_frames=np.int64(3)).classes == [0, 2]
