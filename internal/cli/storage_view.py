"""What `lakehouse status` shows of the corpora's storage: a row per re-embedding and per
conversion under way, and a table of each corpus's rows, table and index sizes and whether its vector index
fits in PostgreSQL's shared_buffers, with the memory held (no I/O but the strings)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from internal.cli.output import format_table

if TYPE_CHECKING:  # `lakehouse --help` imports no msgspec (tests/cli/test_startup.py)
    from lakehouse.types import Corpus
    from lakehouse.wire.storage import StorageStatus

MIB = 2**20


def mib(n: int) -> str:
    return f"{n / MIB:,.1f}"


Rows = tuple[list[tuple[str, str, str]], list[str]]


def _job_lines(kind: str, jobs: list[tuple[str, str, int, int, str | None]]) -> Rows:
    """A row per background job of a corpus, (corpus, what, done, total, last error): its
    progress; and a line below the table per one whose last step failed (it tries again)."""
    rows: list[tuple[str, str, str]] = []
    lines: list[str] = []
    for name, what, done, total, error in jobs:
        share = f" ({100 * done // total}%)" if total else ""
        rows.append((kind, "retrying" if error else "running",
                     f"corpus {name}: {what.format(done=done, total=total, share=share)}"))
        if error:
            lines.append(f"{kind} error: {name}: {error}")
    return rows, lines


def reembed_lines(corpora: list[Corpus]) -> Rows:
    """`lakehouse status`'s rows of the corpora being re-embedded."""
    return _job_lines("reembed", [
        (c.name, f"{c.model} -> {j.model}, {{done}} of {{total}} items{{share}}", j.done,
         j.total, j.error) for c in corpora if (j := c.reembed) is not None])


def conversion_lines(corpora: list[Corpus]) -> Rows:
    """`lakehouse status`'s rows of the corpora being converted to another precision."""
    return _job_lines("convert", [
        (c.name, f"{c.precision} -> {j.precision}, " + (
            "{done} of {total} items copied{share}" if j.state == "copying"
            else "{total} items copied, building its indexes"), j.done, j.total, j.error)
        for c in corpora if (j := c.conversion) is not None])


def storage_lines(status: StorageStatus) -> list[str]:
    """The corpora's sizes as a table, then the memory held and the warm-up's state."""
    if not status.corpora:
        return []
    rows = [[c.name, c.precision, f"{c.rows:,}", mib(c.table_bytes), mib(c.index_bytes),
             mib(c.other_index_bytes + c.lexical_bytes),
             "yes" if c.index_fits_shared_buffers else "no"] for c in status.corpora]
    out = ["", format_table(["corpus", "precision", "rows", "table MiB", "index MiB",
                             "other MiB", "index fits shared_buffers"], rows)]
    m = status.memory
    pg = (f"PostgreSQL {mib(m.postgres_bytes)} MiB" if m.postgres_bytes is not None
          else f"PostgreSQL: {m.postgres_counted}")
    out.append(f"memory held: vectord {mib(m.vectord_bytes)} MiB, {pg} "
               f"(shared_buffers {mib(status.shared_buffers_bytes)} MiB)")
    w = status.warmup
    if w.state == "warming":
        out.append(f"warm-up: {mib(w.done_bytes)} of {mib(w.budget_bytes)} MiB read "
                   f"({w.method}), {w.corpora} corpora")
    elif w.state == "failed":
        out.append(f"warm-up failed: {w.error}")
    elif w.state == "done" and w.done_bytes:
        out.append(f"warm-up: done, {mib(w.done_bytes)} MiB in {w.seconds:.1f} s ({w.method})")
    return out
