"""Chroma's server (`chroma run`) from a virtual environment of its own: the `chromadb`
package is a benchmark tool, never a Lakehouse dependency, so it is installed into
var/bench-chroma on first use (`python -m venv` + `pip install chromadb==1.5.9`) and
driven through raw HTTP and through its own client (bench/peers/chroma_client.py, run by
that environment's interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.harness.stacks import ROOT, free_port

VERSION = "1.5.9"
VENV = ROOT / "var" / "bench-chroma"
CLIENT = Path(__file__).resolve().parent / "chroma_client.py"


def venv(path: Path = VENV) -> Path:
    """The benchmark's own environment with chromadb (made on first use)."""
    if not (path / "bin" / "chroma").exists():
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        subprocess.run([str(path / "bin" / "pip"), "install", "-q", f"chromadb=={VERSION}"], check=True)
    return path


class Chroma:
    """`chroma run` on a free port, its files under `where`."""

    def __init__(self, where: Path, env: Path = VENV) -> None:
        self.venv, self.dir, self.port = venv(env), where, free_port()
        self.base = f"http://127.0.0.1:{self.port}/api/v2"
        self.proc = self.start()
        self.url = ""  # the collection's query URL, once loaded

    def start(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([str(self.venv / "bin" / "chroma"), "run", "--path", str(self.dir),
                                 "--host", "127.0.0.1", "--port", str(self.port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(1200):
            if proc.poll() is not None:
                raise SystemExit(f"chroma exited with {proc.returncode}")
            try:
                with urllib.request.urlopen(f"{self.base}/heartbeat", timeout=5):
                    return proc
            except OSError:
                time.sleep(0.1)
        raise SystemExit("chroma not ready after 120 s")

    def restart(self) -> None:
        """A new ef_search reaches the index only when the server loads it again: Chroma
        1.5.9 keeps a loaded index with the ef_search it was loaded with."""
        self.stop()
        self.proc = self.start()

    def client(self, *args: str) -> Any:
        """One command of its own client (load, ef, query): its JSON answer."""
        out = subprocess.run([str(self.venv / "bin" / "python"), str(CLIENT), *args, "--port",
                              str(self.port)], capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"chroma client {args[0]}: {out.stderr[-2000:]}")
        return json.loads(out.stdout)

    def load(self, data_file: Path) -> dict[str, Any]:
        got = self.client("load", "--data", str(data_file))
        self.url = (f"{self.base}/tenants/default_tenant/databases/default_database/collections/"
                    f"{got['id']}/query")
        return dict(got)

    def ef(self, ef: int) -> None:
        self.client("ef", "--ef", str(ef))
        self.restart()

    def body(self, query: list[float], k: int) -> dict[str, Any]:
        return {"query_embeddings": [query], "n_results": k, "include": ["distances"]}

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
