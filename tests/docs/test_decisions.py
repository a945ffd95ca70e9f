"""The decisions, one a file in docs/decisions/, and their index, DECISIONS.md.

What holds: nothing of the old single DECISIONS.md is lost (each of its blocks is in
exactly one decision, by the manifest kept beside this test: no git history is read); no
decision passes 400 lines and the index 300; every decision has its header, and the index
lists every decision with its title and status, and nothing else; a superseded decision
points at the one in force, which names it; every link resolves; and every reference in
the repository points at a decision file that exists, never at a section title the old
file had.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from datetime import date
from pathlib import Path

from tests.docs.markdown_blocks import blocks, digest
from tests.helpers import ROOT

DIR = ROOT / "docs" / "decisions"
INDEX = ROOT / "DECISIONS.md"
MANIFEST = json.loads((Path(__file__).parent / "decisions_manifest.json").read_text("utf-8"))
MAX_LINES = 400
MAX_INDEX_LINES = 300
AREAS = {"storage", "lexical", "vectors", "fusion", "federation", "feedback", "understanding",
         "reliability", "interfaces", "sync", "speed", "auth", "answers", "workshop"}
NAME = re.compile(r"^(\d{4})-[a-z0-9]+(?:-[a-z0-9]+)*\.md$")
NUMBER = r"(?<![\d.])\[?(\d{4})(?![\d.])(?:\]\([^)]*\))?"
STATUS = re.compile(rf"^(?:accepted|superseded by {NUMBER})$")
INDEX_LINE = re.compile(
    r"^- \[(\d{4})\]\((docs/decisions/[^)]+)\) (.+) — (accepted|superseded by \d{4})$")
PART = re.compile(rf"{NUMBER}( in part)?")


def decision_files() -> list[Path]:
    return sorted(p for p in DIR.iterdir() if p.suffix == ".md")


def header(path: Path) -> dict[str, str]:
    """The `- Key: value` lines above the first `## ` heading, and the title line."""
    lines = path.read_text("utf-8").split("\n")
    out = {"#": lines[0]}
    for line in lines[1:]:
        if line.startswith("## "):
            break
        if m := re.match(r"^- ([A-Z][a-z]+(?: [a-z]+)?): (.*)$", line):
            out[m.group(1)] = m.group(2).strip()
    return out


def number(path: Path) -> int:
    m = NAME.match(path.name)
    assert m, f"{path.name}: a decision file is named NNNN-short-title.md"
    return int(m.group(1))


def title(path: Path) -> str:
    return re.sub(r"^# \d{4}\. ", "", header(path)["#"])


def superseded_by(path: Path) -> int | None:
    m = STATUS.match(header(path).get("Status", ""))
    return int(m.group(1)) if m and m.group(1) else None


def numbers_in(field: str) -> list[tuple[int, bool]]:
    """(number, in part?) of each decision a Supersedes or Amended by line names."""
    return [(int(m.group(1)), bool(m.group(2))) for m in PART.finditer(field)]


def old_sections() -> dict[str, list[str]]:
    """Each section title of the old file -> the decision files whose From: names it."""
    out: dict[str, list[str]] = {s["title"]: [] for s in MANIFEST["sections"]}
    for p in decision_files():
        for name in re.findall(r'"([^"]+)"', header(p).get("From", "")):
            out.setdefault(name, []).append(f"docs/decisions/{p.name}")
    return out


def test_every_block_of_the_old_file_is_in_exactly_one_decision() -> None:
    where = defaultdict(list)
    for p in decision_files():
        for _, block in blocks(p.read_text("utf-8")):
            if not block.startswith("#"):
                where[digest(block)].append(p.name)
    retired = {d for _, d, _why in MANIFEST["retired"]}
    problems, checked = [], 0
    for section in MANIFEST["sections"]:
        for line, d in section["blocks"]:
            if d in retired:
                continue
            checked += 1
            if len(where[d]) != 1:
                problems.append(f'"{section["title"]}", old line {line}: in {where[d] or "no file"}')
    assert len(MANIFEST["sections"]) == 52 and checked == 517
    assert problems == []


def test_every_old_section_says_where_it_went() -> None:
    retired = {d for _, d, _why in MANIFEST["retired"]}
    homes = old_sections()
    lost = [s["title"] for s in MANIFEST["sections"]
            if any(d not in retired for _, d in s["blocks"]) and not homes[s["title"]]]
    assert lost == []
    unknown = sorted(set(homes) - {s["title"] for s in MANIFEST["sections"]})
    assert unknown == [], "a From: line names a section the old file did not have"


def test_no_decision_passes_400_lines_and_the_index_300() -> None:
    long = {p.name: n for p in decision_files()
            if (n := len(p.read_text("utf-8").splitlines())) > MAX_LINES}
    assert decision_files() and long == {}
    assert len(INDEX.read_text("utf-8").splitlines()) <= MAX_INDEX_LINES


def test_every_decision_has_its_header_and_parts() -> None:
    problems = []
    for p in decision_files():
        h, n = header(p), number(p)
        text = p.read_text("utf-8")
        if not re.match(rf"^# {n:04d}\. \S", h["#"]):
            problems.append(f"{p.name}: first line is `# {n:04d}. Title`")
        if not STATUS.match(h.get("Status", "")):
            problems.append(f"{p.name}: Status is `accepted` or `superseded by NNNN`")
        try:
            date.fromisoformat(h.get("Date", ""))
        except ValueError:
            problems.append(f"{p.name}: Date is YYYY-MM-DD")
        if h.get("Area") not in AREAS:
            problems.append(f"{p.name}: Area is one of {sorted(AREAS)}")
        if not re.fullmatch(r"[0-9a-f]{7,40}", h.get("Commit", "")):
            problems.append(f"{p.name}: Commit is a short hash")
        parts = [line for line in text.split("\n") if line.startswith("## ")]
        if parts[:3] != ["## Context", "## Decision", "## Figures"]:
            problems.append(f"{p.name}: parts ## Context, ## Decision, ## Figures, in order")
    assert problems == []


def test_the_index_lists_every_decision_and_nothing_else() -> None:
    listed: Counter[str] = Counter()
    problems = []
    for line in INDEX.read_text("utf-8").split("\n"):
        if not line.startswith("- ["):
            continue
        m = INDEX_LINE.match(line)
        if not m:
            problems.append(f"not an index line: {line}")
            continue
        num, path, name, status = m.groups()
        file = ROOT / path
        listed[file.name] += 1
        if not file.is_file() or file.parent != DIR:
            problems.append(f"{path}: no such decision")
            continue
        if number(file) != int(num) or title(file) != name:
            problems.append(f"{path}: listed as {num} {name!r}, the file says {title(file)!r}")
        by = superseded_by(file)
        if status != ("accepted" if by is None else f"superseded by {by:04d}"):
            problems.append(f"{path}: listed as {status}, the file says {header(file)['Status']}")
    problems += [f"{p.name}: not in the index" for p in decision_files() if not listed[p.name]]
    problems += [f"{name}: listed {n} times" for name, n in listed.items() if n > 1]
    numbers = Counter(number(p) for p in decision_files())
    problems += [f"{n:04d}: {k} files" for n, k in numbers.items() if k > 1]
    assert problems == []


def test_supersessions_are_recorded_on_both_sides() -> None:
    """A superseded decision points at the one in force, which names it; a decision
    changed in part says by which, and that one names it `in part`."""
    files = {number(p): p for p in decision_files()}
    problems = []
    for n, p in files.items():
        by = superseded_by(p)
        if by is not None:
            new = files.get(by)
            if new is None:
                problems.append(f"{p.name}: superseded by {by:04d}, which does not exist")
            elif (n, False) not in numbers_in(header(new).get("Supersedes", "")):
                problems.append(f"{new.name}: Supersedes does not name {n:04d}")
        for old, part in numbers_in(header(p).get("Supersedes", "")):
            if old not in files:
                problems.append(f"{p.name}: supersedes {old:04d}, which does not exist")
            elif part and n not in [k for k, _ in numbers_in(header(files[old]).get("Amended by", ""))]:
                problems.append(f"{files[old].name}: Amended by does not name {n:04d}")
            elif not part and superseded_by(files[old]) != n:
                problems.append(f"{files[old].name}: status is not superseded by {n:04d}")
        for new, _ in numbers_in(header(p).get("Amended by", "")):
            if new not in files or (n, True) not in numbers_in(header(files[new]).get("Supersedes", "")):
                problems.append(f"{p.name}: amended by {new:04d}, whose Supersedes does not say "
                                f"{n:04d} in part")
    assert problems == []


def test_every_link_of_the_index_and_the_decisions_resolves() -> None:
    broken = []
    for p in [INDEX, *decision_files()]:
        text = re.sub(r"```.*?```|`[^`\n]*`", "", p.read_text("utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            if not (p.parent / target.split("#")[0]).exists():
                broken.append(f"{p.relative_to(ROOT)} -> {target}")
    assert broken == []


SKIP_DIRS = {".git", ".venv", "var", "node_modules", "__pycache__", ".mypy_cache",
             ".ruff_cache", ".pytest_cache", "build", "dist"}
SUFFIXES = {".md", ".py", ".toml", ".sh", ".txt", ".js", ".html", ".css", ".cfg", ".ini",
            ".yml", ".yaml", ".sql"}
FILE_REF = re.compile(r"docs/decisions/(\d{4}-[A-Za-z0-9-]+\.md)")
# A section named after the old file's name: the name, then (after a comma, a space, an
# opening parenthesis or "under") a quoted title, or after a comma a capitalised title
# closed by a parenthesis, comma or semicolon; or a quoted title, then "in" and the name.
# The file's name in quotes is no reference.
QUOTED_REF = re.compile(r'(?<!["/])DECISIONS(?:\.md)?(?:,\s*|\s+under\s+|\s*\(\s*|\s+)"([^"]{1,200})"')
BARE_REF = re.compile(r'(?<!["/])DECISIONS(?:\.md)?,\s+([A-Z][A-Za-z ]{1,60}?)(?=[),;])')
TITLE_FIRST_REF = re.compile(r'"([^"]{1,200})"\s+in\s+DECISIONS(?:\.md)?\b')


def text_files() -> list[Path]:
    out = []
    stack = [ROOT]
    while stack:
        folder = stack.pop()
        for p in folder.iterdir():
            if p.is_dir():
                if p.name not in SKIP_DIRS and not p.name.endswith(".egg-info"):
                    stack.append(p)
            elif p.suffix in SUFFIXES:
                out.append(p)
    return sorted(out)


def joined(text: str) -> str:
    """The text with its lines joined, comment markers dropped, so that a reference
    wrapped over two comment lines reads as one."""
    return re.sub(r"\s*\n\s*(?:#+|//|\*|--)?\s*", " ", text)


def test_every_reference_names_a_decision_that_exists() -> None:
    titles = {title(p) for p in decision_files()}
    homes = old_sections() | MANIFEST["aliases"]
    problems = [f"the manifest's alias {name!r}: {f} does not exist"
                for name, files in MANIFEST["aliases"].items() for f in files
                if not (ROOT / f).is_file()]
    for p in text_files():
        rel = str(p.relative_to(ROOT))
        text = p.read_text("utf-8", errors="replace")
        if p.parent == DIR:  # the From: and Supersedes: lines may name the old sections
            text = "\n".join(line for line in text.split("\n")
                             if not line.startswith(("- From: ", "- Supersedes: ")))
        for name in FILE_REF.findall(text):
            if not (DIR / name).is_file():
                problems.append(f"{rel}: docs/decisions/{name} does not exist")
        flat = joined(text)
        for name in QUOTED_REF.findall(flat) + BARE_REF.findall(flat) + TITLE_FIRST_REF.findall(flat):
            name = " ".join(name.split())
            if name in titles:
                continue
            where = homes.get(name)
            hint = f"now {', '.join(where)}" if where else "no such decision or old section"
            problems.append(f"{rel}: names the section {name!r} of DECISIONS.md: {hint}")
    assert problems == []
