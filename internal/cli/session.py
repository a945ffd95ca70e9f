"""Read-your-writes across `lakehouse` commands: the last write position, per gateway.

A write (ingest, record, sync) answers with Lakehouse-LSN; the command keeps the highest
it saw in a small state file, and the commands run in the next SESSION_SECONDS against
the same gateway send it with their requests, so a search right after an ingest sees it
even when a read replica answers. The file is a cache: unreadable or stale, it is ignored.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

SESSION_SECONDS = 600.0


def state_file() -> Path:
    """$LAKEHOUSE_STATE_DIR/session.json, else the XDG state folder."""
    base = os.environ.get("LAKEHOUSE_STATE_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "lakehouse")
    return Path(base) / "session.json"


def _read() -> dict[str, list[object]]:
    try:
        data = json.loads(state_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def recent_lsn(url: str, now: float | None = None) -> str | None:
    """The last write position this user's commands saw at `url`, if recent."""
    entry = _read().get(url)
    if not isinstance(entry, list) or len(entry) != 2:
        return None
    lsn, at = entry
    if not isinstance(lsn, str) or not isinstance(at, int | float):
        return None
    return lsn if (now or time.time()) - at <= SESSION_SECONDS else None


def remember_lsn(url: str, lsn: str, now: float | None = None) -> None:
    """Keep `lsn` as the last write position at `url` (best effort)."""
    data = {k: v for k, v in _read().items()
            if isinstance(v, list) and len(v) == 2 and isinstance(v[1], int | float)
            and (now or time.time()) - float(v[1]) <= SESSION_SECONDS}
    data[url] = [lsn, now or time.time()]
    path = state_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass
