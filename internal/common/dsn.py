"""Connection strings as logs and status pages may show them."""

from __future__ import annotations

import re


def redacted(dsn: str) -> str:
    """The connection string without its password."""
    dsn = re.sub(r"(://[^:/@]*):[^@]*@", r"\1@", dsn)
    return re.sub(r"password\s*=\s*\S+", "password=...", dsn)
