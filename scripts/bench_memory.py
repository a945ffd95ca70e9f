"""Where a system's memory goes: processes (PSS, split anon / shared memory / file), the
relations of a PostgreSQL database, and the page cache its files hold.

Shared by the benchmarks that compare memory (scripts/bench_chroma.py,
scripts/bench_million.py). PSS (proportional set size) counts a page shared by n
processes as 1/n in each, so the PSS of every process of a system adds up to what the
system holds without counting PostgreSQL's shared buffers once per backend (RSS would).
The page cache is not in any process's PSS: it is listed on its own line (fincore)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import psycopg

MIB = 2**20
KEYS = ("Rss", "Pss", "Pss_Anon", "Pss_File", "Pss_Shmem")


@dataclass
class Usage:
    """Memory of one process or a group of them, in bytes (from /proc/PID/smaps_rollup)."""

    rss: int = 0
    pss: int = 0
    anon: int = 0
    file: int = 0
    shmem: int = 0
    count: int = 0

    def add(self, other: Usage) -> None:
        self.rss += other.rss
        self.pss += other.pss
        self.anon += other.anon
        self.file += other.file
        self.shmem += other.shmem
        self.count += other.count

    def mib(self) -> str:
        """PSS and its parts, for a table row."""
        return (f"{self.pss / MIB:.1f} | {self.anon / MIB:.1f} | {self.shmem / MIB:.1f} | "
                f"{self.file / MIB:.1f} | {self.rss / MIB:.1f}")


def usage(pid: int) -> Usage:
    """One process's memory (zero when it is gone)."""
    values = dict.fromkeys(KEYS, 0)
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return Usage()
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in values:
            values[name] = int(rest.split()[0]) * 1024
    return Usage(rss=values["Rss"], pss=values["Pss"], anon=values["Pss_Anon"],
                 file=values["Pss_File"], shmem=values["Pss_Shmem"], count=1)


def tree(pid: int) -> list[psutil.Process]:
    """The process and its descendants (those alive now)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def total(pids: Iterable[int]) -> Usage:
    out = Usage()
    for pid in pids:
        out.add(usage(pid))
    return out


@dataclass
class PgMemory:
    """The processes of one PostgreSQL server, by role (the process title's), and the
    resident pages of its shared memory (shared buffers and the rest of the segment).

    The sum of the processes' PSS misses shared pages that only exited processes had
    touched (a closed connection, a parallel build's workers): they stay resident in
    the segment and are in no one's page tables. So `held` counts the processes' own
    pages (PSS less its shared-memory part) plus the segment's resident pages once."""

    roles: dict[str, Usage] = field(default_factory=dict)
    shared_resident: int = 0

    @property
    def all(self) -> Usage:
        out = Usage()
        for u in self.roles.values():
            out.add(u)
        return out

    @property
    def held(self) -> int:
        every = self.all
        return every.pss - every.shmem + self.shared_resident


def shared_segments(pid: int) -> int:
    """Resident bytes of the shared mappings (PostgreSQL's segment) of a process: fincore
    on /proc/PID/map_files, which counts a shared page whoever touched it."""
    ranges = []
    try:
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 6 and parts[1].endswith("s") and (
                    parts[5] == "/dev/zero" or parts[5].startswith("/SYSV")):
                ranges.append(parts[0])
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return page_cache([Path(f"/proc/{pid}/map_files/{r}") for r in ranges])


def postgres_memory(data_dir: Path) -> PgMemory:
    """Every process of the postmaster running in data_dir, grouped by role."""
    first = int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0].strip())
    out = PgMemory(shared_resident=shared_segments(first))
    for proc in tree(first):
        try:
            cmd = " ".join(proc.cmdline())
        except psutil.NoSuchProcess:
            continue
        role = cmd.split("postgres: ", 1)[1] if "postgres: " in cmd else "postmaster"
        # "postgres postgres [local] idle" -> a client backend; keep the fixed roles whole.
        if "[local]" in role or "127.0.0.1" in role:
            role = "client backends"
        out.roles.setdefault(role.strip(), Usage()).add(usage(proc.pid))
    return out


def page_cache(paths: Iterable[Path]) -> int:
    """Bytes of these files (or every file under these folders) in the page cache."""
    files: list[str] = []
    for p in paths:
        if str(p).startswith("/proc/"):
            files.append(str(p))  # a map_files link: its target is deleted, fincore opens it
        elif p.is_dir():
            files += [str(f) for f in p.rglob("*") if f.is_file()]
        elif p.is_file():
            files.append(str(p))
    cached = 0
    for start in range(0, len(files), 500):
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES",
                              *files[start:start + 500]], capture_output=True, text=True)
        cached += sum(int(x) for x in out.stdout.split() if x.isdigit())
    return cached


def disk(path: Path) -> int:
    """Bytes used under path (du's apparent size would count holes)."""
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True)
    return int(out.stdout.split()[0]) if out.stdout else 0


RELATIONS = """
SELECT CASE
         WHEN c.relname ~ '^vectord_items_[0-9]+$' THEN 'items heap + TOAST'
         WHEN c.relname ~ '^vectord_items_[0-9]+_hnsw' THEN 'items HNSW index'
         WHEN c.relname ~ '^vectord_items_[0-9]+_' AND c.relkind = 'i' THEN 'items other indexes'
         WHEN c.relname ~ '^vectord_space_[0-9]+_hnsw' THEN 'space HNSW index'
         WHEN c.relname ~ '^vectord_space_[0-9]+' THEN 'space table (+ key)'
         WHEN c.relname ~ 'postings' THEN 'lexical postings (+ key)'
         WHEN c.relname ~ '^vectord_lex' OR c.relname ~ '_lex' THEN 'lexical df / stats'
         WHEN n.nspname IN ('pg_catalog', 'information_schema', 'pg_toast') THEN 'catalog'
         ELSE 'other' END AS part,
       sum(CASE WHEN c.relkind = 'r' THEN pg_table_size(c.oid) ELSE pg_relation_size(c.oid) END)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'i', 'm') AND n.nspname NOT LIKE 'pg_temp%'
GROUP BY 1 ORDER BY 2 DESC"""


def relations(dsn: str) -> list[tuple[str, int]]:
    """Bytes on disk of each kind of relation in the database (tables with their TOAST)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [(str(r[0]), int(r[1])) for r in conn.execute(RELATIONS).fetchall()]


def settings(dsn: str, names: Iterable[str]) -> dict[str, str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]
