"""`lakehouse --help` and every command's: one screen (30 lines of 80 columns) each, and an
example to copy."""

from __future__ import annotations

import argparse

import pytest

from internal.cli.main import build_parser, commands

SCREEN_LINES = 30
SCREEN_COLUMNS = 80


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    return {"": parser, **commands(parser)}  # "playbooks list" and "playbooks delete" too


@pytest.mark.parametrize("command", list(_commands()))
def test_help_fits_one_screen_and_names_an_example(command: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(SCREEN_COLUMNS))
    text = _commands()[command].format_help()
    lines = text.rstrip("\n").split("\n")
    assert len(lines) <= SCREEN_LINES, f"{command or 'lakehouse'}: {len(lines)} lines\n{text}"
    assert all(len(line) <= SCREEN_COLUMNS for line in lines), text
    assert "example" in text and "lakehouse " in text.split("example", 1)[1], text
