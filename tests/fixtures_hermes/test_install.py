"""The wheel installs next to PyPI's ``fixtures`` (testing-cabal) and neither breaks the other.

Our wheel ships ``fixtures.hermes`` (and ``fixtures.real_hermes``) but not ``fixtures/__init__.py``:
installed, ``fixtures`` is a PEP 420 namespace, or testing-cabal's regular package whose
directory our subpackages share. The test builds the wheel from a copy of the tree, installs it
into a fresh venv, adds PyPI ``fixtures``, removes ours, and runs what is installed each time
(with the old layout, removing ours deleted testing-cabal's ``fixtures/__init__.py``).

Wheels (the build backend, our dependencies, PyPI ``fixtures``) are cached in
``$XDG_CACHE_HOME/hermes-runner-conformance/wheels``; PyPI is asked only when the cache lacks
one. Offline with an empty cache the test is skipped with a one-line reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ..import_graph import import_sites, source

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
WHEEL_PACKAGES = ("conformance", "fake_server", "runner_ref")  # shipped as top-level names
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / \
    "hermes-runner-conformance" / "wheels"

THEIRS = """
import fixtures
from fixtures import TempDir
with TempDir() as d:
    assert os.path.isdir(d.path)
assert hasattr(fixtures, "Fixture"), fixtures.__file__
"""
OURS = """
import asyncio, aiohttp
from fixtures.hermes import ScriptedHermes
async def main():
    async with ScriptedHermes(mode="serve") as h, aiohttp.ClientSession() as s:
        async with s.get(h.url + "/api/status") as r:
            assert r.status == 200 and (await r.json())["version"] == "0.19.0"
asyncio.run(main())
"""


def _pip(*args: str, python: Path | None = None) -> subprocess.CompletedProcess[str]:
    target = ["--python", str(python)] if python else []
    return subprocess.run([sys.executable, "-m", "pip", *target, *args, "-q",
                           "--disable-pip-version-check"],
                          capture_output=True, text=True, timeout=120)


def _offline_pip(*args: str, python: Path | None = None) -> subprocess.CompletedProcess[str]:
    return _pip(*args, "--no-index", "--find-links", str(CACHE), python=python)


def _cached_pip(requirements: list[str], *args: str,
                python: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``pip ARGS`` from the wheel cache; when that fails, fill the cache from PyPI and retry.

    Skips (one line) when PyPI is unreachable and the cache lacks a wheel.
    """
    done = _offline_pip(*args, python=python)
    if done.returncode == 0:
        return done
    CACHE.mkdir(parents=True, exist_ok=True)
    got = _pip("download", "-d", str(CACHE), "--retries", "1", "--timeout", "15", *requirements)
    if got.returncode != 0:
        last = (got.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"PyPI unreachable and wheels not cached in {CACHE}: {last}")
    return _offline_pip(*args, python=python)


def _build_python(needs: list[str]) -> Path:
    """A cached venv holding only the build backend (rebuilding it every run costs ~10 s)."""
    home = CACHE.parent / f"build-venv-py{sys.version_info[0]}{sys.version_info[1]}"
    python = home / "bin" / "python"
    if python.exists():
        return python
    fresh = CACHE.parent / f"{home.name}.{os.getpid()}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True)
    _ok(_cached_pip(needs, "install", *PYPROJECT["build-system"]["requires"],
                    python=fresh / "bin" / "python"))
    try:
        fresh.rename(home)  # atomic; a concurrent run may have won the race
    except OSError:
        shutil.rmtree(fresh, ignore_errors=True)
    return python


def _run(python: Path, code: str, cwd: Path) -> None:
    proc = subprocess.run([str(python), "-I", "-c", "import os\n" + code], cwd=cwd,
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ.get("PATH", ""), "HOME": str(cwd)})
    assert proc.returncode == 0, proc.stderr[-3000:]


def _ok(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow
def test_wheel_installs_next_to_pypi_fixtures(tmp_path: Path) -> None:
    needs = [*PYPROJECT["build-system"]["requires"], *PYPROJECT["project"]["dependencies"],
             "fixtures"]
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for pkg in ("fixtures", *WHEEL_PACKAGES):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    backend = PYPROJECT["build-system"]["build-backend"]
    built = subprocess.run(  # the PEP 517 hook pip would call, minus pip's ~5x overhead
        [str(_build_python(needs)), "-I", "-c",
         f"import sys, {backend} as b; print(b.build_wheel(sys.argv[1]))", str(tmp_path)],
        cwd=src, capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = tmp_path / built.stdout.strip().splitlines()[-1]
    assert wheel.name.startswith("hermes_runner_conformance-"), wheel
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    install = ("install", "--no-compile")

    _ok(_cached_pip(needs, *install, str(wheel), python=py))     # ours alone: a namespace
    _run(py, OURS, tmp_path)
    _ok(_cached_pip(needs, *install, "fixtures", python=py))     # + testing-cabal's after it
    _run(py, THEIRS + OURS, tmp_path)
    _ok(_pip("uninstall", "-y", "hermes-runner-conformance", python=py))  # − ours: theirs stays
    _run(py, THEIRS, tmp_path)


def _bare_fixtures_imports(path: Path) -> list[int]:
    return [site.line for site in import_sites(source(path))
            if site.level == 0 and site.module == "fixtures"]


def test_installed_packages_import_fixtures_hermes_not_bare_fixtures() -> None:
    """Installed, bare ``fixtures`` may be testing-cabal's: shipped code imports fixtures.hermes."""
    bad = [f"{p.relative_to(ROOT)}:{n}" for pkg in WHEEL_PACKAGES
           for p in sorted((ROOT / pkg).rglob("*.py")) for n in _bare_fixtures_imports(p)]
    assert not bad, f"import fixtures.hermes instead of bare 'fixtures' at {', '.join(bad)}"
    assert _bare_fixtures_imports(Path(__file__).parent / "test_auth.py")  # the scan sees them
