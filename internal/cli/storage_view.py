"""What `lakehouse status` shows of the corpora's storage: a row per conversion under way,
and a table of each corpus's rows, table and index sizes and whether its vector index
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


def conversion_lines(corpora: list[Corpus]) -> tuple[list[tuple[str, str, str]], list[str]]:
    """A row of `lakehouse status` per corpus being converted to another precision (its
    progress), and a line below the table per one whose last step failed (it tries again)."""
    rows: list[tuple[str, str, str]] = []
    lines: list[str] = []
    for c in corpora:
        job = c.conversion
        if job is None:
            continue
        share = f" ({100 * job.done // job.total}%)" if job.total else ""
        what = (f"{job.done} of {job.total} items copied{share}" if job.state == "copying"
                else f"{job.total} items copied, building its indexes")
        rows.append(("convert", "retrying" if job.error else "running",
                     f"corpus {c.name}: {c.precision} -> {job.precision}, {what}"))
        if job.error:
            lines.append(f"convert error: {c.name}: {job.error}")
    return rows, lines


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
