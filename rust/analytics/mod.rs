//! Counting over a stream's tracks, off the inference path: lines crossed ([`line`]), zones entered and
//! left with the time spent inside ([`zone`]), decided by an anchor point of each tracked box ([`anchor`]).
//!
//! The rules are supervision's (`LineZone`, `PolygonZone`), so that a count here is the count a
//! supervision user gets from the same tracks (tests/analytics checks it against supervision itself).

pub mod anchor;
pub mod line;
mod tracks;
pub mod zone;

pub use anchor::Anchor;
pub use line::{ClassCounts, Crossing, Direction, LineCounter};
pub use tracks::{AnalyticsError, Result, Tracks};
pub use zone::{Zone, ZoneEvent, ZoneEventKind};

#[cfg(test)]
mod tests;
