use super::*;

fn frame<'a>(boxes: &'a [[f32; 4]], ids: &'a [i64], classes: &'a [i32]) -> Tracks<'a> {
    Tracks::new(boxes, ids, classes).unwrap()
}

#[test]
fn a_box_crossing_a_level_line_counts_once_each_way() {
    // Left to right at y = 100: moving up across it is "in" (supervision's docstring example).
    let mut line = LineCounter::new([0.0, 100.0], [200.0, 100.0], &[], 1, None).unwrap();
    assert!(line.trigger(frame(&[[10.0, 110.0, 20.0, 150.0]], &[1], &[0])).is_empty());
    assert!(line.trigger(frame(&[[10.0, 90.0, 20.0, 130.0]], &[1], &[0])).is_empty()); // straddles
    let up = line.trigger(frame(&[[10.0, 50.0, 20.0, 90.0]], &[1], &[0]));
    assert_eq!(up, vec![Crossing { index: 0, track_id: 1, class: 0, direction: Direction::In }]);
    assert!(line.trigger(frame(&[[10.0, 40.0, 20.0, 80.0]], &[1], &[0])).is_empty());
    let down = line.trigger(frame(&[[10.0, 120.0, 20.0, 160.0]], &[1], &[0]));
    assert_eq!(down[0].direction, Direction::Out);
    assert_eq!((line.in_count(), line.out_count()), (1, 1));
}

#[test]
fn beyond_the_ends_and_other_classes_do_not_count() {
    let mut line = LineCounter::new([0.0, 100.0], [200.0, 100.0], &[], 1, Some(vec![0])).unwrap();
    line.trigger(frame(&[[300.0, 110.0, 320.0, 150.0], [10.0, 110.0, 20.0, 150.0]], &[1, 2], &[0, 5]));
    line.trigger(frame(&[[300.0, 50.0, 320.0, 90.0], [10.0, 50.0, 20.0, 90.0]], &[1, 2], &[0, 5]));
    assert_eq!((line.in_count(), line.out_count()), (0, 0));
}

#[test]
fn a_threshold_needs_the_new_side_held() {
    let mut line = LineCounter::new([0.0, 100.0], [200.0, 100.0], &[], 2, None).unwrap();
    let below = [[10.0, 110.0, 20.0, 150.0]];
    let above = [[10.0, 50.0, 20.0, 90.0]];
    line.trigger(frame(&below, &[1], &[0]));
    line.trigger(frame(&above, &[1], &[0]));
    line.trigger(frame(&below, &[1], &[0])); // a flicker: no crossing
    line.trigger(frame(&above, &[1], &[0]));
    assert_eq!(line.in_count(), 0);
    line.trigger(frame(&above, &[1], &[0]));
    assert_eq!(line.in_count(), 1);
}

#[test]
fn bad_lines_are_refused() {
    assert!(LineCounter::new([5.0, 5.0], [5.0, 5.0], &[], 1, None).unwrap_err().0.contains("zero length"));
    assert!(LineCounter::new([0.0, 0.0], [f64::NAN, 1.0], &[], 1, None).is_err());
    assert!(LineCounter::new([0.0, 0.0], [1.0, 1.0], &[], 0, None).is_err());
    assert!(Anchor::from_name("middle").is_err());
    assert_eq!(Anchor::from_name("BOTTOM_CENTER").unwrap(), Anchor::BottomCenter);
}

#[test]
fn a_track_enters_leaves_and_dwells() {
    let square = vec![[0.0, 0.0], [100.0, 0.0], [100.0, 100.0], [0.0, 100.0]];
    let mut zone = Zone::new(square, &[], 2, None).unwrap();
    let outside = [[150.0f32, 10.0, 170.0, 50.0]];
    let inside = [[40.0f32, 10.0, 60.0, 50.0]];
    let (flags, events) = zone.trigger(frame(&outside, &[7], &[0]), 0, 0.0);
    assert_eq!((flags, events.len()), (vec![false], 0));
    let (_, events) = zone.trigger(frame(&inside, &[7], &[0]), 1, 0.5);
    assert_eq!(events[0].kind, ZoneEventKind::Entered);
    assert_eq!(zone.occupancy(), 1);
    zone.trigger(frame(&inside, &[7], &[0]), 2, 1.0);
    let (_, events) = zone.trigger(frame(&outside, &[7], &[0]), 3, 1.5);
    assert_eq!(events[0].kind, ZoneEventKind::Left);
    assert_eq!((events[0].dwell_frames, events[0].dwell_seconds), (2, 1.0));
    assert_eq!((zone.entries(), zone.exits(), zone.occupancy()), (1, 1, 0));
}

#[test]
fn a_track_that_vanishes_inside_leaves_after_lost_frames() {
    let square = vec![[0.0, 0.0], [100.0, 0.0], [100.0, 100.0], [0.0, 100.0]];
    let mut zone = Zone::new(square, &[], 2, None).unwrap();
    zone.trigger(frame(&[[40.0, 10.0, 60.0, 50.0]], &[3], &[1]), 10, 1.0);
    zone.trigger(frame(&[[40.0, 10.0, 60.0, 50.0]], &[3], &[1]), 11, 1.1);
    assert!(zone.trigger(frame(&[], &[], &[]), 12, 1.2).1.is_empty());
    let (_, events) = zone.trigger(frame(&[], &[], &[]), 13, 1.3);
    assert_eq!(events.len(), 1);
    assert_eq!((events[0].index, events[0].frame, events[0].dwell_frames), (None, 11, 1));
}

#[test]
fn edges_are_inside_and_bad_polygons_are_refused() {
    let zone = Zone::new(vec![[0.0, 0.0], [10.0, 0.0], [10.0, 10.0]], &[], 1, None).unwrap();
    assert!(zone.contains([10.0, 5.0]) && zone.contains([5.0, 5.0]) && zone.contains([9.6, 0.4]));
    assert!(!zone.contains([2.0, 8.0]));
    assert!(Zone::new(vec![[0.0, 0.0], [1.0, 1.0]], &[], 1, None).unwrap_err().0.contains("three points"));
    let bow = vec![[0.0, 0.0], [10.0, 10.0], [10.0, 0.0], [0.0, 10.0]];
    assert!(Zone::new(bow, &[], 1, None).unwrap_err().0.contains("crosses itself"));
    assert!(Zone::new(vec![[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]], &[], 1, None).is_err());
    assert!(Zone::new(vec![[0.0, 0.0], [10.0, 0.0], [5.0, 0.0], [5.0, 5.0]], &[], 1, None).is_err());
}

#[test]
fn mismatched_arrays_are_refused() {
    assert!(Tracks::new(&[[0.0; 4]], &[], &[0]).is_err());
}
