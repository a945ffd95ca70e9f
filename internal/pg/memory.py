"""Memory as Lakehouse counts it: the machine's, a process's PSS, and what a PostgreSQL
server on this machine holds (its processes' own pages plus its shared memory's resident
pages, once).

PSS (proportional set size) counts a page shared by n processes as 1/n in each. The sum
of PostgreSQL's processes' PSS misses shared buffers that only exited processes touched
(a closed connection, a parallel build's workers), which stay resident in the segment
and in no one's page tables; its backends' RSS counts every shared buffer once per
backend (9 backends at 100k: RSS 3,785 MiB, PSS 460). So the server's figure is its
processes' own pages (PSS less its shared part) plus the segment's resident pages,
read with fincore on /proc/<postmaster>/map_files (root, or the server's own user);
where that cannot be read, the sum of PSS, and `counted` says so.
bench/harness/memory.py reports with these functions."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

KEYS = ("Rss", "Pss", "Pss_Anon", "Pss_File", "Pss_Shmem")


def meminfo() -> dict[str, int]:
    """/proc/meminfo in bytes (MemTotal, MemAvailable, ...); empty off Linux."""
    out: dict[str, int] = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            name, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                out[name] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    except OSError:
        pass
    return out


def machine() -> tuple[int, int]:
    """(total, available) bytes of memory; psutil's figures off Linux."""
    info = meminfo()
    if "MemTotal" in info and "MemAvailable" in info:
        return info["MemTotal"], info["MemAvailable"]
    vm = psutil.virtual_memory()
    return int(vm.total), int(vm.available)


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
        """PSS and its parts in MiB, for a table row: PSS | anon | shmem | file | RSS."""
        return " | ".join(f"{v / 2**20:.1f}" for v in (self.pss, self.anon, self.shmem,
                                                       self.file, self.rss))


def usage(pid: int) -> Usage:
    """One process's memory (zero when it is gone or not readable)."""
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


@dataclass
class PgMemory:
    """The processes of one PostgreSQL server, by role (the process title's), and the
    resident pages of its shared memory (-1: not readable here)."""

    roles: dict[str, Usage] = field(default_factory=dict)
    shared_resident: int = -1

    @property
    def all(self) -> Usage:
        out = Usage()
        for u in self.roles.values():
            out.add(u)
        return out

    @property
    def held(self) -> int:
        """The processes' own pages plus the shared segment's resident pages (PSS's sum
        when the segment could not be read)."""
        every = self.all
        if self.shared_resident < 0:
            return every.pss
        return every.pss - every.shmem + self.shared_resident

    @property
    def counted(self) -> str:
        return ("own pages + shared memory resident" if self.shared_resident >= 0
                else "PSS sum (shared memory not readable)")


def shared_segments(pid: int) -> int:
    """Resident bytes of the shared mappings (PostgreSQL's segment) of a process: fincore
    on /proc/PID/map_files, which counts a shared page whoever touched it; -1 when they
    cannot be read (no fincore, or not permitted)."""
    ranges = []
    try:
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 6 and parts[1].endswith("s") and (
                    parts[5] == "/dev/zero" or parts[5].startswith("/SYSV")):
                ranges.append(parts[0])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return -1
    links = [Path(f"/proc/{pid}/map_files/{r}") for r in ranges]
    if not links:
        return 0
    return page_cache(links)


def postmaster(data_dir: Path) -> int | None:
    """The pid of the postmaster of data_dir when it runs on this machine."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0].strip())
    except (OSError, ValueError):
        return None
    return pid if psutil.pid_exists(pid) else None


def postgres_memory(data_dir: Path, *, shared: bool = True) -> PgMemory | None:
    """Every process of the postmaster running in data_dir, grouped by role; None when no
    postmaster of that folder runs here. shared: read the segment's resident pages too."""
    first = postmaster(data_dir)
    if first is None:
        return None
    out = PgMemory(shared_resident=shared_segments(first) if shared else -1)
    for proc in tree(first):
        try:
            cmd = " ".join(proc.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        role = cmd.split("postgres: ", 1)[1] if "postgres: " in cmd else "postmaster"
        # "postgres postgres [local] idle" -> a client backend; keep the fixed roles whole.
        if "[local]" in role or "127.0.0.1" in role:
            role = "client backends"
        out.roles.setdefault(role.strip(), Usage()).add(usage(proc.pid))
    return out


def page_cache(paths: Iterable[Path]) -> int:
    """Bytes of these files (or every file under these folders) in the page cache; -1
    without fincore (util-linux)."""
    tool = shutil.which("fincore")
    if tool is None:
        return -1
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
        out = subprocess.run([tool, "--bytes", "--noheadings", "--output", "RES",
                              *files[start:start + 500]], capture_output=True, text=True,
                             check=False)
        if out.returncode and not out.stdout:
            return -1
        cached += sum(int(x) for x in out.stdout.split() if x.isdigit())
    return cached
