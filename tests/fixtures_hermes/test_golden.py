"""Golden tests: replay the recorded Hermes 0.19.0 requests and compare frame shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from fixtures import ScriptedHermes
from fixtures.hermes.client import GatewayClient

# copies of ../shared/hermes-0.19.0-frames/ (real Hermes 0.19.0), so CI needs nothing outside
FRAMES = Path(__file__).parent / "recordings"

SCRIPT = {"plain": "plain", "tool": "tool", "danger": "danger", "resume": "slow"}


def shape(v: Any) -> Any:
    """Types, keys and key order; list lengths are not compared, only the first element."""
    if isinstance(v, dict):
        return [(k, shape(x)) for k, x in v.items()]
    if isinstance(v, list):
        return ["list", shape(v[0])] if v else ["list"]
    if isinstance(v, bool) or v is None:
        return type(v).__name__
    if isinstance(v, int | float):
        return "number"
    return type(v).__name__


def label(f: dict[str, Any]) -> str:
    if f.get("method") == "event":
        return "event:" + f["params"]["type"]
    return "error" if "error" in f else "result"


def load(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FRAMES / f"{name}.jsonl").read_text().splitlines()]


def remap(v: Any, ids: dict[str, str]) -> Any:
    if isinstance(v, str):
        return ids.get(v, v)
    if isinstance(v, dict):
        return {k: remap(x, ids) for k, x in v.items()}
    if isinstance(v, list):
        return [remap(x, ids) for x in v]
    return v


@pytest.mark.parametrize("name", ["plain", "tool", "danger", "resume"])
async def test_replay_matches_recording(name: str) -> None:
    rec = load(name)
    expected = [r["msg"] for r in rec if r["dir"] == "<-"]
    async with ScriptedHermes(SCRIPT[name], seed=7, time_scale=0) as hermes, \
            aiohttp.ClientSession() as http:
        if name == "resume":
            hermes.add_stored_session(stored_id="20261129_225342_c12541", title="probe", messages=[
                {"role": "user", "text": "Say PONG"},
                {"role": "assistant", "text": "Hello from the fake model. PONG-42"}])
        c = await GatewayClient.connect(http, hermes.ws_url)
        ids: dict[str, str] = {}
        seen = 0
        pause = None
        for r in rec:
            if r["dir"] == "<-":
                seen += 1
                continue
            # wait until we have as many frames as the recording had before this request
            await c.wait(lambda f, n=seen: len(c.received) >= n, timeout=5)
            msg = remap(r["msg"], ids)
            if name == "resume" and msg["method"] == "session.interrupt" and pause is not None:
                await pause.reached(timeout=5)
            await c.send(msg)
            reply = await c.wait(lambda f, i=msg["id"]: f.get("id") == i and "method" not in f)
            if msg["method"] in ("session.create", "session.resume") and "result" in reply:
                ids[r_live(rec, r["msg"]["id"])] = reply["result"]["session_id"]
                if name == "resume" and pause is None:
                    pause = hermes.pause_at("after message.delta #3 of step 2")
            if pause is not None and msg["method"] == "session.interrupt":
                pause.release()
        await c.wait(lambda f: len(c.received) >= len(expected), timeout=10)
        got = align(c.received, expected)
        assert [label(f) for f in got] == [label(f) for f in expected]
        for g, e in zip(got, expected, strict=True):
            assert shape(g) == shape(e), (label(e), g, e)
            if "result" in e and set(e["result"]) <= {"status", "closed", "resolved"}:
                assert g["result"] == e["result"]
            if "error" in e:
                assert g["error"] == e["error"]
            if label(e) == "event:message.complete":
                assert g["params"]["payload"]["text"] == e["params"]["payload"]["text"]
                assert g["params"]["payload"]["status"] == e["params"]["payload"]["status"]
        await c.close()


def r_live(rec: list[dict[str, Any]], rid: int) -> str:
    """The live session id the recording's reply to request ``rid`` carried."""
    for r in rec:
        m = r["msg"]
        if r["dir"] == "<-" and m.get("id") == rid and "result" in m:
            return str(m["result"]["session_id"])
    raise KeyError(rid)


def align(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop our ``session.info`` events that real Hermes sent later than the recording's end
    (it is emitted asynchronously after message.complete; the recorder had moved on)."""
    out: list[dict[str, Any]] = []
    j = 0
    for e in expected:
        while j < len(got) and label(got[j]) != label(e) and label(got[j]) == "event:session.info":
            j += 1
        if j < len(got):
            out.append(got[j])
            j += 1
    return out
