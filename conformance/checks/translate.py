"""The real logs as facts: the control plane's history and lifecycle log, the scripted Hermes'
effect log, and the harness' own steps, mapped into ``facts.Fact`` rows.

Rules:
- Records are read with ``getattr`` (or ``dict.get``), so objects and their JSON dicts both work,
  and a missing field reads as None: new fields (``seq_out``, ``cause``, …) are used once present.
- All logs must be on one shared sequence: two records of different logs with one seq are
  refused (``SequenceClash``), since "the admit came before the effect" is then unprovable.
- A ``queued`` lifecycle entry gives a ``queue`` fact (the account and profile the server
  scoped the command to); a delivery and the effects joined to it carry that account.
- A poll batch gives one ``deliver`` per command, all with the poll's seq (``raw`` tells them
  apart); a ``gateway.close``/``lease.close`` success result also gives a ``close`` at its seq.
- Epoch facts come from the lifecycle log (``epoch_changed``) and from poll answers; one is kept
  only when the epoch differs from the previous one (no false epoch boundaries).
- **The join** (an effect → the command it executes), documented in ``JOIN`` below: the effect's
  kind names the command kind; its ``cause`` must match the command's payload; and its seq must lie
  in a *window* of the command: after a delivery's answer and before the next result posted by the
  instance that got that delivery (open-ended when that instance never posted one, e.g. it was
  killed). Exactly one command must match; none or several → the effect stays unjoined
  (``command_id`` None, ``reason`` says why). Effects Hermes makes on its own (a turn's steps,
  closes, logins, the queued prompt starting) are ``consequence`` facts and never joined.
- An effect's ``instance`` is the runner instance that opened its socket (RPC effects), else the
  one instance whose delivery window holds it, else None.
- ``before`` is the history that ended before the example began (a kept world's earlier cells):
  it gives only ``carried`` facts, one per (command, instance) whose newest delivery there was
  followed there by no result with its id from that instance. A slow runner answers such a
  command inside the example, under its delivery's epoch (§2.2); no other invariant sees them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .facts import UNKNOWN_FP, Fact

#: effect kind → (command kind(s) it executes, how its cause must match the command).
JOIN: dict[str, tuple[frozenset[str], str]] = {
    "ws.connected": (frozenset({"gateway.open"}), "ws"),
    "session.created": (frozenset({"gateway.rpc"}), "rpc"),
    "session.resumed": (frozenset({"gateway.rpc"}), "rpc"),
    "session.closed": (frozenset({"gateway.rpc"}), "rpc"),
    "prompt.accepted": (frozenset({"gateway.rpc"}), "rpc"),
    "prompt.queued": (frozenset({"gateway.rpc"}), "rpc"),
    "session.interrupted": (frozenset({"gateway.rpc"}), "rpc"),
    "session.steered": (frozenset({"gateway.rpc"}), "rpc"),
    "session.cwd_set": (frozenset({"gateway.rpc"}), "rpc"),
    "approval.responded": (frozenset({"gateway.rpc"}), "rpc"),
    "clarify.responded": (frozenset({"gateway.rpc"}), "rpc"),
    "attachment": (frozenset({"gateway.rpc"}), "rpc"),
    "file.read": (frozenset({"http"}), "http"),
    "http.mutation": (frozenset({"http"}), "http"),
    "bind": (frozenset({"lease.create", "lease.bind"}), "bind"),
}
CLOSE_KINDS = {"gateway.close": "connection_id", "lease.close": "lease_id"}


class SequenceClash(ValueError):
    """Two records of different logs carry one seq: the logs are not on one shared sequence."""


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"), default=str)


def _search_profile(search: Any) -> str | None:
    if not isinstance(search, str):
        return None
    from urllib.parse import parse_qs

    vals = parse_qs(search.lstrip("?")).get("profile")
    return vals[0] if vals else None


@dataclass(frozen=True)
class _Cmd:
    """What a delivered command carries for the join."""

    kind: str | None
    method: str | None
    connection_id: str | None
    lease_id: str | None
    session_id: str | None
    profile: str | None
    http_method: str | None
    path: str | None


def _command(cmd: dict[str, Any]) -> _Cmd:
    p = _dict(cmd.get("payload"))
    params = _dict(p.get("params"))
    sess = _dict(p.get("session"))
    return _Cmd(
        kind=_str(cmd.get("kind")), method=_str(p.get("method")),
        connection_id=_str(p.get("connectionId")), lease_id=_str(p.get("leaseId")),
        session_id=_str(params.get("session_id")) or _str(sess.get("runtimeId")),
        profile=_str(params.get("profile")) or _str(p.get("profile"))
        or _search_profile(p.get("search")),
        http_method=(_str(p.get("method")) or "GET").upper() if cmd.get("kind") == "http" else None,
        path=_str(p.get("path")),
    )


# -- history ------------------------------------------------------------------------------------
@dataclass
class _Fingerprints:
    """Which fingerprint a result post answers. A result names only its id: it answers one of
    the deliveries of that id not yet answered, so it is given a fingerprint only while those
    all share one (a slow runner may answer the first payload after a second one of the same id
    was delivered); with two in the open window it is ``UNKNOWN_FP`` (not judged). The
    window closes when as many results as deliveries were posted (a command twice in one poll
    batch counts once), and the next delivery opens a new one."""

    open: dict[str, int] = field(default_factory=dict)
    window: dict[str, set[str]] = field(default_factory=dict)

    def delivered(self, cid: str, fp: str) -> None:
        if not self.open.get(cid):  # every earlier delivery answered: a new window
            self.window[cid] = set()
        self.open[cid] = self.open.get(cid, 0) + 1
        self.window[cid].add(fp)

    def answered(self, cid: str | None) -> str | None:
        if cid is None or cid not in self.window:
            return None
        fps = self.window[cid]
        fp = next(iter(fps)) if len(fps) == 1 else UNKNOWN_FP
        self.open[cid] = max(0, self.open[cid] - 1)
        if self.open[cid] == 0:
            self.window[cid] = {fp} if fp != UNKNOWN_FP else set()
        return fp


def _exchange_facts(ex: Any, cmds: dict[str, _Cmd], last_fp: dict[str, str],
                    fps: _Fingerprints) -> list[Fact]:
    route, seq, seq_out = _get(ex, "route"), _get(ex, "seq"), _get(ex, "seq_out")
    status, inst, ref = _get(ex, "status"), _get(ex, "instance"), f"history#{_get(ex, 'seq')}"
    body, answer = _get(ex, "request_body"), _get(ex, "response_body")
    body = _dict(body)
    common: dict[str, Any] = {"seq_out": seq_out, "instance": inst, "raw": ref}
    out: list[Fact] = []
    if route == "poll" and status == 200 and isinstance(answer, dict):
        epoch = _str(answer.get("epoch"))
        out.append(Fact(seq, "control-plane", "poll", epoch=_get(ex, "request_epoch"),
                        reason=epoch, **common))
        if epoch:
            out.append(Fact(seq_out or seq, "control-plane", "epoch", epoch=epoch, raw=ref))
        batch: set[str] = set()
        for i, c in enumerate(x for x in answer.get("commands") or [] if isinstance(x, dict)):
            cid, cmd = _str(c.get("id")), _command(c)
            if cid is None:
                continue
            cmds[cid] = cmd
            last_fp[cid] = hashlib.sha256(_canon(c).encode()).hexdigest()
            if cid not in batch:
                fps.delivered(cid, last_fp[cid])
                batch.add(cid)
            out.append(Fact(seq, "control-plane", "deliver", command_id=cid, op=cmd.kind,
                            method=cmd.method, connection_id=cmd.connection_id,
                            lease_id=cmd.lease_id, session_id=cmd.session_id,
                            profile=cmd.profile, epoch=epoch, fingerprint=last_fp[cid],
                            **{**common, "raw": f"{ref}[{i}]"}))
        return out
    outcome = "accepted" if status == 200 else ("refused" if status is not None else None)
    reason = _get(ex, "code") or _get(ex, "fault")
    cid = _str(body.get("id"))
    info = cmds.get(cid or "")
    if route == "admit":
        allowed = isinstance(answer, dict) and answer.get("allowed") is True
        out.append(Fact(seq, "control-plane", "admit", command_id=cid,
                        outcome=("granted" if status == 200 and allowed else
                                 "refused" if status is not None else None),
                        indeterminate=status is None and not _get(ex, "fault"),
                        epoch=_get(ex, "request_epoch"), reason=reason, **common))
    elif route == "result":
        err = body.get("error")
        code = ((_str(err.get("code")) or "runner_error") if isinstance(err, dict) else
                "runner_error" if err is not None else None)
        reply = {"error": err} if err is not None else {"result": body.get("result")}
        res = _dict(body.get("result"))
        out.append(Fact(seq, "control-plane", "result", command_id=cid, outcome=outcome,
                        reason=reason, epoch=_get(ex, "request_epoch"), code=code,
                        body=_canon(reply), fingerprint=fps.answered(cid),
                        op=info.kind if info else None, method=info.method if info else None,
                        connection_id=info.connection_id if info else None,
                        lease_id=info.lease_id if info else None,
                        session_id=_str(res.get("session_id")) or (info.session_id if info else None),
                        **common))
        if info and info.kind in CLOSE_KINDS and code is None:
            key = CLOSE_KINDS[info.kind]
            out.append(Fact(seq, "control-plane", "close", command_id=cid, op=info.kind,
                            **{key: getattr(info, key)}, raw=ref))
    elif route == "event":
        frame = _dict(body.get("frame"))
        out.append(Fact(seq, "control-plane", "event", connection_id=_str(body.get("connectionId")),
                        session_id=_str(frame.get("session_id")),
                        op="closed" if body.get("closed") is True else _str(frame.get("type")) or "frame",
                        outcome=outcome, reason=reason, epoch=_get(ex, "request_epoch"), **common))
    elif route == "tool":
        out.append(Fact(seq, "control-plane", "tool", lease_id=_str(body.get("leaseId")),
                        call_id=_str(body.get("callId")), outcome=outcome, reason=reason,
                        epoch=_get(ex, "request_epoch"), **common))
    return out


# -- lifecycle log ------------------------------------------------------------------------------
def _lifecycle_fact(entry: Any) -> list[Fact]:
    kind, seq = _get(entry, "kind"), _get(entry, "seq")
    detail = _get(entry, "detail")
    detail = detail if isinstance(detail, dict) else {}
    reason = _get(entry, "reason")
    ref = f"lifecycle#{seq}"
    ids = {"connection_id": _get(entry, "connection_id"), "lease_id": _get(entry, "lease_id")}
    if kind == "queued":
        return [Fact(seq, "control-plane", "queue", command_id=_get(entry, "command_id"),
                     op=_str(detail.get("kind")), account=_str(detail.get("account")),
                     profile=_str(detail.get("profile")), raw=ref, **ids)]
    if kind == "epoch_changed":
        epoch = detail.get("epoch") or detail.get("new_epoch") or reason
        return [Fact(seq, "control-plane", "epoch", epoch=epoch, raw=ref)]
    if kind == "instance_fenced":
        inst = detail.get("instance") or reason
        return [Fact(seq, "control-plane", "fence", instance=inst, raw=ref)]
    if kind == "revoked":
        what = detail.get("what") or reason
        if what == "runner_disabled":
            return [Fact(seq, "control-plane", "disable", raw=ref)]
        profs, account = detail.get("profiles"), _str(detail.get("account"))
        allowed = frozenset(profs) if isinstance(profs, list | tuple | set | frozenset) else None
        out = [Fact(seq, "control-plane", "revoke", reason=what, raw=ref, account=account,
                    profiles=allowed, **ids)]
        # set_runner_profiles names no scope (the runner's), set_account_profiles the account
        scope = detail.get("scope") or ("account" if account else "runner")
        if what == "profiles" and allowed is not None:
            out.append(Fact(seq, "control-plane", "profiles", reason=scope, account=account,
                            profiles=allowed, raw=ref))
        return out
    return []


# -- effects ------------------------------------------------------------------------------------
Sockets = dict[str, tuple[str | None, str | None]]  # socket id → (channel id, runner instance)


def _matches(rule: str, d: Fact, info: _Cmd, cause: Any, e: Any, sockets: Sockets) -> bool:
    """Does effect ``e`` (with ``cause``) execute the command delivered by ``d``?"""
    if rule == "ws":
        return True
    if rule == "rpc":
        if d.method != _get(cause, "method"):
            return False
        sock = _get(cause, "socket_id") or _get(e, "socket_id")
        if sock is not None and (sock not in sockets or sockets[sock][0] != d.connection_id):
            return False
        esid = _get(e, "session_id")
        return not (d.session_id and esid and d.session_id != esid)
    if rule == "http":
        return (str(_get(cause, "method") or "").upper() == info.http_method
                and _get(cause, "path") == info.path)
    if rule == "bind":
        esid = _get(e, "session_id")
        return not (d.session_id and esid and d.session_id != esid)
    return False


def _effect_facts(effects: Iterable[Any], delivers: list[tuple[Fact, float, _Cmd]]) -> list[Fact]:
    sockets: Sockets = {}
    out: list[Fact] = []
    for e in sorted(effects, key=lambda x: _get(x, "seq")):
        seq, kind, cause = _get(e, "seq"), _get(e, "kind"), _get(e, "cause")
        detail = _get(e, "detail")
        detail = detail if isinstance(detail, dict) else {}
        base: dict[str, Any] = {"session_id": _get(e, "session_id"), "profile": _get(e, "profile"),
                                "op": kind, "raw": f"effects#{seq}"}
        row = JOIN.get(kind)
        if row is None or (kind == "prompt.accepted" and detail.get("queued") is True) or (
                row[1] != "ws" and _get(cause, "transport") == "ws"):
            out.append(Fact(seq, "hermes", "consequence", **base))
            continue
        kinds, rule = row
        hits = []
        for d, end, info in delivers:
            if info.kind not in kinds or not (d.at_out < seq < end):
                continue
            if _matches(rule, d, info, cause, e, sockets):
                hits.append(d)
        cids = sorted({d.command_id for d in hits if d.command_id})
        if len(cids) != 1:
            why = "no command's window and cause match" if not cids else "ambiguous: " + ",".join(cids)
            out.append(Fact(seq, "hermes", "effect", reason=why, **base))
            continue
        d0 = hits[0]
        insts = {d.instance for d in hits}
        sock = _get(cause, "socket_id") or _get(e, "socket_id")
        instance = (sockets[sock][1] if rule == "rpc" and sock in sockets
                    else next(iter(insts)) if len(insts) == 1 else None)
        if rule == "ws" and sock:
            sockets[sock] = (d0.connection_id, instance)
        out.append(Fact(seq, "hermes", "effect", command_id=cids[0], connection_id=d0.connection_id,
                        lease_id=d0.lease_id, method=d0.method, instance=instance,
                        account=d0.account,
                        **{**base, "profile": d0.profile or base["profile"]}))
    return out


def _windows(facts: list[Fact], cmds: dict[str, _Cmd]) -> list[tuple[Fact, float, _Cmd]]:
    results = [f for f in facts if f.kind == "result"]
    out = []
    for d in facts:
        if d.kind != "deliver" or d.command_id is None:
            continue
        ends = [r.seq for r in results if r.command_id == d.command_id and r.instance == d.instance
                and r.seq > d.at_out]
        out.append((d, float(min(ends)) if ends else float("inf"), cmds[d.command_id]))
    return out


def _with_accounts(facts: list[Fact]) -> list[Fact]:
    """A delivery acts for the account of the newest queueing of its id before its answer (a
    long poll is received before the command it carries is queued)."""
    queued: dict[str, list[Fact]] = {}
    for f in facts:
        if f.kind == "queue" and f.command_id:
            queued.setdefault(f.command_id, []).append(f)
    out = []
    for f in facts:
        if f.kind == "deliver" and f.command_id in queued:
            qs = [q for q in queued[f.command_id] if q.seq < f.at_out]
            if qs and qs[-1].account:
                f = dataclasses.replace(f, account=qs[-1].account)
        out.append(f)
    return out


def _dedupe_epochs(facts: list[Fact]) -> list[Fact]:
    out, last = [], None
    for f in facts:
        if f.kind == "epoch":
            if f.epoch == last or f.epoch is None:
                continue
            last = f.epoch
        out.append(f)
    return out


def _carried(before: list[Any]) -> list[Fact]:
    """The deliveries of ``before`` still open at its end (see the module rules)."""
    newest: dict[tuple[str, Any], Fact] = {}
    for ex in sorted(before, key=_causal_seq):
        route, inst, answer = _get(ex, "route"), _get(ex, "instance"), _get(ex, "response_body")
        if route == "poll" and _get(ex, "status") == 200 and isinstance(answer, dict):
            for c in (x for x in answer.get("commands") or [] if isinstance(x, dict)):
                cid = _str(c.get("id"))
                if cid is not None:
                    newest[(cid, inst)] = Fact(
                        _get(ex, "seq"), "control-plane", "carried", command_id=cid,
                        op=_str(c.get("kind")), epoch=_str(answer.get("epoch")), instance=inst,
                        seq_out=_get(ex, "seq_out"), raw=f"history#{_get(ex, 'seq')}")
        elif route == "result":
            cid = _str(_dict(_get(ex, "request_body")).get("id"))
            d = newest.get((cid or "", inst))
            if d is not None and _get(ex, "seq") > d.at_out:
                del newest[(cid or "", inst)]
    return sorted(newest.values(), key=lambda f: f.seq)


def _check_shared(groups: dict[str, list[Any]]) -> None:
    owner: dict[int, str] = {}
    for name, records in groups.items():
        for r in records:
            for s in (_get(r, "seq"), _get(r, "seq_out")):
                if s is None:
                    continue
                if owner.setdefault(s, name) != name:
                    raise SequenceClash(f"seq {s} is in both the {owner[s]} and the {name}: "
                                        "the logs are not on one shared sequence")


def _causal_seq(ex: Any) -> int:
    seq = _get(ex, "seq")
    out = _get(ex, "seq_out")
    return out if _get(ex, "route") == "poll" and isinstance(out, int) else seq


def translate(history: Iterable[Any] = (), lifecycle: Iterable[Any] = (),
              effects: Iterable[Any] = (), harness: Iterable[Fact] = (),
              before: Iterable[Any] = ()) -> list[Fact]:
    """All logs as one fact list, ordered by seq (see the module rules for the join and for
    ``before``, the history that ended before the example began)."""
    hist, life, effs, steps = list(history), list(lifecycle), list(effects), list(harness)
    old = list(before)
    _check_shared({"history": hist + old, "lifecycle log": life, "effect log": effs,
                   "harness": steps})
    cmds: dict[str, _Cmd] = {}
    last_fp: dict[str, str] = {}
    fps = _Fingerprints()
    facts: list[Fact] = []
    # a poll's deliveries exist when it is answered (a long poll is received long before): a
    # result's fingerprint is the one of the newest delivery answered before it
    for ex in sorted(hist, key=_causal_seq):
        facts += _exchange_facts(ex, cmds, last_fp, fps)
    for entry in life:
        facts += _lifecycle_fact(entry)
    facts += steps
    facts.sort(key=lambda f: f.seq)
    facts = _with_accounts(facts)
    facts += _effect_facts(effs, _windows(facts, cmds))
    facts += _carried(old)
    facts.sort(key=lambda f: f.seq)
    return _dedupe_epochs(facts)
