"""``certificate.json`` / ``certificate.md``: who was certified, by what, with which figures.

Rules of this module:
- Runner identity: the command template, the first line of ``--version`` if the runner answers
  it (the ``{config}`` argument and its flag dropped), and the sha256 of each ``--runner-file``.
- Figures: MUST passed/total and SHOULD passed/total over applicable cases; baselined cases
  count as not passed. The verdict is ``results.verdict()`` (pass, baselined, incomplete,
  fail): a certificate states what was shown about the protocol, so with baselined MUST
  failures it reads "conforms except N baselined MUST cases" with their IDs, never PASS, and
  the cases the harness could not judge (error, timeout, not-run) are named, never passed.
"""

from __future__ import annotations

import hashlib
import shlex
import subprocess
from pathlib import Path
from typing import Any

from ..results import RunResults, verdict_line


def version_argv(runner_cmd: str) -> list[str]:
    argv = shlex.split(runner_cmd)
    out: list[str] = []
    for tok in argv:
        if "{config}" in tok:
            if out and out[-1].startswith("-") and "=" not in out[-1]:
                out.pop()
            continue
        out.append(tok)
    return [*out, "--version"]


def runner_version(runner_cmd: str, timeout: float = 10.0) -> str | None:
    try:
        proc = subprocess.run(version_argv(runner_cmd), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    text = (proc.stdout or proc.stderr).strip()
    if proc.returncode != 0 or not text:
        return None
    return text.splitlines()[0][:200]


def sha256_files(paths: list[str]) -> dict[str, str]:
    return {p: hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths}


def certificate(results: RunResults, identity: dict[str, Any], date: str) -> dict[str, Any]:
    (mp, mt), (sp, st) = results.level_figures("MUST"), results.level_figures("SHOULD")
    return {
        "certificate_version": 1,
        "protocol": "hermes-runner-1",
        "runner": identity,
        "harness_version": results.harness_version,
        "profile": results.profile,
        "must": {"passed": mp, "total": mt},
        "should": {"passed": sp, "total": st},
        "counts": results.counts(),
        "baseline": results.baseline,
        "seed": results.seed,
        "verdict": results.verdict(),
        "verdict_text": verdict_line(results),
        "baselined_must": results.baselined_must(),
        "not_judged": {c.id: c.status for c in results.cases if c.id in set(results.unjudged())},
        "date": date,
        **({"shard": f"{results.shard['index']}/{results.shard['total']}"} if results.shard else {}),
        **({"shards": len(results.shards)} if results.shards else {}),
    }


def certificate_md(cert: dict[str, Any]) -> str:
    r = cert["runner"]
    lines = [
        "# Hermes Runner protocol 1 — certificate",
        "",
        f"**Verdict: {cert.get('verdict_text') or cert['verdict'].upper()}** "
        f"(profile `{cert['profile']}`)",
        "",
        "| | |", "|---|---|",
        f"| runner command | `{r['command']}` |",
        f"| runner version | {('`' + r['version'] + '`') if r.get('version') else '(no `--version` answer)'} |",
        f"| MUST | {cert['must']['passed']}/{cert['must']['total']} passed |",
        f"| SHOULD | {cert['should']['passed']}/{cert['should']['total']} passed |",
        f"| statuses | {', '.join(f'{k} {v}' for k, v in cert['counts'].items())} |",
        f"| baseline | {('`' + cert['baseline'] + '`') if cert['baseline'] else 'none'} |",
        f"| harness | hermes-runner-conformance {cert['harness_version']} |",
        f"| seed | {cert['seed']} |",
        f"| date | {cert['date']} |",
    ]
    if cert.get("shard"):
        lines += [f"| shard | {cert['shard']}: this shard's cases only (`python -m conformance "
                  "merge` joins the shards into the run's certificate) |"]
    if cert.get("shards"):
        lines += [f"| shards | merged from {cert['shards']} shards |"]
    if cert.get("baselined_must"):
        lines += ["", f"## Baselined MUST cases ({len(cert['baselined_must'])})", "",
                  "Known failures of a MUST requirement: the runner does not conform on these.",
                  "", *(f"- {i}" for i in cert["baselined_must"])]
    if cert.get("not_judged"):
        lines += ["", f"## Not judged ({len(cert['not_judged'])})", "",
                  "The harness could not judge these cases (error, timeout) or did not run them "
                  "(not-run): no statement about the runner is made on them.", "",
                  *(f"- {i}: {s}" for i, s in cert["not_judged"].items())]
    if r.get("files"):
        lines += ["", "## Runner files (sha256)", "", "| file | sha256 |", "|---|---|"]
        lines += [f"| `{p}` | `{h}` |" for p, h in r["files"].items()]
    return "\n".join(lines) + "\n"
