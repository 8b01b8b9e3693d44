//! What reads a detector's output: YOLO-family decode, NMS, masks and keypoints,
//! and ByteTrack over a stream's detections.

pub mod track;
