# Type stubs of the extension module npu_zc._core (the Rust core).
# Checked in CI with mypy.stubtest against the built module.

__version__: str

# --- buffers ---

# --- layout ---
