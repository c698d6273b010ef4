"""The status page's files are package resources: an installed layout (what setuptools puts in
the wheel) holds every one of them, and the policy served with the page allows exactly the
script and style blocks served in it."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from streams.dashboard import page, resources
from streams.dashboard.server import DashboardServer
from tests.dashboard.fakes import FakeReadModel, FakeStream

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "streams" / "dashboard" / "static"

# Run in a fresh interpreter with only the installed layout ahead of the venv: which copy of
# `streams` it imports, and what importlib.resources reads from it.
PROBE = """
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
from streams.dashboard import page, resources
print(json.dumps({
    "module": resources.__file__,
    "files": {name: resources.read(name) for name in resources.FILES},
    "html": hashlib.sha256(page.HTML).hexdigest(),
}))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package as setuptools lays it out for the wheel (`build_py`: modules and package
    data), built from a copy of the checkout's pyproject.toml and streams/."""
    src = tmp_path_factory.mktemp("src")
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copy(ROOT / "README.md", src)
    shutil.copytree(ROOT / "streams", src / "streams", ignore=shutil.ignore_patterns("__pycache__"))
    lib = tmp_path_factory.mktemp("lib")
    setup = [sys.executable, "-c", "import setuptools; setuptools.setup()", "-q"]
    subprocess.run(
        [*setup, "build_py", "--build-lib", str(lib)],
        cwd=src,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return lib


def test_every_static_file_is_listed_and_read_as_a_resource() -> None:
    assert sorted(resources.FILES) == sorted(p.name for p in STATIC.iterdir() if p.is_file())
    for name in resources.FILES:
        assert resources.read(name) == (STATIC / name).read_text(encoding="utf-8"), name


def test_an_installed_layout_holds_every_file_and_serves_the_same_page(installed: Path) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, str(installed)], capture_output=True, text=True, timeout=120
    )
    assert probe.returncode == 0, probe.stderr[-3000:]  # e.g. a file left out of the wheel
    found = json.loads(probe.stdout)
    assert Path(found["module"]).is_relative_to(installed)  # not the checkout's
    assert found["files"] == {
        name: (STATIC / name).read_text(encoding="utf-8") for name in resources.FILES
    }
    assert found["html"] == hashlib.sha256(page.HTML).hexdigest()


def test_a_block_of_the_page_must_fit_its_template() -> None:
    with pytest.raises(ValueError, match="exactly once"):
        page.render("<script>{{ page.js }}</script>", {"page.js": "", "table.js": ""})
    with pytest.raises(ValueError, match="must not contain"):
        page.render("<script>{{ page.js }}</script>", {"page.js": "x('</script>')"})


@pytest.fixture
def served() -> Iterator[tuple[dict[str, str], str]]:
    """The headers and body of `GET /` from a running status page."""
    model = FakeReadModel(views=[FakeStream("s", downstream_ms=0)])
    with DashboardServer(model=model, port=0, refresh_interval_s=60) as server:
        address = urlsplit(server.url)
        conn = http.client.HTTPConnection(address.hostname or "", address.port, timeout=10)
        try:
            conn.request("GET", "/")
            response = conn.getresponse()
            body = response.read().decode()
            assert response.status == 200
            yield dict(response.getheaders()), body
        finally:
            conn.close()


def _sources(policy: str, directive: str) -> list[str]:
    (found,) = [d.split()[1:] for d in policy.split(";") if d.split()[:1] == [directive]]
    return found


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_policy_covers_exactly_the_served_scripts_and_styles(
    served: tuple[dict[str, str], str],
) -> None:
    headers, html = served
    policy = headers["Content-Security-Policy"]
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    styles = re.findall(r"<style>(.*?)</style>", html, re.S)
    assert len(scripts) == 2 and len(styles) == 2
    assert 'fetch("/api/state"' in "".join(scripts)  # the files' code, not a placeholder
    assert "{{" not in html
    assert _sources(policy, "script-src") == [_hash(s) for s in scripts]
    assert _sources(policy, "style-src") == [_hash(s) for s in styles]
    assert _sources(policy, "default-src") == ["'none'"]
    # Nothing else runs: no script or style element that is not one of those blocks.
    assert html.count("<script") == 2 and html.count("<style") == 2
