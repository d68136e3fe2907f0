"""Split source files into token-bounded chunks that follow definitions; list a file's symbols.

Lines: a file's lines are `file.text.splitlines()` ("\r\n", a lone "\r" and the other
separators `str.splitlines` knows all end a line) and a chunk's `text` joins its lines with
"\n", so `"\n".join(file.text.splitlines()[start - 1:end]) == chunk.text` always holds and a
CRLF file chunks exactly like its LF twin. Tree-sitter parses that "\n"-joined text, so its rows
are the same lines. Blank lines at either end of a chunk are dropped; blank files give no chunks.

Code (Python, JavaScript, TypeScript/TSX, Go, Rust, Java, C, C++; grammars come from the
per-language `tree-sitter-*` wheels, which work offline, and parsers are cached per language and
thread). The nodes at each level cut the text into segments; a comment or attribute directly
above a node stays with it, and blank lines stay with the segment above. Then:

- a definition over `target_tokens / 2` is a chunk of its own and never shares one with a
  neighbour; other segments (imports, statements, small definitions) are packed in order into
  chunks of at most `target_tokens`;
- a definition of at most `max_tokens` stays whole, except a container (class, struct, impl,
  trait, interface, enum, namespace, module) over `target_tokens`, which is split the same way
  at its members; anything over `max_tokens` is split at its inner nodes (statements, fields)
  and, where it has none, into line windows. A definition's header lines go with its first
  slice and its closing lines with its last; adjacent small leftovers of one definition join;
- `symbol` is the qualified name of the definition a chunk lies in (`Class.method`,
  `Type.Method` for a Go receiver, `ns.Class.method` in C++), of the one definition in a packed
  chunk, or of the one definition of a file that fits in one chunk; otherwise `None`.

Markdown is cut at ATX headings outside code fences and packed up to `target_tokens` (`symbol`
is the first heading). Other text, and code whose grammar is missing or whose parse fails,
becomes line windows of at most `target_tokens` overlapping by `overlap_lines`, as do long
Markdown sections and long definitions without inner nodes.

Bounds: no chunk exceeds `max_tokens` (by `tokenize.estimate_tokens`) except a single line that
alone does: chunk text is always whole lines, so such a line is a chunk by itself.
"""

from __future__ import annotations

import bisect
import hashlib
import importlib
import re
import threading
from dataclasses import dataclass
from functools import cache
from itertools import accumulate
from typing import Any

from .tokenize import COST_UNIT, line_cost
from .types import Chunk, SourceFile

__all__ = ["GRAMMARS", "Symbol", "chunk_file", "grammar_for", "outline"]


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
_CONTAINERS = frozenset({"class", "interface", "trait", "impl", "struct", "union", "enum", "type",
                         "namespace", "module"})
_NEEDS_BODY = frozenset({"struct_specifier", "union_specifier", "enum_specifier", "class_specifier"})
_WRAPPERS = frozenset({"decorated_definition", "export_statement", "template_declaration",
                       "ambient_declaration", "expression_statement"})
_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "class",
                              "generator_function"})
_TRANSPARENT = frozenset({"preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif",
                          "linkage_specification", "declaration_list"})
_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_FENCE = re.compile(r" {0,3}(?:```|~~~)")
_CPP_HINT = re.compile(r"^\s*(?:class|namespace|template|public:|private:|protected:)\b|\bstd::", re.M)
_threads = threading.local()

Piece = tuple[int, int, "str | None"]  # 1-based inclusive line range and its symbol


def chunk_file(
    file: SourceFile, target_tokens: int = 250, max_tokens: int = 400, overlap_lines: int = 3
) -> list[Chunk]:
    """Chunks of `file` in line order (see the module docstring for the rules)."""
    lines = file.text.splitlines()
    if not file.text.strip():
        return []
    plan = _Plan(lines, target_tokens, max(max_tokens, target_tokens), overlap_lines)
    root = _root(file, lines)
    if root is not None:
        pieces = plan.split(root, 1, len(lines), None, container=True)
    elif grammar_for(file) == "markdown":
        pieces = plan.markdown()
    else:
        pieces = plan.windows(1, len(lines), None)
    return [c for c in (plan.chunk(file, p) for p in plan.merge(pieces)) if c is not None]


def outline(file: SourceFile) -> list[Symbol]:
    """Definitions of a code file in source order, nested ones after their parent; [] otherwise."""
    root = _root(file, file.text.splitlines())
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


class _Plan:
    """Line costs of one file and the splitting rules that turn them into line ranges."""

    def __init__(self, lines: list[str], target: int, limit: int, overlap: int) -> None:
        self.lines = lines
        self.prefix = [0, *accumulate(map(line_cost, lines))]  # cost of lines 1..n is prefix[n]
        self.target = target * COST_UNIT
        self.limit = limit * COST_UNIT
        self.overlap = max(0, overlap)

    def cost(self, start: int, end: int) -> int:
        return self.prefix[end] - self.prefix[start - 1]

    def split(self, node: Any, start: int, end: int, symbol: str | None, container: bool) -> list[Piece]:
        """Pieces covering lines start..end of `node` (a definition, statement or the root)."""
        if node is None:
            return self.windows(start, end, symbol)
        if self.cost(start, end) <= self.target or (not container and self.cost(start, end) <= self.limit):
            if node.parent is None:  # a small file: name it after its one definition, if any
                names = [name for _, name in map(_definition, node.named_children) if name]
                symbol = names[0] if len(names) == 1 else None
            return [(start, end, symbol)]
        segments = _segments(_inner(node), start, end)
        if not segments:
            return self.windows(start, end, symbol)
        out: list[Piece] = []
        group: list[tuple[int, int, str | None]] = []  # start, end, symbol of a small definition

        def flush() -> None:
            if group:
                names = [name for _, _, name in group if name is not None]
                out.append((group[0][0], group[-1][1], names[0] if len(names) == 1 else symbol))
                group.clear()

        for seg_start, seg_end, main in segments:
            kind, name = _definition(main) if main is not None else (None, None)
            qualified = f"{symbol}.{name}" if symbol and name else (name or symbol)
            cost = self.cost(seg_start, seg_end)
            alone = cost > self.target or (kind is not None and 2 * cost > self.target)
            if not alone and (not group or self.cost(group[0][0], seg_end) <= self.target):
                group.append((seg_start, seg_end, qualified if kind else None))
                continue
            if alone and not out and node.parent is not None and _is_header(group, self.cost, self.target):
                seg_start = group.pop()[0]  # a definition's header lines go with its first slice
            flush()
            if alone:
                out.extend(self.split(main, seg_start, seg_end, qualified, kind in _CONTAINERS))
            else:
                group.append((seg_start, seg_end, qualified if kind else None))
        flush()
        return out

    def merge(self, pieces: list[Piece]) -> list[Piece]:
        """Join adjacent small slices of the same definition (left over around split-off parts)."""
        out: list[Piece] = []
        for start, end, symbol in pieces:
            adjacent = out and symbol is not None and out[-1][2] == symbol and out[-1][1] + 1 == start
            if adjacent and self.cost(out[-1][0], end) <= self.target:
                out[-1] = (out[-1][0], end, symbol)
                continue
            out.append((start, end, symbol))
        return out

    def windows(self, start: int, end: int, symbol: str | None) -> list[Piece]:
        """Runs of lines of at most target cost, overlapping by `overlap` lines."""
        out: list[Piece] = []
        first = start
        while True:
            last = bisect.bisect_right(self.prefix, self.prefix[first - 1] + self.target, first, end + 1) - 1
            last = max(last, first)
            if last >= end and out:  # fill the last window backwards rather than leave it short
                fits = bisect.bisect_left(self.prefix, self.prefix[end] - self.target, 0, end) + 1
                first = max(out[-1][0] + 1, min(first, fits))
            out.append((first, last, symbol))
            if last >= end:
                return out
            first = max(last + 1 - self.overlap, first + 1)

    def markdown(self) -> list[Piece]:
        """Sections at headings, packed up to the target; a longer section becomes windows."""
        starts, in_fence = [1], False
        for number, line in enumerate(self.lines, 1):
            if _FENCE.match(line):
                in_fence = not in_fence
            elif not in_fence and number > 1 and _HEADING.match(line):
                starts.append(number)
        ends = [first - 1 for first in starts[1:]] + [len(self.lines)]
        out: list[Piece] = []
        group: list[Any] = []  # start, end, heading of the sections packed so far
        for start, end in zip(starts, ends):
            line = self.lines[start - 1]
            heading = line.strip().strip("#").strip() or None if _HEADING.match(line) else None
            if group and self.cost(group[0], end) <= self.target:
                group[1] = end
                continue
            if group:
                out.append((group[0], group[1], group[2]))
                group = []
            if self.cost(start, end) > self.target:
                out.extend(self.windows(start, end, heading))
            else:
                group = [start, end, heading]
        if group:
            out.append((group[0], group[1], group[2]))
        return out

    def chunk(self, file: SourceFile, piece: Piece) -> Chunk | None:
        start, end, symbol = piece
        while start <= end and not self.lines[start - 1].strip():
            start += 1
        while end >= start and not self.lines[end - 1].strip():
            end -= 1
        if start > end:
            return None
        text = "\n".join(self.lines[start - 1 : end])
        digest = hashlib.sha1(f"{file.path}\n{text}".encode("utf-8", "surrogatepass")).hexdigest()
        tokens = -(-self.cost(start, end) // COST_UNIT)
        return Chunk(file.path, start, end, file.language, symbol, text, digest, tokens)


def _is_header(group: list[tuple[int, int, str | None]], cost: Any, target: int) -> bool:
    """True for a lone first segment with no definition in it and at most half the target."""
    return len(group) == 1 and group[0][2] is None and 2 * cost(group[0][0], group[0][1]) <= target


def _segments(kids: list[Any], start: int, end: int) -> list[tuple[int, int, Any]]:
    """Cut start..end where each kid starts; comments and attributes join the node right below."""
    cuts: list[list[Any]] = []  # [first line, main node or None while only comments]
    glue_until = -2  # last line of a leading comment block: the next node joins its segment
    for kid in kids:
        first, last = _lines(kid)
        if not cuts:
            cuts.append([start, None])
        elif first > cuts[-1][0] and first > glue_until + 1:
            cuts.append([first, None])
        if cuts[-1][1] is None and ("comment" in kid.type or kid.type == "attribute_item"):
            glue_until = last
            continue
        glue_until = -2
        if cuts[-1][1] is None:
            cuts[-1][1] = kid
    ends = [first - 1 for first, _ in cuts[1:]] + [end]
    return [(first, last, main) for (first, main), last in zip(cuts, ends)]


def _inner(node: Any) -> list[Any]:
    """Nodes to split `node` at: its children, looking through a body that holds nearly all of it."""
    if node.parent is None:
        return list(node.named_children)
    current = _unwrap(node)
    for _ in range(8):
        kids: list[Any] = list(current.named_children)
        if not kids:
            return kids
        biggest = max(kids, key=_span)
        if _span(current) - _span(biggest) > max(3, _span(current) // 5):
            return kids
        if _definition(biggest)[0] is not None:
            return kids
        current = biggest
    return list(current.named_children)


def _collect(nodes: list[Any], parent: str | None, parent_kind: str | None, out: list[Symbol]) -> None:
    for node in nodes:
        kind, name = _definition(node)
        if kind is None or name is None:
            if node.type in _TRANSPARENT:
                _collect(node.named_children, parent, parent_kind, out)
            continue
        if kind == "function" and parent_kind in _CONTAINERS:
            kind = "method"
        qualifier, _, simple = name.rpartition(".")
        first, last = _lines(node)
        out.append(Symbol(simple, kind, first, last, ".".join(p for p in (parent, qualifier) if p) or None))
        if kind in _CONTAINERS:
            qualified = f"{parent}.{name}" if parent else name
            _collect(_inner(_unwrap(node)), qualified, kind, out)


def _definition(node: Any) -> tuple[str | None, str | None]:
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


def _lines(node: Any) -> tuple[int, int]:
    """1-based first and last line; a node ending at column 0 ends on the line before."""
    first = node.start_point[0] + 1
    row, column = node.end_point
    return first, max(first, row + 1 if column else row)


def _span(node: Any) -> int:
    first, last = _lines(node)
    return last - first + 1


def _root(file: SourceFile, lines: list[str]) -> Any | None:
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
