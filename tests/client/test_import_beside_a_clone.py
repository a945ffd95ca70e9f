"""`import lakehouse` in a script that sits beside a clone of this repository (a folder
named `lakehouse`, not a package) gets the client, not an empty namespace package: the
client is installed on a path entry (setup.sh's editable install in compat mode), where a
regular package wins over a folder of the same name met earlier."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_a_folder_named_lakehouse_beside_the_script_does_not_hide_the_client(
        tmp_path: Path) -> None:
    clone = tmp_path / "lakehouse"
    (clone / "internal").mkdir(parents=True)
    (clone / "README.md").write_text("# Lakehouse\n", encoding="utf-8")
    script = tmp_path / "example.py"
    script.write_text("import lakehouse\nprint(lakehouse.Client.__name__)\n", encoding="utf-8")
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Client"
