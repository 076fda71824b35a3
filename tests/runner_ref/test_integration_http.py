"""The http kind through the runner process against the scripted Hermes: downloads confined to
real artifactRoots (symlinks out, `..`, outside paths refused before Hermes is asked)."""
from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from fixtures import ScriptedHermes

from .integration import rig


async def test_downloads_only_inside_artifact_roots(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    root.mkdir()
    (root / "report.txt").write_bytes(b"report body \x00\xff")
    outside = tmp_path / "private.txt"
    outside.write_text("secret")
    (root / "escape").symlink_to(outside)
    async with ScriptedHermes(None) as hermes, \
            rig(tmp_path, hermes.url, artifact_roots=(str(root),)) as r:

        async def download(path: str) -> Any:
            return await r.cp.command(r.runner_id, "http", {
                "path": "/api/files/download", "method": "GET",
                "search": f"profile=default&path={path}"}, account="alice")

        ok = await download(str(root / "report.txt"))
        assert ok.ok, ok
        assert base64.b64decode(ok.result["body"]) == b"report body \x00\xff"
        for bad in (str(root / "escape"), str(outside), f"{root}/../private.txt", "report.txt"):
            out = await download(bad)
            assert out.code == "runner_artifact_forbidden", (bad, out)
        reads = hermes.effects.of("file.read")
        assert len(reads) == 1 and reads[0].detail["path"] == str((root / "report.txt").resolve())
        status = await r.cp.command(r.runner_id, "http", {"path": "/api/status", "method": "GET"})
        assert status.ok and status.result["status"] == 200
        mutation = await r.cp.command(r.runner_id, "http", {"path": "/api/config", "method": "PUT"},
                                      account="alice")
        assert mutation.code == "runner_http_forbidden"
        assert hermes.effects.count("http.mutation") == 0
