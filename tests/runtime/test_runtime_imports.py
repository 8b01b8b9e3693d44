"""npu_zc's modules import one another without a circle: the whole package,
and within runtime and pipeline also with their ``__init__`` left out.

Every import counts: at the top, under ``TYPE_CHECKING`` and inside functions,
since each one ties the two files together when either changes. A circle
(session -> queue -> session) means neither file can be understood, tested
or changed alone.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE_ROOT = REPO / "python" / "npu_zc"


def module_names(package: Path) -> dict[str, Path]:
    """Dotted names (relative to ``package``'s parent) of every module under it: ``runtime.queue`` -> its file."""
    names: dict[str, Path] = {}
    for path in sorted([*package.rglob("*.py"), *package.rglob("_core.pyi")]):  # _core: the compiled module
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def import_graph(package: Path) -> dict[str, set[str]]:
    """For each module of ``package``, the modules of the same package it imports (every import statement)."""
    modules = module_names(package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    # Absolute imports are spelled from the top (npu_zc.runtime.x); the graph's names start at package's parent:
    # runtime.x for the package runtime, npu_zc.runtime.x for the whole of npu_zc.
    outer = package.parent.name + "."
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        here = name.split(".") if is_package else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                    stem = ".".join(base + ([node.module] if node.module else []))
                elif node.module and (local := local_name(node.module, package, outer)):
                    stem = local
                else:
                    continue
                for alias in node.names:
                    # `from .model import X` imports the module model; `from . import remote` the module remote
                    # (its package is imported first whatever the module, as every module's is: no edge to it);
                    # `from .zoo import Y` the package zoo (its __init__).
                    submodule = f"{stem}.{alias.name}"
                    targets.append(submodule if submodule in modules else stem)
            elif isinstance(node, ast.Import):
                targets = [local for a in node.names if (local := local_name(a.name, package, outer))]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def local_name(module: str, package: Path, outer: str) -> str | None:
    """``module``'s name in ``package``'s graph, or None when it is outside the package."""
    if module.startswith(outer):
        return module[len(outer) :]
    if module == package.name or module.startswith(package.name + "."):
        return module
    return None


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


def test_the_whole_package_imports_without_a_circle() -> None:
    graph = import_graph(PACKAGE_ROOT)
    files = {*PACKAGE_ROOT.rglob("*.py"), *PACKAGE_ROOT.rglob("_core.pyi")}
    assert set(module_names(PACKAGE_ROOT).values()) == files
    # The command's modules take the install hints from a module of their own, not from main.
    assert "npu_zc.cli.install" in graph["npu_zc.cli.info"] and "npu_zc.cli.main" not in graph["npu_zc.cli.info"]
    assert "npu_zc._core" in graph["npu_zc.buffers"] and "npu_zc.runtime.session" in graph["npu_zc.pipeline.throughput"]
    cycle = find_cycle(graph)
    assert cycle is None, "import circle in npu_zc: " + " -> ".join(cycle or [])


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


def test_sources_are_a_floor_below_the_pipeline() -> None:
    """Nothing in sources/ imports pipeline/, directly or through another module: the pipeline reads sources,
    never the other way round (so a source can be understood, tested and added without the pipeline)."""
    graph = import_graph(PACKAGE_ROOT)
    sources = [name for name in graph if name == "npu_zc.sources" or name.startswith("npu_zc.sources.")]
    assert "npu_zc.sources.image" in sources and "npu_zc.sources" in graph["npu_zc.pipeline.streams"]
    for start in sources:
        seen, todo = {start}, [start]
        while todo:
            for nxt in graph[todo.pop()]:
                assert not nxt.startswith("npu_zc.pipeline"), f"{start} reaches {nxt}"
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)


def test_sinks_are_a_floor_below_the_service() -> None:
    """Nothing in sinks/ imports serve/, directly or through another module: the service uses the sinks (MQTT,
    metrics, the live view), never the other way round (so each sink can be used and tested without the service)."""
    graph = import_graph(PACKAGE_ROOT)
    sinks = [name for name in graph if name == "npu_zc.sinks" or name.startswith("npu_zc.sinks.")]
    assert {"npu_zc.sinks.mqtt", "npu_zc.sinks.metrics", "npu_zc.sinks.live"} <= set(sinks)
    assert "npu_zc.sinks.mqtt" in graph["npu_zc.serve.config"] and "npu_zc.sinks.metrics" in graph["npu_zc.serve.service"]
    for start in sinks:
        seen, todo = {start}, [start]
        while todo:
            for nxt in graph[todo.pop()]:
                assert not nxt.startswith("npu_zc.serve"), f"{start} reaches {nxt}"
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)


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
    assert graph["runtime.model"] == {"runtime.session"}
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
