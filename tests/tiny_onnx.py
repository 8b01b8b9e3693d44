"""Tiny ONNX models written byte by byte (a minimal protobuf writer: just the fields
these models need), so that tests need neither the onnx package nor a download.

colour_classifier: average colour -> red / green / blue logits with known weights,
so that its answers can be checked without a reference implementation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

COLOURS = ("red", "green", "blue")

# --- a minimal ONNX (protobuf) writer: just the fields these models need ---


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64 fields: two's complement
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, value: int | bytes | str) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def value_info(name: str, dims: list[int | str]) -> bytes:
    shape = b"".join(_field(1, _field(2, d) if isinstance(d, str) else _field(1, d)) for d in dims)
    tensor_type = _field(1, 1) + _field(2, shape)  # elem_type FLOAT, shape
    return _field(1, name) + _field(2, _field(1, tensor_type))


def tensor(name: str, array: np.ndarray) -> bytes:
    dims = b"".join(_field(1, int(d)) for d in array.shape)
    return dims + _field(2, 1) + _field(8, name) + _field(9, array.astype("<f4").tobytes())


def node(op: str, inputs: list[str], outputs: list[str], **attributes: int | list[int]) -> bytes:
    out = b"".join(_field(1, i) for i in inputs) + b"".join(_field(2, o) for o in outputs) + _field(4, op)
    for name, value in attributes.items():
        if isinstance(value, list):  # INTS
            attr = _field(1, name) + b"".join(_field(8, v) for v in value) + _field(20, 7)
        else:  # INT
            attr = _field(1, name) + _field(3, value) + _field(20, 2)
        out += _field(5, attr)
    return out


def write_onnx(path: Path, nodes: list[bytes], inputs: list[bytes], outputs: list[bytes], initializers: list[bytes]) -> Path:
    graph = b"".join(_field(1, n) for n in nodes) + _field(2, "tiny")
    graph += b"".join(_field(5, t) for t in initializers)
    graph += b"".join(_field(11, i) for i in inputs) + b"".join(_field(12, o) for o in outputs)
    model = _field(1, 8) + _field(2, "npu_zc tests") + _field(7, graph) + _field(8, _field(2, 13))
    path.write_bytes(model)
    return path


# Each class scores its channel's mean minus the mean of the other two.
WEIGHTS = np.array([[1, -0.5, -0.5], [-0.5, 1, -0.5], [-0.5, -0.5, 1]], np.float32) / 8


def colour_classifier(path: Path, *, nhwc: bool = False, batch: int | str = "batch", size: int | str = 32) -> Path:
    """ONNX: average colour -> [red, green, blue] logits; input RGB in 0..255, NCHW or NHWC."""
    nodes = []
    image = "image"
    if nhwc:
        nodes.append(node("Transpose", ["image"], ["nchw"], perm=[0, 3, 1, 2]))
        image = "nchw"
    nodes += [
        node("GlobalAveragePool", [image], ["pooled"]),
        node("Flatten", ["pooled"], ["flat"], axis=1),
        node("Gemm", ["flat", "weights", "bias"], ["scores"]),
    ]
    dims: list[int | str] = [batch, size, size, 3] if nhwc else [batch, 3, size, size]
    return write_onnx(
        path,
        nodes,
        [value_info("image", dims)],
        [value_info("scores", [batch, 3])],
        [tensor("weights", WEIGHTS), tensor("bias", np.zeros(3, np.float32))],
    )
