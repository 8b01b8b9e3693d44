//! Layout engine: frame format conversions into NPU HW layouts and back.
