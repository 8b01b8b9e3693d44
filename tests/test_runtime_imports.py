"""The runtime's modules import one another without a circle.

Every import counts: at the top, under ``TYPE_CHECKING`` and inside functions,
since each one ties the two files together when either changes. A circle
(session -> queue -> session) means neither file can be understood, tested
or changed alone.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "python" / "npu_zc"


def module_names(package: Path) -> dict[str, Path]:
    """Dotted names (relative to ``package``'s parent) of every module under it: ``runtime.queue`` -> its file."""
    names: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def import_graph(package: Path) -> dict[str, set[str]]:
    """For each module of ``package``, the modules of the same package it imports (every import statement)."""
    modules = module_names(package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    top = package.parent.name  # "npu_zc": absolute imports are spelled npu_zc.runtime.x
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        here = name.split(".") if is_package else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                    stem = ".".join(base + ([node.module] if node.module else []))
                elif node.module and node.module.startswith(top + "."):
                    stem = node.module[len(top) + 1 :]
                else:
                    continue
                for alias in node.names:
                    # `from .model import X` imports the module model; `from . import remote` the package and the
                    # module remote; `from .zoo import face_detection` the package zoo and its module.
                    targets.append(stem)
                    if f"{stem}.{alias.name}" in modules:
                        targets.append(f"{stem}.{alias.name}")
            elif isinstance(node, ast.Import):
                targets = [a.name[len(top) + 1 :] for a in node.names if a.name.startswith(top + ".")]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle (a list of modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def graph_without_package(package: str = "runtime") -> dict[str, set[str]]:
    """A package's modules and their imports; its ``__init__`` (which imports them all to re-export) left out."""
    graph = import_graph(PACKAGE_ROOT / package)
    graph.pop(package, None)
    return {name: {t for t in targets if t != package} for name, targets in graph.items()}


def test_runtime_modules_import_without_a_circle() -> None:
    graph = graph_without_package("runtime")
    assert {"runtime.session", "runtime.queue", "runtime.request", "runtime.target"} <= set(graph)
    assert "runtime.target" in graph["runtime.queue"] and "runtime.target" in graph["runtime.request"]
    cycle = find_cycle(graph)
    assert cycle is None, "import circle in npu_zc.runtime: " + " -> ".join(cycle or [])


def test_pipeline_modules_import_without_a_circle() -> None:
    # The throughput runner is given the session, the spec and the postprocess, not the pipeline.
    graph = graph_without_package("pipeline")
    assert "pipeline.throughput" in graph["pipeline.pipeline"]
    cycle = find_cycle(graph)
    assert cycle is None, "import circle in npu_zc.pipeline: " + " -> ".join(cycle or [])


def test_requests_and_queues_do_not_know_the_session() -> None:
    graph = graph_without_package("runtime")
    for name in ("runtime.queue", "runtime.request", "runtime.target", "runtime.binding"):
        assert "runtime.session" not in graph[name], f"{name} imports the session"


def test_the_check_finds_a_circle_hidden_under_type_checking(tmp_path: Path) -> None:
    # The old shape of the runtime: session imports request at the top, request imports session for typing only.
    package = tmp_path / "pkg" / "runtime"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "request.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .session import Session\n"
    )
    (package / "session.py").write_text("from .request import Request\n")
    (package / "model.py").write_text("def f():\n    from . import session\n")
    graph = import_graph(package)
    assert graph["runtime.request"] == {"runtime.session"}
    assert graph["runtime.model"] == {"runtime", "runtime.session"}
    assert find_cycle(graph) in (
        ["runtime.request", "runtime.session", "runtime.request"],
        ["runtime.session", "runtime.request", "runtime.session"],
    )
    (package / "request.py").write_text("")
    assert find_cycle(import_graph(package)) is None


@pytest.mark.parametrize("package", ["runtime", "pipeline"])
def test_every_module_is_seen(package: str) -> None:
    files = {p for p in (PACKAGE_ROOT / package).rglob("*.py")}
    assert set(module_names(PACKAGE_ROOT / package).values()) == files
