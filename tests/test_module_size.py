"""No module of fake_server, runner_ref or fixtures is over about 400 lines (the house style: a
module holds one concern; a bigger one is split by concern, not trimmed). The target is 400
lines; the check trips at 420."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("fake_server", "runner_ref", "fixtures")
MAX_LINES = 420  # "about 400": the target is 400, this is the tripwire


def over(paths: list[Path], limit: int = MAX_LINES) -> dict[str, int]:
    return {str(p.relative_to(ROOT)): n for p in paths
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > limit}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_over_the_limit(package: str) -> None:
    paths = sorted((ROOT / package).rglob("*.py"))
    assert paths
    assert over(paths) == {}


def test_the_check_can_fail() -> None:
    assert over([ROOT / "fake_server" / "codes.py"], limit=10) == {"fake_server/codes.py": len(
        (ROOT / "fake_server" / "codes.py").read_text(encoding="utf-8").splitlines())}
