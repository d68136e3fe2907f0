"""Tree-sitter: which grammar a file takes, its syntax tree, and the definitions in it.

Grammars come from the per-language `tree-sitter-*` wheels (offline); a missing wheel or a failed
parse gives no tree, and the chunker then falls back to line windows. Parsers are cached per
grammar and thread (tree-sitter parsers must not be shared between threads). `outline` lists a
file's definitions (the server's `list_symbols`); the helpers below are what the chunker
(index/files/chunk.py) uses to cut a tree at its definitions.
"""

from __future__ import annotations

import importlib
import re
import threading
from dataclasses import dataclass
from functools import cache
from typing import Any

from index.types import SourceFile

__all__ = ["CONTAINERS", "GRAMMARS", "Symbol", "definition", "grammar_for", "inner", "lines_of", "outline", "root_of", "span"]


@dataclass(frozen=True, slots=True)
class Symbol:
    """One definition in a file; `parent` is the qualified name of the enclosing definition."""

    name: str
    kind: str
    start_line: int
    end_line: int
    parent: str | None


# grammar -> (module of its per-language tree-sitter wheel, function returning the language)
GRAMMARS: dict[str, tuple[str, str]] = {
    **{name: (f"tree_sitter_{name}", "language") for name in ("python", "javascript", "go", "rust",
                                                              "java", "c", "cpp")},
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
}
_LANGUAGE_GRAMMAR = {"jsx": "javascript", "c++": "cpp", "cuda": "cpp", "markdown": "markdown",
                     **{g: g for g in GRAMMARS}}
_EXTENSION_GRAMMAR = {
    **dict.fromkeys(("py", "pyi", "pyw"), "python"),
    **dict.fromkeys(("js", "mjs", "cjs", "jsx"), "javascript"),
    **dict.fromkeys(("ts", "mts", "cts"), "typescript"),
    "tsx": "tsx", "go": "go", "rs": "rust", "java": "java", "c": "c", "h": "c",
    **dict.fromkeys(["cc", "cpp", "cxx", "c++", "hh", "hpp", "hxx", "h++", "ipp", "tpp", "inl", "cu", "cuh"], "cpp"),
    **dict.fromkeys(("md", "markdown", "mdx"), "markdown"),
}

_KINDS = {  # node type -> kind of definition, across the supported grammars
    node_type: kind
    for kind, node_types in {
        "function": "function_definition function_declaration generator_function_declaration "
        "function_item function_signature_item lexical_declaration variable_declaration",
        "method": "method_definition method_declaration", "constructor": "constructor_declaration",
        "class": "class_definition class_declaration abstract_class_declaration class_specifier "
        "record_declaration", "interface": "interface_declaration annotation_type_declaration",
        "trait": "trait_item", "impl": "impl_item", "struct": "struct_specifier struct_item",
        "union": "union_specifier union_item", "enum": "enum_specifier enum_declaration enum_item",
        "type": "type_alias_declaration type_declaration type_item type_definition",
        "namespace": "namespace_definition internal_module", "module": "module mod_item",
        "macro": "macro_definition preproc_function_def",
    }.items()
    for node_type in node_types.split()
}
CONTAINERS = frozenset({"class", "interface", "trait", "impl", "struct", "union", "enum", "type",
                         "namespace", "module"})
_NEEDS_BODY = frozenset({"struct_specifier", "union_specifier", "enum_specifier", "class_specifier"})
_WRAPPERS = frozenset({"decorated_definition", "export_statement", "template_declaration",
                       "ambient_declaration", "expression_statement"})
_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "class",
                              "generator_function"})
_TRANSPARENT = frozenset({"preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif",
                          "linkage_specification", "declaration_list"})
_CPP_HINT = re.compile(r"^\s*(?:class|namespace|template|public:|private:|protected:)\b|\bstd::", re.M)
_threads = threading.local()


def outline(file: SourceFile) -> list[Symbol]:
    """Definitions of a code file in source order, nested ones after their parent; [] otherwise."""
    root = root_of(file, file.text.splitlines())
    out: list[Symbol] = []
    if root is not None:
        _collect(root.named_children, None, None, out)
    return out


def grammar_for(file: SourceFile) -> str | None:
    """The tree-sitter grammar (or "markdown") for a file: its language first, then its suffix."""
    suffix = file.path.rsplit("/", 1)[-1].rpartition(".")[2].lower()
    grammar = _LANGUAGE_GRAMMAR.get((file.language or "").lower()) or _EXTENSION_GRAMMAR.get(suffix)
    if grammar == "typescript" and suffix == "tsx":
        return "tsx"
    if grammar == "c" and suffix == "h" and _CPP_HINT.search(file.text):
        return "cpp"  # a .h file is C or C++; the C grammar cannot parse classes or namespaces
    return grammar


def inner(node: Any) -> list[Any]:
    """Nodes to split `node` at: its children, looking through a body that holds nearly all of it."""
    if node.parent is None:
        return list(node.named_children)
    current = _unwrap(node)
    for _ in range(8):
        kids: list[Any] = list(current.named_children)
        if not kids:
            return kids
        biggest = max(kids, key=span)
        if span(current) - span(biggest) > max(3, span(current) // 5):
            return kids
        if definition(biggest)[0] is not None:
            return kids
        current = biggest
    return list(current.named_children)


def _collect(nodes: list[Any], parent: str | None, parent_kind: str | None, out: list[Symbol]) -> None:
    for node in nodes:
        kind, name = definition(node)
        if kind is None or name is None:
            if node.type in _TRANSPARENT:
                _collect(node.named_children, parent, parent_kind, out)
            continue
        if kind == "function" and parent_kind in CONTAINERS:
            kind = "method"
        qualifier, _, simple = name.rpartition(".")
        first, last = lines_of(node)
        out.append(Symbol(simple, kind, first, last, ".".join(p for p in (parent, qualifier) if p) or None))
        if kind in CONTAINERS:
            qualified = f"{parent}.{name}" if parent else name
            _collect(inner(_unwrap(node)), qualified, kind, out)


def definition(node: Any) -> tuple[str | None, str | None]:
    """(kind, name) when `node` (or the declaration it wraps) defines something, else (None, None)."""
    node = _unwrap(node)
    kind = _KINDS.get(node.type)
    if kind is None or (node.type in _NEEDS_BODY and node.child_by_field_name("body") is None):
        return None, None
    name = _name(node)
    return (kind, name) if name else (None, None)


def _unwrap(node: Any) -> Any:
    for _ in range(4):
        if node.type not in _WRAPPERS:
            break
        inner = node.child_by_field_name("definition") or node.child_by_field_name("declaration")
        kids = node.named_children
        if inner is None and not kids:
            break
        node = inner if inner is not None else kids[-1]
    return node


def _name(node: Any) -> str | None:
    kind = node.type
    if kind in ("lexical_declaration", "variable_declaration"):
        if not node.named_children:
            return None
        declarator = node.named_children[0]
        value = declarator.child_by_field_name("value")
        if value is None or value.type not in _FUNCTION_VALUES:
            return None
        return _text(declarator.child_by_field_name("name"))
    if kind == "impl_item":
        return _text(node.child_by_field_name("type")).split("<", 1)[0] or None
    if kind == "type_declaration":
        spec = next((k for k in node.named_children if k.type in ("type_spec", "type_alias")), None)
        return _text(spec.child_by_field_name("name")) if spec is not None else None
    if kind == "method_declaration" and node.child_by_field_name("receiver") is not None:
        receiver = _text(node.child_by_field_name("receiver")).strip("()").split()
        owner = receiver[-1].lstrip("*").split("[", 1)[0] if receiver else ""
        name = _text(node.child_by_field_name("name"))
        return f"{owner}.{name}" if owner else name
    target = node.child_by_field_name("name")
    if target is None:
        target = node.child_by_field_name("declarator")
        while target is not None and target.child_by_field_name("declarator") is not None:
            target = target.child_by_field_name("declarator")
    text = _text(target).strip("\"'").replace("::", ".")
    return " ".join(text.split()) or None


def _text(node: Any) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text else ""


def lines_of(node: Any) -> tuple[int, int]:
    """1-based first and last line; a node ending at column 0 ends on the line before."""
    first = node.start_point[0] + 1
    row, column = node.end_point
    return first, max(first, row + 1 if column else row)


def span(node: Any) -> int:
    first, last = lines_of(node)
    return last - first + 1


def root_of(file: SourceFile, lines: list[str]) -> Any | None:
    """The syntax tree's root node, or None without a grammar, or when parsing fails."""
    grammar = grammar_for(file)
    return _parse(grammar, lines) if grammar in GRAMMARS else None


def _parse(grammar: str, lines: list[str]) -> Any | None:
    parser = _parser(grammar)
    if parser is None:
        return None
    try:
        tree = parser.parse("\n".join(lines).encode("utf-8", "replace"))
    except (ValueError, RuntimeError):
        return None
    return tree.root_node if tree is not None else None


def _parser(grammar: str) -> Any | None:
    """A parser per grammar and thread: tree-sitter parsers must not be shared between threads."""
    cache: dict[str, Any] = getattr(_threads, "parsers", None) or {}
    _threads.parsers = cache
    if grammar not in cache:
        language = _language(grammar)
        if language is None:
            return None
        import tree_sitter

        cache[grammar] = tree_sitter.Parser(language)
    return cache[grammar]


@cache
def _language(grammar: str) -> Any | None:
    """The tree-sitter Language from its wheel; None when the wheel is missing (then windows)."""
    module_name, function = GRAMMARS[grammar]
    try:
        import tree_sitter

        module = importlib.import_module(module_name)
        return tree_sitter.Language(getattr(module, function)())
    except (ImportError, AttributeError, ValueError):
        return None
