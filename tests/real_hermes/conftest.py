"""tests/real_hermes: a real Hermes Agent 0.19.0 (skipped with one line when not installed)."""
from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
