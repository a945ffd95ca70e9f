"""Upserts' language verdicts from a worker process (internal/vectord/judging.py): the same
verdicts as lingua's here, from another process at the writes' priority, and a worker
that dies replaced without a write failing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from internal.common import language
from internal.vectord.judging import Judge
from tests.helpers import ROOT

TEXTS = [
    "Heat transfer in laminar boundary layers was measured on a flat plate in a wind tunnel.",
    "La pression sur un cône mince aux vitesses supersoniques est calculée ici en détail.",
    "Die Knickung dünner Zylinderschalen unter axialem Druck wurde im Versuch untersucht.",
    "short",
]


def _same(got: list[language.Verdict], texts: list[str]) -> bool:
    """lingua's verdicts here (its confidences may differ in the last digit from one
    process to another: its sums' order)."""
    here = [language.judge(t) for t in texts]
    return all(g.language == h.language and g.letters == h.letters
               and abs(g.confidence - h.confidence) < 1e-9 for g, h in zip(got, here, strict=True))


def _worker_pid(judge: Judge) -> int:
    pid = judge.worker_pid()
    assert pid is not None
    return pid


async def test_the_worker_judges_as_lingua_does_here_at_the_writes_priority() -> None:
    judge = Judge(7)
    got = await judge.verdicts(TEXTS)
    assert _same(got, TEXTS)
    assert [v.language for v in got[:3]] == ["english", "french", "german"]
    pid = _worker_pid(judge)
    assert pid != os.getpid()
    assert os.getpriority(os.PRIO_PROCESS, pid) == os.getpriority(os.PRIO_PROCESS, 0) + 7
    assert judge.judged_here == 0
    assert await judge.verdicts([]) == []


async def test_a_worker_that_dies_is_replaced_and_no_verdict_is_lost() -> None:
    judge = Judge(3)
    await judge.verdicts(TEXTS[:1])
    first = _worker_pid(judge)
    os.kill(first, signal.SIGKILL)
    assert _same(await judge.verdicts(TEXTS), TEXTS)
    assert _worker_pid(judge) != first  # a new worker, not vectord's own threads
    assert judge.judged_here == 0


def test_the_worker_goes_with_the_process_that_started_it(tmp_path: Path) -> None:
    """A vectord killed outright leaves no worker behind (its parent-death signal)."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import asyncio, os\n"
        "from internal.vectord.judging import Judge\n"
        "async def main():\n"
        "    judge = Judge(0)\n"
        "    await judge.verdicts(['An English sentence to judge.'])\n"
        "    print(judge.worker_pid(), flush=True)\n"
        "    await asyncio.sleep(60)\n"
        "if __name__ == '__main__':\n"
        "    asyncio.run(main())\n")
    parent = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert parent.stdout is not None
        worker = psutil.Process(int(parent.stdout.readline()))
        parent.kill()
        parent.wait(10)
        worker.wait(10)  # psutil.TimeoutExpired if it outlives its parent
    finally:
        parent.kill()


async def test_without_the_worker_vectord_judges_in_its_threads() -> None:
    judge = Judge(5, worker=False)
    assert _same(await judge.verdicts(TEXTS), TEXTS)
    assert judge.worker_pid() is None and judge.judged_here == 0
