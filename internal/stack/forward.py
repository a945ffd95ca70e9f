"""The daemons' warnings and errors, shown in `lakehouse up`'s terminal.

Each daemon writes its log to a file (var/log/<daemon>.log); the supervisor follows the
file and repeats every line of level warning or above through its own logger, so a
person sees `sync_failed` or `pg_trgm_unavailable` where the README says they show.
Following the file (not a pipe) keeps a slow terminal from ever holding a daemon up.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec
import structlog

log = structlog.get_logger()

LEVELS = ("warning", "error", "critical")
# Cheap checks on a whole chunk before any line is split or decoded: structlog's JSON
# (`"level":"warning"`), stdlib logging (`WARNING:name:`), Python's warnings
# (`file:1: SomeWarning: `) and structlog's console renderer (`[warning  ]`).
_MARKERS = (*(f'"level":"{lv}"'.encode() for lv in LEVELS),
            b"WARNING:", b"ERROR:", b"CRITICAL:", b"Warning: ", b"[warning", b"[error",
            b"[critical")
_PLAIN = (
    (re.compile(r"^(WARNING|ERROR|CRITICAL):"), None),
    (re.compile(r"^\S.*:\d+: \w*Warning: "), "warning"),
    (re.compile(r"\[(warning|error|critical)\s*\]"), None),
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DROPPED = ("event", "level", "timestamp", "service")
READ = 1 << 20  # bytes read from a log file at a time


@dataclass(frozen=True)
class Said:
    """One line worth a person's attention: its level, event and fields."""

    level: str
    event: str
    fields: dict[str, Any] = field(default_factory=dict)


def parse(line: bytes) -> Said | None:
    """The line as a Said when its level is warning or above; None for any other line."""
    if line.startswith(b"{"):
        try:
            entry = msgspec.json.decode(line)
        except msgspec.DecodeError:
            entry = None
        if isinstance(entry, dict):
            level = str(entry.get("level", "")).lower()
            if level not in LEVELS:
                return None
            fields = {str(k): v for k, v in entry.items() if k not in _DROPPED}
            return Said(level, str(entry.get("event", "")), fields)
    text = _ANSI.sub("", line.decode("utf-8", "replace")).rstrip()
    for pattern, fixed in _PLAIN:
        found = pattern.search(text)
        if found:
            level = fixed or found.group(1).lower()
            return Said(level, "daemon_output", {"line": text})
    return None


def marked_lines(data: bytes) -> list[bytes]:
    """The lines of data that hold a warning's marker, in order (most lines of a busy
    daemon's log are requests' info lines: they are never split out or decoded)."""
    starts: set[int] = set()
    for marker in _MARKERS:
        at = data.find(marker)
        while at != -1:
            starts.add(data.rfind(b"\n", 0, at) + 1)
            at = data.find(marker, at + len(marker))
    out = []
    for start in sorted(starts):
        end = data.find(b"\n", start)
        out.append(data[start:] if end == -1 else data[start:end])
    return out


class Follower:
    """Follows one daemon's log file from where it ended when followed."""

    def __init__(self, daemon: str, path: Path) -> None:
        self.daemon = daemon
        self.file: IO[bytes] = path.open("rb")
        self.file.seek(0, os.SEEK_END)
        self.partial = b""

    def read(self) -> list[Said]:
        """What the daemon said since the last read (whole lines only)."""
        out: list[Said] = []
        while chunk := self.file.read(READ):
            data = self.partial + chunk
            end = data.rfind(b"\n") + 1
            self.partial = data[end:]
            out.extend(s for s in map(parse, marked_lines(data[:end])) if s is not None)
        if os.fstat(self.file.fileno()).st_size < self.file.tell():  # truncated by someone
            self.file.seek(0)
            self.partial = b""
        return out

    def show(self) -> int:
        """Repeat what was read through this process's logger; how many lines."""
        said = self.read()
        for s in said:
            fields = {**s.fields, "daemon": self.daemon}
            getattr(log, s.level)(s.event, **fields)
        return len(said)

    def close(self) -> None:
        self.file.close()
