"""What installing the Python client costs a new user, and whether the docs' examples run.

In a fresh virtual environment (pip alone): the time of `pip install ./clients/python`
(from a copy of the folder), the packages it added and the bytes it added to
site-packages; then the same for the extras `[langchain,llamaindex]` on top. Then the
README's Python example and docs/PYTHON.md's LangChain and LlamaIndex examples, run with
that environment's interpreter alone against a stack (--url/--token, else a stack of this
checkout holding the README's example corpora). pip's cache is whatever this machine has.

Targets for the client alone: <= 15 packages, <= 40 MB, <= 20 s.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.harness import Run
from tests.client.test_docs_examples import blocks

OPTIONS = {"token": ""}
QUICK: dict[str, object] = {}
TARGETS = {"packages": 15, "MB": 40.0, "seconds": 20.0}
FRAMEWORKS = ("lakehouse.integrations.langchain", "lakehouse.integrations.llamaindex")


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
                           "--disable-pip-version-check", target], capture_output=True, text=True)
    took = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"installing {target} failed: {done.stderr[-2000:]}")
    return took, installed(python) - before, site_bytes(venv) - size


def main(run: Run) -> int:
    source, venv = run.folder / "python", run.folder / "venv"
    shutil.copytree(run.root / "clients" / "python", source,
                    ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__"))
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    took, added, size = install(python, venv, str(source))
    more = install(python, venv, f"{source}[langchain,llamaindex]")
    met = len(added) <= TARGETS["packages"] and size / 1e6 <= TARGETS["MB"] and took <= TARGETS["seconds"]
    run.table(f"python {sys.version.split()[0]}, a fresh venv", ["install", "seconds:.1f",
              "packages:d", "MB:.1f"], [("pip install ./clients/python", took, len(added), size / 1e6),
                                        ("then the extras [langchain,llamaindex]", more[0],
                                         len(more[1]), more[2] / 1e6)])
    run.say(f"targets <= {TARGETS['packages']} packages, <= {TARGETS['MB']:.0f} MB, <= "
            f"{TARGETS['seconds']:.0f} s: {'met' if met else 'NOT met'}; added: {', '.join(sorted(added))}")
    examples = [(f"README.md:{b.line}", b.code) for b in blocks(run.root / "README.md", ("python",))]
    examples += [(f"docs/PYTHON.md:{b.line}", b.code) for b in
                 blocks(run.root / "docs" / "PYTHON.md", ("python",)) if any(f in b.code for f in FRAMEWORKS)]
    with run.stack() as stack:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_") and k != "PYTHONPATH"}
        env.update(LAKEHOUSE_URL=stack.gateway, LAKEHOUSE_TOKEN=run.args.token)
        if not run.args.url:
            for name in ("handbook", "tickets"):
                subprocess.run([sys.executable, "-m", "internal.cli.main", "ingest",
                                str(run.root / "docs" / "examples" / f"{name}.jsonl"), "--corpus",
                                name, "--quiet"], cwd=run.root, env=env, check=True)
        ran = []
        for where, code in examples:
            done = subprocess.run([str(python), "-c", code], cwd=run.folder, env=env,
                                  capture_output=True, text=True, timeout=120)
            ran.append((where, "ran" if done.returncode == 0 else "FAILED",
                        (done.stdout.strip().splitlines() or [""])[0][:60]))
            if done.returncode:
                print(done.stderr[-2000:], file=sys.stderr)
    run.table("the docs' examples with the fresh environment's interpreter",
              ["example", "result", "first line"], ran)
    return 0 if met and all(r[1] == "ran" for r in ran) else 1
