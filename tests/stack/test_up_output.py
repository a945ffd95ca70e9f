"""What `lakehouse up` shows a person: one line per part as it comes up; the daemons'
logs in files, and in the terminal only when asked (--verbose)."""

from __future__ import annotations

import io
from pathlib import Path

from internal.cli.main import build_parser
from internal.stack.plan import ChildSpec
from internal.stack.supervisor import Child, Supervisor
from tests.stack.ports import free_port


def _fake(name: str) -> ChildSpec:
    port = free_port()
    return ChildSpec(name, "tests.stack.fake_daemon", "127.0.0.1", port, {"FAKE_PORT": str(port)})


async def _run(tmp_path: Path, echo: io.BytesIO | None) -> list[str]:
    ready: list[str] = []

    def on_event(event: str, child: Child) -> None:
        if event == "ready":
            ready.append(child.spec.name)

    sup = Supervisor([_fake("alpha"), _fake("beta")], log_dir=tmp_path, on_event=on_event,
                     echo=echo)
    await sup.start()
    try:
        assert await sup.wait_ready(60) == []
    finally:
        await sup.stop()
    return ready


async def test_logs_go_to_files_and_the_terminal_only_when_asked(tmp_path: Path) -> None:
    quiet = tmp_path / "quiet"
    assert sorted(await _run(quiet, None)) == ["alpha", "beta"]
    for name in ("alpha", "beta"):
        assert "fake_daemon_started" in (quiet / f"{name}.log").read_text()

    verbose = tmp_path / "verbose"
    echo = io.BytesIO()
    assert sorted(await _run(verbose, echo)) == ["alpha", "beta"]
    assert echo.getvalue().count(b"fake_daemon_started") == 2
    for name in ("alpha", "beta"):
        assert "fake_daemon_started" in (verbose / f"{name}.log").read_text()


def test_up_logs_to_var_log_by_default() -> None:
    args = build_parser().parse_args(["up"])
    assert (args.log_dir, args.verbose) == ("var/log", False)
    assert build_parser().parse_args(["up", "--verbose"]).verbose is True
