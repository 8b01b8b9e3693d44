"""The crate's files import one way: no file of rust/ reaches itself through
the items it names (docs/architecture.md, "Arrows inside layout/" and the
rooms' arrows). Each file's `use` trees and inline paths (`super::x::f`,
`crate::layout::...`, `scalar::tail`) are resolved, through re-exports, to
the file that defines the item; the graph of those edges must have no cycle,
and `detect/` and `simd/` must not reach into `layout/`.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "rust"

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def module_files() -> dict[tuple[str, ...], Path]:
    """Module path (("layout", "kernels", "x86"), ...; () for lib.rs) -> its file."""
    files: dict[tuple[str, ...], Path] = {}
    for path in ROOT.rglob("*.rs"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] in ("mod", "lib") and (parts[-1] == "mod" or len(parts) == 1):
            parts = parts[:-1]
        files[tuple(parts)] = path
    return files


def code_of(path: Path) -> str:
    """The file's text without comments, string literals and `#[cfg(test)]` modules."""
    # One token pattern, so that a quote inside a comment or a char literal
    # (`'"'`) cannot start a string, nor `//` inside a string a comment.
    token = re.compile(r"""//[^\n]*|/\*.*?\*/|"(?:[^"\\]|\\.)*"|'(?:\\.|[^'\\])'""", re.S)
    text = token.sub(lambda m: '""' if m.group(0)[0] in "\"'" else " ", path.read_text())
    # Test modules may reach anywhere (they test through the public entry points).
    while match := re.search(r"#\[cfg\(test\)\]\s*mod \w+\s*\{", text):
        depth, end = 0, match.end() - 1
        for end in range(match.end() - 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        text = text[: match.start()] + text[end + 1 :]
    return text


def use_trees(code: str) -> list[list[str]]:
    """Every path a `use` declaration names, as segment lists (groups expanded)."""
    paths: list[list[str]] = []

    def expand(prefix: list[str], tree: str) -> None:
        tree = tree.strip()
        if not tree:
            return
        if tree.endswith("}") and "{" in tree:
            head, inner = tree.split("{", 1)
            head_parts = [p for p in head.strip().rstrip(":").split("::") if p]
            depth, start = 0, 0
            inner = inner[:-1]
            for i, ch in enumerate(inner + ","):
                if ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                elif ch == "," and depth == 0:
                    expand(prefix + head_parts, inner[start:i])
                    start = i + 1
            return
        name = tree.split(" as ")[0].strip()
        parts = [p for p in name.split("::") if p]
        paths.append(prefix + [p for p in parts if p != "self"] if parts != ["self"] else prefix)

    for match in re.finditer(r"\buse\s+([^;]+);", code):
        expand([], " ".join(match.group(1).split()))
    return paths


def import_graph() -> tuple[dict[tuple[str, ...], Path], dict[tuple[str, ...], set[tuple[str, ...]]]]:
    """The crate's files, and for each the files that define the items it names."""
    files = module_files()
    codes = {m: code_of(p) for m, p in files.items()}
    # Re-exports: `pub... use path::name;` in a module makes `module::name` mean the original.
    reexports: dict[tuple[str, ...], dict[str, list[str]]] = {}
    aliases: dict[tuple[str, ...], dict[str, tuple[str, ...]]] = {}

    def absolute(module: tuple[str, ...], parts: list[str]) -> list[str]:
        """`parts` as seen from `module`, made absolute (from the crate root)."""
        if not parts:
            return list(module)
        if parts[0] == "crate":
            return parts[1:]
        if parts[0] == "$crate":
            return []
        base = list(module)
        rest = list(parts)
        if rest[0] == "self":
            rest = rest[1:]
        elif rest[0] == "super":
            while rest and rest[0] == "super":
                base = base[:-1]
                rest = rest[1:]
        elif tuple(base + [rest[0]]) in files:
            pass  # a child module
        elif rest[0] in aliases.get(module, {}):
            return list(aliases[module][rest[0]]) + rest[1:]
        else:
            return []  # std, core, pyo3, a local item: not a file of the crate
        return base + rest

    for module, code in codes.items():
        for match in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
            for parts in use_trees("use " + match.group(1) + ";"):
                full = absolute(module, parts)
                if full:
                    reexports.setdefault(module, {})[full[-1]] = full
        for parts in use_trees(code):
            full = absolute(module, parts)
            if full and tuple(full) in files:
                aliases.setdefault(module, {})[full[-1]] = tuple(full)

    def defining_file(full: list[str], seen: int = 0) -> tuple[str, ...] | None:
        """The module whose file defines the item `full` names."""
        longest = None
        for n in range(len(full), 0, -1):
            if tuple(full[:n]) in files:
                longest = n
                break
        if longest is None:
            return None
        module = tuple(full[:longest])
        rest = full[longest:]
        if rest and seen < 8 and rest[0] in reexports.get(module, {}):
            return defining_file(reexports[module][rest[0]] + rest[1:], seen + 1)
        return module

    edges: dict[tuple[str, ...], set[tuple[str, ...]]] = {m: set() for m in files}
    for module, code in codes.items():
        named = use_trees(code)
        named += [p.split("::") for p in re.findall(rf"(?<![:\w$]){IDENT}(?:::{IDENT})+", code)]
        # `super::Item` inside an inline module (`mod stamped { use super::Neon; }`)
        # names an item of this very file.
        own = set(re.findall(rf"\b(?:struct|enum|trait|fn|type|const|static)\s+({IDENT})", code))
        for parts in named:
            if parts[:1] == ["super"] and len(parts) == 2 and parts[1] in own:
                continue
            full = absolute(module, parts)
            target = defining_file(full) if full else None
            if target is not None and target != module:
                edges[module].add(target)
    return files, edges


def test_no_file_of_the_crate_imports_itself_in_a_circle() -> None:
    files, edges = import_graph()

    # Depth-first search for a cycle; report it as a chain of files.
    state: dict[tuple[str, ...], int] = {}
    stack: list[tuple[str, ...]] = []

    def visit(m: tuple[str, ...]) -> list[tuple[str, ...]] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (cycle := visit(n)):
                return cycle
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(files):
        if m not in state and (cycle := visit(m)):
            chain = " -> ".join(str(files[x].relative_to(ROOT)) for x in cycle)
            raise AssertionError(f"rust/ imports in a circle: {chain}")
    # The check sees the arrows it must: the homes read the written-once kernels.
    kernels = ("layout", "kernels")
    assert kernels + ("vector",) in edges[kernels + ("neon",)]
    assert kernels + ("x86",) in edges[kernels]
    assert ("layout", "plan") in edges[kernels + ("scalar",)]
    # ...and across the rooms: the binding reads the cores, detect the simd room.
    assert ("python", "buffer", "dmabuf") in edges[("python", "buffer")]
    assert ("simd", "level") in edges[("detect", "nms")]
    assert ("buffer", "error") in edges[("capture", "error")]


def test_detect_and_simd_do_not_reach_into_layout() -> None:
    _, edges = import_graph()
    for module, targets in edges.items():
        if module[:1] in (("detect",), ("simd",)) and module[-1] != "tests":
            into_layout = sorted("/".join(t) for t in targets if t[:1] == ("layout",))
            assert not into_layout, f"rust/{'/'.join(module)} reaches into layout: {into_layout}"
