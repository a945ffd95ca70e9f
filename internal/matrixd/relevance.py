"""Relevance filter for code-aware corpora: keep chunks about the focus file, drop its neighbours.

A retriever asked about one file happily returns the files it imports ("adjacency
pollution"). Each chunk is scored by signals relating it to the focus file; chunks
under the threshold are dropped. Signals and weights (fixed by the issue):

    path_match     +1.0  the chunk's source encodes the focus path
    filename_match +0.6  the chunk's text names the focus file
    defined_match  +0.6  the text mentions a symbol the focus defines
    token_overlap  +0.4 x Jaccard of the non-stopword tokens of focus text and chunk text
    prefix_match   +0.3  the source shares the focus path's first two segments
    import_penalty -0.5  the text mentions symbols the focus imports and none it defines

Symbols come from the request and, when the focus text is given, from the text
itself (Rust, TypeScript/JavaScript, Go, Python). No I/O here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from internal.api.matrixd import DEFAULT_RELEVANCE_THRESHOLD as DEFAULT_THRESHOLD
from internal.api.matrixd import Chunk, Focus

__all__ = ["DEFAULT_THRESHOLD", "WEIGHTS", "Chunk", "Focus"]

WEIGHTS = {
    "path_match": 1.0,
    "filename_match": 0.6,
    "defined_match": 0.6,
    "token_overlap": 0.4,
    "prefix_match": 0.3,
    "import_penalty": -0.5,
}


@dataclass
class Scored:
    """One chunk's verdict: total, the contribution of each signal, kept or not."""

    index: int
    source: str
    total: float
    signals: dict[str, float]
    kept: bool


@dataclass(frozen=True)
class Symbols:
    defined: frozenset[str] = field(default_factory=frozenset)
    imported: frozenset[str] = field(default_factory=frozenset)


# ---- symbol extraction -------------------------------------------------------------

_IDENT = r"[A-Za-z_$][\w$]*"
_KEYWORDS = frozenset({
    "fn", "mut", "unsafe", "async", "extern", "pub", "crate", "self", "super", "Self",
    "const", "let", "var", "function", "default", "type", "static", "_",
})

_RUST_DEF = [
    re.compile(r"\b(?:struct|enum|trait|union|type|mod|fn|const|static)\s+(?:mut\s+)?(" + _IDENT + ")"),
    re.compile(r"\bmacro_rules!\s*(" + _IDENT + ")"),
]
_RUST_USE = re.compile(r"\buse\s+([^;]+);")

_TS_DEF = [
    re.compile(r"^[ \t]*(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?"
               r"(?:class|interface|enum|namespace|module|function\*?|type)\s+(" + _IDENT + ")", re.M),
    re.compile(r"^(?:export\s+)?(?:declare\s+)?(?:const|let|var)\s+(" + _IDENT + ")", re.M),
]
_TS_IMPORT = re.compile(r"\bimport\s+(?:type\s+)?([\w$*\s{},]+?)\s+from\s*['\"]")
_TS_REQUIRE = re.compile(r"\b(?:const|let|var)\s+(" + _IDENT + r")\s*=\s*require\(")

_GO_DEF = [
    re.compile(r"^func\s+(?:\([^)]*\)\s*)?(" + _IDENT + ")", re.M),
    re.compile(r"^(?:type|const|var)\s+(" + _IDENT + ")", re.M),
]
_GO_GROUP = re.compile(r"^(?:type|const|var)\s*\((.*?)^\)", re.M | re.S)
_GO_GROUP_MEMBER = re.compile(r"^(?:\t| {4})(" + _IDENT + ")", re.M)  # one level in: not struct fields
_GO_IMPORT_ONE = re.compile(r'^import\s+(?:(' + _IDENT + r'|\.)\s+)?"([^"]+)"', re.M)
_GO_IMPORT_GROUP = re.compile(r"^import\s*\((.*?)\)", re.M | re.S)
_GO_IMPORT_LINE = re.compile(r'^\s*(?:(' + _IDENT + r'|\.)\s+)?"([^"]+)"', re.M)

_PY_DEF = re.compile(r"^(?:async\s+def|def|class)\s+(" + _IDENT + ")", re.M)
_PY_FROM = re.compile(r"^\s*from\s+\S+\s+import\s+\(?([^)\n]+)", re.M)
_PY_IMPORT = re.compile(r"^\s*import\s+([^\n]+)", re.M)

LANGUAGES = {
    ".rs": "rust",
    ".ts": "typescript", ".tsx": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".js": "typescript", ".jsx": "typescript", ".mjs": "typescript", ".cjs": "typescript",
    ".go": "go",
    ".py": "python", ".pyi": "python",
}


def language_of(path: str) -> str | None:
    """The language extract_symbols uses for a path, by extension (None: unknown)."""
    m = re.search(r"(\.[A-Za-z0-9]+)$", _strip_locator(_norm_path(path)))
    return LANGUAGES.get(m.group(1).lower()) if m else None


def _names(found: Iterable[str]) -> set[str]:
    return {n for n in found if n and n not in _KEYWORDS}


def _rust(text: str) -> Symbols:
    defined = _names(m.group(1) for rx in _RUST_DEF for m in rx.finditer(text))
    imported: set[str] = set()
    for m in _RUST_USE.finditer(text):
        for piece in re.split(r"[{},]", m.group(1)):
            piece = piece.strip()
            if not piece or piece.endswith("::"):
                continue
            original, _, alias = piece.partition(" as ")
            imported.update(_names([original.strip().split("::")[-1], alias.strip()]))
    imported.discard("*")
    return Symbols(frozenset(defined), frozenset(imported))


def _typescript(text: str) -> Symbols:
    defined = _names(m.group(1) for rx in _TS_DEF for m in rx.finditer(text))
    imported: set[str] = set()
    for m in _TS_IMPORT.finditer(text):
        clause = m.group(1)
        ns = re.search(r"\*\s*as\s+(" + _IDENT + ")", clause)
        if ns:
            imported.add(ns.group(1))
            clause = clause.replace(ns.group(0), "")
        for piece in re.split(r"[{},]", clause):
            piece = re.sub(r"^\s*type\s+", "", piece).strip()
            original, _, alias = piece.partition(" as ")
            imported.update(_names([original.strip(), alias.strip()]))
    imported.update(_names(m.group(1) for m in _TS_REQUIRE.finditer(text)))
    return Symbols(frozenset(defined), frozenset(imported))


def _go_package(alias: str | None, path: str) -> str | None:
    if alias in ("_", "."):
        return None
    if alias:
        return alias
    parts = [p for p in path.split("/") if p]
    if len(parts) > 1 and re.fullmatch(r"v\d+", parts[-1]):
        parts.pop()  # "example.com/mod/v2" is package "mod"
    return parts[-1].replace("-", "_") if parts else None


def _go(text: str) -> Symbols:
    defined = _names(m.group(1) for rx in _GO_DEF for m in rx.finditer(text))
    for g in _GO_GROUP.finditer(text):
        defined |= _names(m.group(1) for m in _GO_GROUP_MEMBER.finditer(g.group(1)))
    imported: set[str] = set()
    pairs = [(m.group(1), m.group(2)) for m in _GO_IMPORT_ONE.finditer(text)]
    for g in _GO_IMPORT_GROUP.finditer(text):
        pairs += [(m.group(1), m.group(2)) for m in _GO_IMPORT_LINE.finditer(g.group(1))]
    for alias, path in pairs:
        name = _go_package(alias, path)
        if name:
            imported.add(name)
    return Symbols(frozenset(defined), frozenset(imported))


def _python(text: str) -> Symbols:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return _python_loose(text)
    defined: set[str] = set()
    imported: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined.add(node.target.id)
    for any_node in ast.walk(tree):
        if isinstance(any_node, ast.Import):
            for a in any_node.names:
                imported.add(a.asname or a.name.split(".")[0])
        elif isinstance(any_node, ast.ImportFrom):
            for a in any_node.names:
                if a.name != "*":
                    imported.update(n for n in (a.name, a.asname) if n)
    return Symbols(frozenset(defined), frozenset(imported))


def _python_loose(text: str) -> Symbols:
    """Regex fallback for Python fragments that do not parse."""
    defined = _names(m.group(1) for m in _PY_DEF.finditer(text))
    imported: set[str] = set()
    for m in _PY_FROM.finditer(text):
        for piece in m.group(1).split(","):
            original, _, alias = piece.strip().partition(" as ")
            imported.update(n for n in (original.strip(), alias.strip()) if n and n != "*")
    for m in _PY_IMPORT.finditer(text):
        for piece in m.group(1).split(","):
            original, _, alias = piece.strip().partition(" as ")
            name = alias.strip() or original.strip().split(".")[0]
            if re.fullmatch(_IDENT, name):
                imported.add(name)
    return Symbols(frozenset(defined), frozenset(imported))


_EXTRACTORS = {"rust": _rust, "typescript": _typescript, "go": _go, "python": _python}


def extract_symbols(text: str, language: str | None) -> Symbols:
    """Defined and imported symbols of a source text; unknown language: every extractor."""
    extractors = [_EXTRACTORS[language]] if language in _EXTRACTORS else list(_EXTRACTORS.values())
    defined: set[str] = set()
    imported: set[str] = set()
    for extract in extractors:
        s = extract(text)
        defined |= s.defined
        imported |= s.imported
    return Symbols(frozenset(defined), frozenset(imported))


def focus_symbols(focus: Focus) -> Symbols:
    """The request's symbols plus those extracted from the focus text.

    A name both defined and imported counts as defined (re-exports, shadowing).
    """
    defined = {s for s in focus.defined_symbols or () if s}
    imported = {s for s in focus.imported_symbols or () if s}
    if focus.text:
        found = extract_symbols(focus.text, language_of(focus.path))
        defined |= found.defined
        imported |= found.imported
    return Symbols(frozenset(defined), frozenset(imported - defined))


# ---- scoring -----------------------------------------------------------------------

_STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers him his how i if in into is it its itself just me more
most my no nor not now of off on once only or other our out over own same she should so some
such than that the their them then there these they this those through to too under until up
very was we were what when where which while who whom why will with would you your
fn pub use mod impl let mut struct enum trait crate super self match return const static
import export from default function class interface type extends implements new this var
def async await lambda pass none true false null nil undefined package func go defer chan
map range else elif try except finally raise yield with as is not and or in for while break
continue string int bool void
""".split())
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def tokens(text: str) -> set[str]:
    """Lower-cased word and identifier tokens of two characters or more, minus stopwords."""
    return {t for t in (m.group(0).lower() for m in _TOKEN.finditer(text))
            if len(t) > 1 and t not in _STOPWORDS}


def jaccard(a: set[str], b: set[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def _norm_path(p: str) -> str:
    p = p.strip().replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p.lstrip("/")


def _strip_locator(p: str) -> str:
    """'src/a.rs#3' or 'src/a.rs:10-20' -> 'src/a.rs'."""
    return re.split(r"[#?@]|:\d", p, maxsplit=1)[0]


def _mentions(text: str, symbol: str) -> bool:
    return re.search(r"(?<![\w$])" + re.escape(symbol) + r"(?![\w$])", text) is not None


def path_encodes(source: str, path: str) -> bool:
    """Whether a chunk's source names the focus path (as a whole path suffix, locator allowed)."""
    src, target = _norm_path(source), _norm_path(path)
    if not target:
        return False
    rx = r"(?:^|[/:\s])" + re.escape(target) + r"(?:$|[#:@?\s])"
    return re.search(rx, src) is not None


def shares_prefix(source: str, path: str, segments: int = 2) -> bool:
    a = _strip_locator(_norm_path(source)).split("/")
    b = _strip_locator(_norm_path(path)).split("/")
    return len(a) >= segments and len(b) >= segments and a[:segments] == b[:segments]


def names_file(text: str, path: str) -> bool:
    base = _strip_locator(_norm_path(path)).rsplit("/", 1)[-1]
    if not base:
        return False
    return re.search(r"(?<![\w.-])" + re.escape(base) + r"(?![\w-])", text, re.I) is not None


def score_chunk(focus: Focus, symbols: Symbols, focus_tokens: set[str] | None,
                source: str, text: str) -> dict[str, float]:
    """Every signal's contribution (0.0 when it does not fire) for one chunk."""
    defined_hit = any(_mentions(text, s) for s in symbols.defined)
    imported_hit = any(_mentions(text, s) for s in symbols.imported)
    overlap = jaccard(focus_tokens, tokens(text)) if focus_tokens is not None else 0.0
    fired = {
        "path_match": 1.0 if source and path_encodes(source, focus.path) else 0.0,
        "filename_match": 1.0 if names_file(text, focus.path) else 0.0,
        "defined_match": 1.0 if defined_hit else 0.0,
        "token_overlap": overlap,
        "prefix_match": 1.0 if source and shares_prefix(source, focus.path) else 0.0,
        "import_penalty": 1.0 if imported_hit and not defined_hit else 0.0,
    }
    return {name: WEIGHTS[name] * v for name, v in fired.items()}


def score(focus: Focus, chunks: Sequence[Chunk], threshold: float = DEFAULT_THRESHOLD) -> list[Scored]:
    """Score every chunk against the focus; a chunk is kept when its total >= threshold."""
    symbols = focus_symbols(focus)
    focus_tokens = tokens(focus.text) if focus.text else None
    out: list[Scored] = []
    for i, chunk in enumerate(chunks):
        source = chunk.source or chunk.doc_id or ""
        signals = score_chunk(focus, symbols, focus_tokens, source, chunk.text)
        total = round(sum(signals.values()), 9)  # so float noise (0.1 + 0.2) never decides a threshold
        out.append(Scored(i, source, total, signals, total >= threshold))
    return out
