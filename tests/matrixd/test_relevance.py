"""Relevance filter scoring and symbol extraction (internal.matrixd.relevance)."""

from __future__ import annotations

import pytest

from internal.matrixd import relevance
from internal.matrixd.relevance import Chunk, Focus

RUST_FOCUS = Focus(
    path="src/net/connector.rs",
    text=(
        "use crate::registry::Registry;\n"
        "use std::sync::{Arc, Mutex as Lock};\n\n"
        "pub struct Connector {\n    registry: Arc<Registry>,\n}\n\n"
        "impl Connector {\n    pub fn dial(&self, addr: &str) -> Result<(), Error> { Ok(()) }\n}\n"
    ),
)


def one(focus: Focus, source: str, text: str, threshold: float = 0.3) -> relevance.Scored:
    return relevance.score(focus, [Chunk(text=text, source=source)], threshold)[0]


def fired(s: relevance.Scored) -> set[str]:
    return {k for k, v in s.signals.items() if v != 0}


# ---- each signal alone ---------------------------------------------------------------

BARE = Focus(path="src/net/connector.rs")


def test_path_match_alone() -> None:
    s = one(BARE, "/src/net/connector.rs#chunk-3", "nothing here")
    assert s.signals["path_match"] == 1.0
    # the same path also shares its prefix, so check path_match alone with a one-segment path
    s = one(Focus(path="connector.rs"), "lib/connector.rs", "nothing")
    assert fired(s) == {"path_match"} and s.total == 1.0


def test_path_match_needs_whole_segments() -> None:
    assert not relevance.path_encodes("src/net/myconnector.rs", "connector.rs")
    assert relevance.path_encodes("repo:src/net/connector.rs:10-20", "src/net/connector.rs")


def test_filename_match_alone() -> None:
    s = one(BARE, "docs/x.md", "See connector.rs for the dialing code.")
    assert fired(s) == {"filename_match"} and s.total == 0.6


def test_defined_match_alone() -> None:
    s = one(Focus(path="a.rs", defined_symbols=["Connector"]), "docs/x.md", "a Connector dials")
    assert fired(s) == {"defined_match"} and s.total == 0.6


def test_token_overlap_alone() -> None:
    focus = Focus(path="a.md", text="alpha beta gamma delta")
    s = one(focus, "docs/x.md", "alpha beta epsilon")
    assert fired(s) == {"token_overlap"}
    assert s.total == pytest.approx(0.4 * 2 / 5)


def test_prefix_match_alone() -> None:
    s = one(BARE, "src/net/pool.rs", "nothing")
    assert fired(s) == {"prefix_match"} and s.total == 0.3


def test_import_penalty_alone() -> None:
    s = one(Focus(path="a.rs", imported_symbols=["Registry"], defined_symbols=["Connector"]),
            "docs/x.md", "the Registry holds entries")
    assert fired(s) == {"import_penalty"} and s.total == -0.5


def test_no_penalty_when_a_defined_symbol_is_mentioned_too() -> None:
    s = one(Focus(path="a.rs", imported_symbols=["Registry"], defined_symbols=["Connector"]),
            "docs/x.md", "Connector asks the Registry")
    assert fired(s) == {"defined_match"}


# ---- threshold -------------------------------------------------------------------------

def test_threshold_split() -> None:
    chunks = [Chunk(text="x", source="src/net/pool.rs"),      # 0.3: prefix only
              Chunk(text="See connector.rs", source="a/b.md"),  # 0.6
              Chunk(text="x", source="elsewhere/z.rs")]       # 0.0
    kept = [s.kept for s in relevance.score(BARE, chunks, 0.3)]
    assert kept == [True, True, False]
    kept = [s.kept for s in relevance.score(BARE, chunks, 0.5)]
    assert kept == [False, True, False]
    kept = [s.kept for s in relevance.score(BARE, chunks, 0.0)]
    assert kept == [True, True, True]


def test_doc_id_is_the_source_when_source_is_absent() -> None:
    s = relevance.score(BARE, [Chunk(text="x", doc_id="src/net/connector.rs#1")])[0]
    assert s.source == "src/net/connector.rs#1" and s.signals["path_match"] == 1.0


# ---- adjacency pollution ---------------------------------------------------------------

def test_adjacency_pollution() -> None:
    chunks = [
        Chunk(source="src/net/dialer.rs",
              text="let c = Connector::new(cfg);\nc.dial(\"127.0.0.1:80\")?;"),
        Chunk(source="src/registry.rs",
              text="pub struct Registry { entries: Vec<Entry> }\nimpl Registry { pub fn insert(&mut self) {} }"),
        Chunk(source="docs/weather.md", text="It will rain in the afternoon."),
    ]
    connector, registry, unrelated = relevance.score(RUST_FOCUS, chunks, 0.3)
    assert connector.kept and connector.total > 0
    assert connector.signals["defined_match"] == 0.6
    assert not registry.kept and registry.total < 0
    assert registry.signals["import_penalty"] == -0.5
    assert not unrelated.kept and unrelated.total == 0


# ---- symbol extraction -----------------------------------------------------------------

def test_rust_symbols() -> None:
    s = relevance.focus_symbols(RUST_FOCUS)
    assert {"Connector", "dial"} <= s.defined
    assert {"Registry", "Arc", "Mutex", "Lock"} <= s.imported
    assert not s.defined & s.imported


def test_typescript_symbols() -> None:
    text = (
        "import React, { useState, type FC as Comp } from 'react';\n"
        "import * as path from \"node:path\";\n"
        "const fs = require('fs');\n"
        "export default class Widget extends Base {}\n"
        "export interface Props { name: string }\n"
        "export const makeWidget = () => new Widget();\n"
        "export async function render() {}\n"
        "type Alias = string;\n"
    )
    s = relevance.extract_symbols(text, "typescript")
    assert {"Widget", "Props", "makeWidget", "render", "Alias"} <= s.defined
    assert {"React", "useState", "FC", "Comp", "path", "fs"} <= s.imported


def test_go_symbols() -> None:
    text = (
        "package net\n\n"
        "import (\n\t\"fmt\"\n\treg \"example.com/lake/registry\"\n\t\"example.com/lake/store/v2\"\n)\n"
        "import \"strings\"\n\n"
        "type Connector struct {\n\tRetries int\n}\n\n"
        "type (\n\tDialer interface{}\n\tAddr string\n)\n\n"
        "const MaxConns = 8\n\n"
        "func (c *Connector) Dial(addr string) error { return nil }\n"
        "func NewConnector() *Connector { return nil }\n"
    )
    s = relevance.extract_symbols(text, "go")
    assert {"Connector", "Dialer", "Addr", "MaxConns", "Dial", "NewConnector"} <= s.defined
    assert "Retries" not in s.defined
    assert {"fmt", "reg", "store", "strings"} <= s.imported


def test_python_symbols_parsed_and_fragment() -> None:
    text = (
        "import os.path\nimport numpy as np\nfrom .registry import Registry, Entry as E\n\n"
        "LIMIT = 3\n\nclass Connector:\n    def dial(self): pass\n\nasync def connect(): pass\n"
    )
    s = relevance.extract_symbols(text, "python")
    assert {"LIMIT", "Connector", "connect"} <= s.defined
    assert {"os", "np", "Registry", "Entry", "E"} <= s.imported
    broken = text + "\ndef half(:\n"
    s2 = relevance.extract_symbols(broken, "python")
    assert {"Connector", "connect"} <= s2.defined
    assert {"np", "Registry", "E"} <= s2.imported


def test_language_of() -> None:
    assert relevance.language_of("src/a.rs") == "rust"
    assert relevance.language_of("web/App.tsx") == "typescript"
    assert relevance.language_of("cmd/main.go#2") == "go"
    assert relevance.language_of("x.py") == "python"
    assert relevance.language_of("README") is None
