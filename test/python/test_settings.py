"""The environment variables dlpc reads are declared in one module, and documented."""

import re
from pathlib import Path

import pytest

from dlpc import settings

ROOT = Path(__file__).resolve().parents[2]


def test_docs_table_is_the_modules():
    assert settings.table() in (ROOT / "docs" / "settings.md").read_text()


def test_every_read_is_declared():
    """No package module reads a DLPC_ variable from os.environ itself, and every name
    read through settings is declared."""
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("test", "bench", "build", ".pyright") or rel.name == "settings.py":
            continue
        text = path.read_text()
        assert not re.search(r"environ(\.get)?\s*[\[(]\s*['\"]DLPC_", text), rel
        for name in re.findall(r"\bsettings\.(?:get|flag|is_set)\(\s*\"(DLPC_\w+)\"", text):
            assert name in settings.SETTINGS, (rel, name)


def test_get_default_and_override(monkeypatch):
    monkeypatch.delenv("DLPC_CACHE_DIR", raising=False)
    assert settings.get("DLPC_CACHE_DIR") == str(Path("~/.cache/dlpc").expanduser())
    assert not settings.is_set("DLPC_CACHE_DIR")
    monkeypatch.setenv("DLPC_CACHE_DIR", " /tmp/x ")
    assert settings.get("DLPC_CACHE_DIR") == "/tmp/x" and settings.is_set("DLPC_CACHE_DIR")
    monkeypatch.setenv("DLPC_DEBUG", "0")
    assert not settings.flag("DLPC_DEBUG")
    monkeypatch.setenv("DLPC_DEBUG", "1")
    assert settings.flag("DLPC_DEBUG")


def test_undeclared_name_is_a_bug():
    with pytest.raises(KeyError):
        settings.get("DLPC_NO_SUCH_SETTING")
