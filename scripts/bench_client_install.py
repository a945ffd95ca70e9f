"""What installing the Python client costs a new user, and whether the docs' examples then run.

In a fresh virtual environment (no packages but pip), times `pip install ./clients/python`
(from a copy of the folder, so no build files land in the checkout), counts the packages
it added and measures what it added to site-packages; then the same for the extras
`[langchain,llamaindex]` on top. Then runs, with that environment's interpreter only, the
README's Python example and docs/PYTHON.md's LangChain and LlamaIndex examples against a
stack (`--url`/`--token`, else a stack of this checkout started with `lakehouse up` on free
ports, holding the README's example corpora). Targets for the client alone: <= 15
packages, <= 40 MB, <= 20 s. pip's cache is whatever this machine has (say so when
quoting the time).

    .venv/bin/python scripts/bench_client_install.py [--url URL --token TOKEN]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench_gateway import start_stack  # noqa: E402

from tests.client.test_docs_examples import blocks  # noqa: E402

TARGETS = {"packages": 15, "MB": 40.0, "seconds": 20.0}
EXAMPLES = ("handbook", "tickets")
FRAMEWORKS = ("lakehouse.integrations.langchain", "lakehouse.integrations.llamaindex")


@contextlib.contextmanager
def stack_url(url: str | None, tmp: Path) -> Iterator[str]:
    """`url`, else the gateway of a stack of this checkout, started for the block."""
    if url is not None:
        yield url
        return
    proc, urls = start_stack(tmp / "stack")
    try:
        yield urls["gateway"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)


def installed(python: Path) -> set[str]:
    out = subprocess.run([str(python), "-m", "pip", "list", "--format=json"],
                         capture_output=True, text=True, check=True).stdout
    return {p["name"].lower() for p in json.loads(out)}


def site_bytes(venv: Path) -> int:
    return sum(f.stat().st_size for f in venv.glob("lib/python*/site-packages/**/*")
               if f.is_file() and not f.is_symlink())


def install(python: Path, venv: Path, target: str) -> tuple[float, set[str], int]:
    """pip install `target`: seconds, the packages it added, the bytes it added."""
    before, size = installed(python), site_bytes(venv)
    started = time.perf_counter()
    done = subprocess.run([str(python), "-m", "pip", "install", "-q",
                           "--disable-pip-version-check", target],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - started
    # pip's notes about this machine's extra package folders are noise; errors still show.
    noise = "WARNING: Location"
    print("".join(line for line in done.stderr.splitlines(keepends=True)
                  if not line.startswith(noise)), end="", file=sys.stderr)
    done.check_returncode()
    return took, installed(python) - before, site_bytes(venv) - size


def report(label: str, took: float, added: set[str], size: int) -> None:
    print(f"{label:<44} {took:6.1f} s  {len(added):3d} packages  {size / 1e6:7.1f} MB")


def examples() -> list[tuple[str, str]]:
    """The README's Python example and docs/PYTHON.md's framework examples: (where, code)."""
    out = [(f"README.md:{b.line}", b.code) for b in blocks(ROOT / "README.md", ("python",))]
    out += [(f"docs/PYTHON.md:{b.line}", b.code)
            for b in blocks(ROOT / "docs" / "PYTHON.md", ("python",))
            if any(f in b.code for f in FRAMEWORKS)]
    return out


def run_examples(python: Path, url: str, token: str, cwd: Path) -> bool:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LAKEHOUSE_") and k != "PYTHONPATH"}
    env.update(LAKEHOUSE_URL=url, LAKEHOUSE_TOKEN=token)
    ok = True
    for where, code in examples():
        done = subprocess.run([str(python), "-c", code], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=120)
        first = (done.stdout.strip().splitlines() or [""])[0]
        print(f"{where:<24} {'ran' if done.returncode == 0 else 'FAILED':<7} {first[:60]}")
        if done.returncode != 0:
            print(done.stderr[-2000:], file=sys.stderr)
            ok = False
    return ok


def load_examples(url: str, token: str) -> None:
    env = {**os.environ, "LAKEHOUSE_URL": url, "LAKEHOUSE_TOKEN": token}
    for name in EXAMPLES:
        subprocess.run([sys.executable, "-m", "internal.cli.main", "ingest",
                        str(ROOT / "docs" / "examples" / f"{name}.jsonl"), "--corpus", name,
                        "--quiet"], cwd=ROOT, env=env, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="a running stack holding the README's corpora")
    ap.add_argument("--token", default="")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lakehouse-client-install-",
                                     ignore_cleanup_errors=True) as name:
        tmp = Path(name)
        source = tmp / "python"
        shutil.copytree(ROOT / "clients" / "python", source,
                        ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__"))
        venv = tmp / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = venv / "bin" / "python"
        print(f"python {sys.version.split()[0]}, fresh venv; {time.strftime('%Y-%m-%d')}")
        took, added, size = install(python, venv, str(source))
        report("pip install ./clients/python", took, added, size)
        met = (len(added) <= TARGETS["packages"] and size / 1e6 <= TARGETS["MB"]
               and took <= TARGETS["seconds"])
        print(f"  targets <= {TARGETS['packages']} packages, <= {TARGETS['MB']:.0f} MB, "
              f"<= {TARGETS['seconds']:.0f} s: {'met' if met else 'NOT met'}")
        print(f"  added: {', '.join(sorted(added))}")
        took, extra, size = install(python, venv, f"{source}[langchain,llamaindex]")
        report("  then the extras [langchain,llamaindex]", took, extra, size)
        with stack_url(args.url, tmp) as url:
            if args.url is None:
                load_examples(url, args.token)
            ok = run_examples(python, url, args.token, tmp)
        return 0 if ok and met else 1


if __name__ == "__main__":
    raise SystemExit(main())
