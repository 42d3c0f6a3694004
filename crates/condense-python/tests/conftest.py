"""Where the shared transcripts and the CLI are: ``CONDENSE_TRANSCRIPTS`` (default
``../shared/transcripts`` beside the repository) and ``CONDENSE_CLI`` (default the workspace's
debug build)."""

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def transcripts() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("CONDENSE_TRANSCRIPTS", ROOT.parent / "shared" / "transcripts"))
    assert path.is_dir(), f"no shared transcripts at {path}"
    return path


@pytest.fixture(scope="session")
def cli() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("CONDENSE_CLI", ROOT / "target" / "debug" / "condense"))
    assert path.is_file(), f"no condense CLI at {path}: cargo build -p condense-cli"
    return path


@pytest.fixture()
def isolated(tmp_path, monkeypatch):
    """No user's or project's configuration, originals in a directory of the test's own."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("CONDENSE_STORE_DIR", str(tmp_path / "originals"))
    monkeypatch.chdir(tmp_path)
    return tmp_path
