"""What an Ultralytics export says about itself: class names, task, stride, image size, end2end, kpt_shape.

Three places, read in this order (a later one only fills what an earlier one left out):

1. ``metadata.yaml`` beside the IR (an ``*_openvino_model/`` folder), read with PyYAML's safe loader
   (Ultralytics writes it with PyYAML; a hand-written subset parser would trip on its quoting);
2. ONNX metadata properties, which OpenVINO keeps when it reads an ONNX file, under the model's
   ``rt_info["framework"]`` (the values are Python literals as text: ``"{0: 'person'}"``, read
   with :func:`ast.literal_eval`, never ``eval``);
3. the IR's ``rt_info["model_info"]`` that Ultralytics' OpenVINO export writes (``labels``, no task).

A model without any of them is still served: its kind comes from its output shapes. A file that is
there but does not parse, or holds values of the wrong kind, is one :class:`npu_zc.ModelError`.

These files come with a model from anywhere, so every read is bounded: the file's size
(:data:`MAX_FILE_BYTES`), a text value's length (:data:`MAX_TEXT`), the nesting (:data:`MAX_DEPTH`), a
number's size (:data:`MAX_NUMBER`); YAML aliases are refused (a kilobyte of nested aliases expands to
billions of nodes), and an error quotes at most a short prefix of what it read.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from .._files import read_regular_file
from ..errors import InvalidArgumentError, ModelError

TASKS = ("detect", "segment", "pose", "obb", "classify")

MAX_FILE_BYTES = 1 << 20
"""The most bytes a ``metadata.yaml`` or ``--names`` file may have: room for tens of thousands of class names."""
MAX_TEXT = 1 << 20
"""The most characters of one ONNX metadata or ``rt_info`` value, or of one YAML scalar."""
MAX_DEPTH = 32
"""The deepest nesting of lists and mappings read (Ultralytics writes 2 levels)."""
MAX_NUMBER = 1 << 31
"""The largest stride, image side, batch, keypoint count or class id taken."""
MAX_DIGITS = 32
"""The most characters of an integer scalar (int() of thousands of digits is refused by Python itself)."""


def brief(value: Any, limit: int = 60) -> str:
    """A short description of an untrusted value for an error message: never the repr of a whole structure
    (which could be billions of nodes, or nested past the recursion limit)."""
    if isinstance(value, (list, tuple, dict, set)):
        return f"a {type(value).__name__} of {len(value)} item(s)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        text = repr(value[: limit + 1] if isinstance(value, (str, bytes)) else value)
        return text if len(text) <= limit else text[:limit] + "..."
    return f"a {type(value).__name__}"


def _safe_loader() -> type:
    """PyYAML's safe loading without aliases, without deep nesting, without huge scalars or integers; its
    refusals are ``yaml.YAMLError``. PyYAML's own composer (the step that resolves aliases and builds the
    node tree) is bounded here; it reads events from libyaml's parser where PyYAML has it (five times
    faster than the pure-Python one)."""
    import yaml
    from yaml.composer import Composer
    from yaml.constructor import SafeConstructor
    from yaml.events import AliasEvent, ScalarEvent
    from yaml.resolver import Resolver

    class Refused(yaml.YAMLError):
        def __init__(self, problem: str) -> None:
            super().__init__(problem)
            self.problem = problem

    parser: type
    if getattr(yaml, "__with_libyaml__", False):
        from yaml._yaml import CParser as parser
    else:
        from yaml.parser import Parser
        from yaml.reader import Reader
        from yaml.scanner import Scanner

        class parser(Reader, Scanner, Parser):  # type: ignore[no-redef]
            def __init__(self, stream: str) -> None:
                Reader.__init__(self, stream)
                Scanner.__init__(self)
                Parser.__init__(self)

    class BoundedLoader(Composer, parser, SafeConstructor, Resolver):  # type: ignore[misc]
        """Composer first: its node building (bounded below) over the parser's events."""

        def __init__(self, stream: str) -> None:
            parser.__init__(self, stream)  # type: ignore[misc]
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self.depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if isinstance(event, AliasEvent) or getattr(event, "anchor", None) is not None:
                line = event.start_mark.line + 1
                raise Refused(f"YAML anchors and aliases are not read (line {line})")
            if isinstance(event, ScalarEvent) and len(event.value) > MAX_TEXT:
                raise Refused(f"a value of {len(event.value):,} characters, over the limit of {MAX_TEXT:,}")
            if self.depth >= MAX_DEPTH:
                raise Refused(f"lists or mappings nested more than {MAX_DEPTH} deep")
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_yaml_int(self, node: Any) -> Any:
            if len(node.value) > MAX_DIGITS:
                raise Refused(f"an integer of {len(node.value):,} characters (line {node.start_mark.line + 1})")
            return super().construct_yaml_int(node)

    BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)
    return BoundedLoader


def load_yaml(text: str) -> Any:
    """``text`` as YAML through the bounded safe loader; ``yaml.YAMLError`` for what it cannot or will not read."""
    loader = _loader()(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


_LOADER: list[type] = []


def _loader() -> type:
    if not _LOADER:
        _LOADER.append(_safe_loader())
    return _LOADER[0]


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
    if beside.exists():  # a FIFO or a device there is refused, not skipped
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

    raw = read_regular_file(path, "the model's metadata", ModelError, limit=MAX_FILE_BYTES)
    try:
        data = load_yaml(raw.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ModelError(f"{path} is not valid YAML{_yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise ModelError(f"{path} should hold a mapping of keys (names, task, imgsz...), not {type(data).__name__}")
    return _checked(data, str(path), "metadata.yaml")


def _yaml_problem(exc: BaseException) -> str:
    """``" (line N): problem"``, from what PyYAML raised, at most a line long."""
    where = getattr(exc, "problem_mark", None)
    at = f" (line {where.line + 1})" if where is not None else ""
    return f"{at}: {str(getattr(exc, 'problem', None) or exc)[:160]}"


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
        if len(labels) > MAX_TEXT:
            raise ModelError(f"{path}: the rt_info labels hold {len(labels):,} items, over the limit of {MAX_TEXT:,}")
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
    if len(text) > MAX_TEXT:
        raise ModelError(f"{path}: the ONNX metadata {key!r} has {len(text):,} characters, over the limit of {MAX_TEXT:,}")
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        # RecursionError and MemoryError: how the parser says "nested too deep" (a bounded text: not an OOM)
        if key == "task":
            return text
        raise ModelError(f"{path}: the ONNX metadata {key!r} is not a Python literal: {brief(text)}") from None
    if _depth(value) > MAX_DEPTH:
        raise ModelError(f"{path}: the ONNX metadata {key!r} is nested more than {MAX_DEPTH} deep")
    return value


def _depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep lists, tuples, sets and dicts nest in ``value`` (counting stops past ``limit``); no recursion."""
    level, deepest = [value], 0
    while level and deepest <= limit:
        deepest += 1
        inner: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                inner.extend(item.keys())
                inner.extend(item.values())
            elif isinstance(item, (list, tuple, set, frozenset)):
                inner.extend(item)
        level = [item for item in inner if isinstance(item, (list, tuple, set, frozenset, dict))]
    return deepest


def _checked(data: Mapping[str, Any], where: str, source: str) -> YoloMetadata:
    """The known keys, each checked for its kind; unknown keys are ignored."""

    def bad(key: str, expected: str) -> ModelError:
        return ModelError(f"{where}: {key} should be {expected}, got {brief(data[key])}")

    def whole(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_NUMBER

    names: dict[int, str] = {}
    if data.get("names") is not None:
        try:
            names = parse_names(data["names"])
        except ValueError as exc:
            raise ModelError(
                f"{where}: names should be a list of class names or a mapping of class id to name ({exc})"
            ) from None
    task = data.get("task")
    if task is not None and task not in TASKS:
        raise bad("task", "one of " + ", ".join(TASKS))
    stride = data.get("stride")
    if stride is not None and not whole(stride):
        raise bad("stride", f"a whole number from 1 to {MAX_NUMBER}")
    imgsz = data.get("imgsz")
    size: tuple[int, int] | None = None
    if imgsz is not None:
        dims = [imgsz] if isinstance(imgsz, int) else imgsz
        if (
            not isinstance(dims, (list, tuple))
            or not 1 <= len(dims) <= 2
            or not all(whole(d) for d in dims)
        ):
            raise bad("imgsz", f"a size or [height, width], each from 1 to {MAX_NUMBER}")
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
            or not all(whole(d) for d in kpt)
            or kpt[1] not in (2, 3)
        ):
            raise bad("kpt_shape", "[keypoints, 2 or 3]")
        kpt_shape = (int(kpt[0]), int(kpt[1]))
    batch = data.get("batch")
    if batch is not None and not whole(batch):
        raise bad("batch", f"a whole number from 1 to {MAX_NUMBER}")
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
        if isinstance(key, str) and len(key) > MAX_DIGITS or isinstance(key, int) and key.bit_length() > 64:
            raise ValueError(f"class id {brief(key)}")
        if isinstance(key, bool) or not isinstance(key, (int, str)) or not str(key).isdigit():
            raise ValueError(f"class id {brief(key)}")
        if int(key) > MAX_NUMBER:
            raise ValueError(f"class id {brief(key)}, over {MAX_NUMBER}")
        if not isinstance(name, (str, int, float)) or isinstance(name, bool):
            raise ValueError(f"class name {brief(name)}")
        names[int(key)] = str(name)
    return dict(sorted(names.items()))


def read_names(path: str | Path) -> dict[int, str]:
    """``--names FILE``: a YAML file (a dataset's ``data.yaml`` with ``names:``, or a list or mapping),
    a JSON list or mapping, or a text file with one name per line."""
    import yaml

    path = Path(path)
    raw = read_regular_file(path, "the class names file", InvalidArgumentError, limit=MAX_FILE_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"cannot read class names from {path}: not UTF-8 text (at byte {exc.start})") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            data = load_yaml(text)
        elif path.suffix == ".json":
            data = json.loads(text)
            if _depth(data) > MAX_DEPTH:
                raise ValueError(f"lists or mappings nested more than {MAX_DEPTH} deep")
        else:
            data = [line.strip() for line in text.splitlines() if line.strip()]
        if isinstance(data, dict) and "names" in data:
            data = data["names"]
        names = parse_names(data)
    except yaml.YAMLError as exc:
        raise InvalidArgumentError(f"{path} is not valid YAML{_yaml_problem(exc)}") from None
    except (ValueError, RecursionError) as exc:  # json: RecursionError for a deep nesting
        problem = "nested too deep" if isinstance(exc, RecursionError) else str(exc)[:160]
        raise InvalidArgumentError(
            f"{path} holds no class names (a list, an id -> name mapping, or names: in YAML): {problem}"
        ) from None
    if not names:
        raise InvalidArgumentError(f"{path} holds no class names")
    return names
