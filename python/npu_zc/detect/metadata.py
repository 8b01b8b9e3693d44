"""What an Ultralytics export says about itself: class names, task, stride, image size, end2end, kpt_shape.

Three places, read in this order (a later one only fills what an earlier one left out):

1. ``metadata.yaml`` beside the IR (an ``*_openvino_model/`` folder), read with PyYAML's ``safe_load``
   (Ultralytics writes it with PyYAML; a hand-written subset parser would trip on its quoting);
2. ONNX metadata properties, which OpenVINO keeps when it reads an ONNX file, under the model's
   ``rt_info["framework"]`` (the values are Python literals as text: ``"{0: 'person'}"``, read
   with :func:`ast.literal_eval`, never ``eval``);
3. the IR's ``rt_info["model_info"]`` that Ultralytics' OpenVINO export writes (``labels``, no task).

A model without any of them is still served: its kind comes from its output shapes. A file that is
there but does not parse, or holds values of the wrong kind, is one :class:`npu_zc.ModelError`.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from ..errors import InvalidArgumentError, ModelError

TASKS = ("detect", "segment", "pose", "obb", "classify")


@dataclass(frozen=True)
class YoloMetadata:
    """What is known about a YOLO model; ``None`` where no source said."""

    names: dict[int, str] = field(default_factory=dict)
    task: str | None = None
    stride: int | None = None
    imgsz: tuple[int, int] | None = None
    """(height, width) of the model input."""
    end2end: bool | None = None
    kpt_shape: tuple[int, int] | None = None
    batch: int | None = None
    sources: tuple[str, ...] = ()
    """Where the values came from, e.g. ``("metadata.yaml", "rt_info model_info")``."""

    @property
    def is_ultralytics(self) -> bool:
        return bool(self.sources)

    def merged(self, other: YoloMetadata) -> YoloMetadata:
        """These values, with what ``other`` knows filling the gaps."""
        filled = {
            name: getattr(other, name)
            for name in ("task", "stride", "imgsz", "end2end", "kpt_shape", "batch")
            if getattr(self, name) is None
        }
        names = self.names or other.names
        sources = self.sources + tuple(s for s in other.sources if s not in self.sources)
        return replace(self, names=names, sources=sources, **filled)

    def to_dict(self) -> dict[str, Any]:
        return {
            "names": {str(k): v for k, v in self.names.items()},
            "task": self.task,
            "stride": self.stride,
            "imgsz": list(self.imgsz) if self.imgsz else None,
            "end2end": self.end2end,
            "kpt_shape": list(self.kpt_shape) if self.kpt_shape else None,
            "batch": self.batch,
            "sources": list(self.sources),
        }


def model_file(path: str | Path) -> Path:
    """The model file of ``path``: itself, or the one ``.xml`` (else ``.onnx``) in an export folder."""
    path = Path(path)
    if not path.is_dir():
        return path
    for pattern in ("*.xml", "*.onnx"):
        found = sorted(path.glob(pattern))
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            listed = ", ".join(p.name for p in found)
            raise ModelError(f"{path} holds several models ({listed}): give the one to run")
    raise ModelError(f"{path} is a folder without a model (.xml or .onnx) in it")


def read(model_path: str | Path, model: Any = None) -> YoloMetadata:
    """The metadata of the model at ``model_path`` (a file or an ``*_openvino_model/`` folder).

    ``model`` is the ``openvino.Model`` already read from it, if any (its ``rt_info`` is read;
    otherwise the file is read here)."""
    path = model_file(model_path)
    found = YoloMetadata()
    beside = path.parent / "metadata.yaml"
    if beside.is_file():
        found = found.merged(read_yaml(beside))
    if model is None and path.suffix in (".xml", ".onnx") and path.is_file():
        from ..runtime.device import core

        try:
            model = core().read_model(str(path))
        except RuntimeError as exc:
            raise ModelError(f"cannot read the model {path}: {str(exc).splitlines()[0]}") from None
    if model is not None:
        found = found.merged(from_rt_info(model, path))
    return found


def read_yaml(path: Path) -> YoloMetadata:
    """Ultralytics' ``metadata.yaml``."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        raise ModelError(f"{path} is not valid YAML{at}: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise ModelError(f"{path} should hold a mapping of keys (names, task, imgsz...), not {type(data).__name__}")
    return _checked(data, str(path), "metadata.yaml")


def from_rt_info(model: Any, path: Path | str = "the model") -> YoloMetadata:
    """ONNX metadata properties (``rt_info["framework"]``) and the IR's ``rt_info["model_info"]``."""
    found = YoloMetadata()
    framework = _rt_section(model, "framework")
    if framework:
        values: dict[str, Any] = {}
        for key in ("names", "task", "stride", "imgsz", "end2end", "kpt_shape", "batch"):
            if key in framework:
                values[key] = _literal(framework[key], key, path)
        if values:
            found = found.merged(_checked(values, f"{path} (ONNX metadata)", "onnx metadata"))
    info = _rt_section(model, "model_info")
    if info and "labels" in info:
        labels = info["labels"]
        names = labels.split(" ") if isinstance(labels, str) else [str(v) for v in labels]
        found = found.merged(YoloMetadata(names=dict(enumerate(names)), sources=("rt_info model_info",)))
    return found


def _rt_section(model: Any, key: str) -> dict[str, Any]:
    """One section of a model's rt_info as plain values ({} when absent)."""
    try:
        if not model.has_rt_info([key]):
            return {}
        section = model.get_rt_info()[key]
    except (RuntimeError, KeyError, AttributeError):
        return {}
    if not isinstance(section, dict):
        return {}
    out: dict[str, Any] = {}
    for name, value in section.items():
        for kind in (str,):
            try:
                out[name] = value.astype(kind) if hasattr(value, "astype") else value
            except (RuntimeError, TypeError):
                pass
    if "labels" in section:  # a list in the IR: its text form is space-separated
        try:
            out["labels"] = model.get_rt_info([key, "labels"]).astype(str)
        except (RuntimeError, TypeError):
            pass
    return out


def _literal(text: Any, key: str, path: Path | str) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        if key == "task":
            return text
        raise ModelError(f"{path}: the ONNX metadata {key!r} is not a Python literal: {text[:80]!r}") from None


def _checked(data: Mapping[str, Any], where: str, source: str) -> YoloMetadata:
    """The known keys, each checked for its kind; unknown keys are ignored."""

    def bad(key: str, expected: str) -> ModelError:
        return ModelError(f"{where}: {key} should be {expected}, got {data[key]!r:.80}")

    names: dict[int, str] = {}
    if data.get("names") is not None:
        try:
            names = parse_names(data["names"])
        except ValueError:
            raise bad("names", "a list of class names or a mapping of class id to name") from None
    task = data.get("task")
    if task is not None and task not in TASKS:
        raise bad("task", "one of " + ", ".join(TASKS))
    stride = data.get("stride")
    if stride is not None and (isinstance(stride, bool) or not isinstance(stride, int) or stride <= 0):
        raise bad("stride", "a positive whole number")
    imgsz = data.get("imgsz")
    size: tuple[int, int] | None = None
    if imgsz is not None:
        dims = [imgsz] if isinstance(imgsz, int) else imgsz
        if (
            not isinstance(dims, (list, tuple))
            or not 1 <= len(dims) <= 2
            or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims)
        ):
            raise bad("imgsz", "a size or [height, width]")
        size = (int(dims[0]), int(dims[-1]))
    end2end = data.get("end2end")
    if end2end is not None and not isinstance(end2end, bool):
        raise bad("end2end", "true or false")
    kpt = data.get("kpt_shape")
    kpt_shape: tuple[int, int] | None = None
    if kpt is not None:
        if (
            not isinstance(kpt, (list, tuple))
            or len(kpt) != 2
            or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in kpt)
            or kpt[1] not in (2, 3)
        ):
            raise bad("kpt_shape", "[keypoints, 2 or 3]")
        kpt_shape = (int(kpt[0]), int(kpt[1]))
    batch = data.get("batch")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch <= 0):
        raise bad("batch", "a positive whole number")
    return YoloMetadata(names, task, stride, size, end2end, kpt_shape, batch, (source,))


def parse_names(value: Any) -> dict[int, str]:
    """Class names from a list or an {id: name} mapping (ids as ints or digit strings); ValueError otherwise."""
    if isinstance(value, (list, tuple)):
        pairs = list(enumerate(value))
    elif isinstance(value, dict):
        pairs = list(value.items())
    else:
        raise ValueError("not a list or mapping")
    names: dict[int, str] = {}
    for key, name in pairs:
        if isinstance(key, bool) or not isinstance(key, (int, str)) or not str(key).isdigit():
            raise ValueError(f"class id {key!r}")
        if not isinstance(name, (str, int, float)) or isinstance(name, bool):
            raise ValueError(f"class name {name!r}")
        names[int(key)] = str(name)
    return dict(sorted(names.items()))


def read_names(path: str | Path) -> dict[int, str]:
    """``--names FILE``: a YAML file (a dataset's ``data.yaml`` with ``names:``, or a list or mapping),
    a JSON list or mapping, or a text file with one name per line."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError(f"cannot read class names from {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text)
        elif path.suffix == ".json":
            data = json.loads(text)
        else:
            data = [line.strip() for line in text.splitlines() if line.strip()]
        if isinstance(data, dict) and "names" in data:
            data = data["names"]
        names = parse_names(data)
    except (yaml.YAMLError, json.JSONDecodeError, ValueError) as exc:
        raise InvalidArgumentError(
            f"{path} holds no class names (a list, an id -> name mapping, or names: in YAML): {exc}"
        ) from None
    if not names:
        raise InvalidArgumentError(f"{path} holds no class names")
    return names
