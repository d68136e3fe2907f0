"""The house plan holds: imports point one way, with no cycles, and the rooms stay what the tree says.

Every import statement counts, lazy ones inside functions and `TYPE_CHECKING` ones included.
"""

from __future__ import annotations

import ast
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bridge", "index", "prompts")

# What each room of bridge/ may import from the project, besides itself, bridge.errors, bridge.extras and the
# package's own `bridge/__init__.py` (its version).
ALLOWED = {
    "bridge.llm": ("index.tokenize",),  # the one shared token estimate
    "bridge.server": ("index",),
    "bridge.chat": ("bridge.llm", "bridge.server", "index"),
    "bridge.measure": ("bridge.chat", "bridge.llm", "index"),
    "bridge.cli": ("bridge", "index"),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def _resolve(name: str) -> str | None:
    """The project module an imported name lives in (a symbol's module, or the module itself)."""
    known = modules()
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


@cache
def imports(module: str) -> frozenset[str]:
    tree = ast.parse(modules()[module].read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(m for m in map(_resolve, names) if m is not None and m != module)
    return frozenset(found)


def _cycle_from(start: str) -> list[str] | None:
    path: list[str] = []
    on_path: set[str] = set()
    done: set[str] = set()

    def visit(module: str) -> list[str] | None:
        if module in on_path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        path.append(module)
        on_path.add(module)
        for target in sorted(imports(module)):
            if (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        on_path.discard(module)
        done.add(module)
        return None

    return visit(start)


def test_no_module_imports_itself_through_a_cycle() -> None:
    cycles = [c for m in sorted(modules()) if (c := _cycle_from(m)) is not None]
    assert not cycles, "import cycle: " + " -> ".join(cycles[0])


def test_index_never_imports_bridge() -> None:
    offenders = {m: sorted(i for i in imports(m) if i.startswith("bridge")) for m in modules() if m.startswith("index")}
    assert not {m: i for m, i in offenders.items() if i}


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_each_room_of_bridge_imports_only_what_is_below_it(room: str) -> None:
    allowed = (room, "bridge.errors", "bridge.extras", *ALLOWED[room])

    def permitted(target: str) -> bool:
        return target == "bridge" or any(target == a or target.startswith(a + ".") for a in allowed)

    wrong = {
        m: sorted(i for i in imports(m) if not permitted(i))
        for m in modules()
        if m == room or m.startswith(room + ".")
    }
    assert not {m: i for m, i in wrong.items() if i}


# What each room of index/ may import from the project, besides itself and the loose base modules
# (INDEX_BASE). The data flows files -> store (and embed) -> history -> rank -> build and search, with
# milvus beside store; a new module lands in one of these rooms.
INDEX_BASE = ("index.errors", "index.types", "index.tokenize")
INDEX_ALLOWED = {
    "index.files": (),
    "index.store": (),
    "index.embed": ("index.store",),
    "index.history": ("index.store", "index.embed"),
    "index.rank": ("index.files",),
    "index.build": ("index.files", "index.store", "index.embed", "index.history"),
    "index.search": ("index.files", "index.store", "index.embed", "index.history", "index.rank"),
    "index.milvus": ("index.files", "index.store", "index.embed", "index.rank", "index.search"),
}


def _room_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_every_module_of_index_lives_in_a_room_or_the_base() -> None:
    homeless = [m for m in modules() if m.startswith("index.") and m not in INDEX_BASE and _room_of(m) not in INDEX_ALLOWED]
    assert not homeless


@pytest.mark.parametrize("room", sorted(INDEX_ALLOWED))
def test_each_room_of_index_imports_only_what_is_below_it(room: str) -> None:
    allowed = {room, "index", *INDEX_BASE, *INDEX_ALLOWED[room]}
    wrong = {
        m: sorted(i for i in imports(m) if i.startswith("index") and i not in allowed and _room_of(i) not in allowed)
        for m in modules()
        if _room_of(m) == room
    }
    assert not {m: i for m, i in wrong.items() if i}


def test_index_keeps_at_most_four_loose_modules() -> None:
    loose = sorted(p.name for p in (ROOT / "index").glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 4, loose


def test_the_base_modules_of_index_import_no_room() -> None:
    reaches = {m: sorted(i for i in imports(m) if i.startswith("index.") and i not in INDEX_BASE) for m in INDEX_BASE}
    assert not {m: i for m, i in reaches.items() if i}


def test_only_the_cli_and_main_import_the_cli() -> None:
    users = {m for m in modules() if any(i.startswith("bridge.cli") for i in imports(m))}
    assert users <= {"bridge.__main__"} | {m for m in modules() if m.startswith("bridge.cli")}


def test_bridge_keeps_at_most_six_loose_modules() -> None:
    loose = sorted(p.name for p in (ROOT / "bridge").glob("*.py"))
    assert len(loose) <= 6, loose


def _third_party_importers(name: str) -> set[str]:
    found = set()
    for module, path in modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                tops = {(node.module or "").split(".")[0]}
            else:
                continue
            if name in tops:
                found.add(module)
    return found


def test_only_the_llama_runtime_imports_llama_cpp() -> None:
    assert _third_party_importers("llama_cpp") == {"bridge.llm.llama"}


def test_only_the_embedder_modules_import_torch_or_sentence_transformers() -> None:
    embedders = {"index.embed.backends", "index.embed.minilm", "index.embed.choice"}  # choice: its CPU probes
    assert _third_party_importers("torch") | _third_party_importers("sentence_transformers") <= embedders


def test_every_package_declares_its_rooms_in_a_docstring() -> None:
    packages = [p for p in modules().values() if p.name == "__init__.py" and p.parent.name != "prompts"]
    undocumented = [str(p.relative_to(ROOT)) for p in packages if ast.get_docstring(ast.parse(p.read_text())) is None]
    assert not undocumented


# Prefixes of this team's machines and of personal home folders (spelled in pieces, so that this
# file does not name them itself).
MACHINE_PATHS = tuple("/" + p + "/" for p in ("work", "root", "Users"))


def test_no_tracked_file_names_a_path_of_one_machine() -> None:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode()
    offenders = []
    for name in filter(None, tracked.split("\0")):
        path = ROOT / name
        if path.is_file() and path.suffix in {".py", ".md", ".sh", ".toml", ".json", ".txt", ".yml", ""}:
            text = path.read_text(encoding="utf-8", errors="replace")
            offenders += [name for marker in MACHINE_PATHS if marker in text]
    assert not offenders


def test_docstrings_cite_documents_inside_the_repository() -> None:
    cited = {m.group(0) for p in modules().values() for m in re.finditer(r"[\w./-]*INTERFACES\.md", p.read_text())}
    assert cited <= {"docs/INTERFACES.md"}
    assert (ROOT / "docs" / "INTERFACES.md").is_file()
