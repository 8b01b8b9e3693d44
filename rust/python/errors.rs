//! Maps core errors to the exception classes of `npu_zc.errors`, which are
//! subclasses of `npu_zc.Error` and of the matching built-in.
