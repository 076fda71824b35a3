"""Hypothesis: random valid histories (a correct runner's facts) give no violation; one injected
violation is found, and its witness is minimal (dropping any witness fact silences it)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from conformance.checks import check
from conformance.checks.facts import Fact, fact
from conformance.checks.render import render
from conformance.checks.witness import is_minimal

ALLOWED = frozenset({"a", "b"})
UNCERTAIN_BODY = '{"error":{"code":"runner_command_uncertain"}}'


class Run:
    """A correct runner's recorded facts, built step by step on one shared sequence."""

    def __init__(self) -> None:
        self.seq = itertools.count(1).__next__
        self.facts: list[Fact] = []
        self.ids = itertools.count(1)
        self.gen = 1
        self.instance = "i1"
        self.epoch = "E1"
        self.channels: dict[str, list[str]] = {}  # open channel → owned sessions
        self.closed: list[str] = []
        self.done: list[tuple[str, str, str | None]] = []  # (command id, result body, code)
        self.add("profiles", reason="config", profiles=ALLOWED)
        self.add("profiles", reason="account", profiles=frozenset({"a", "b", "c"}))
        self.add("epoch", epoch=self.epoch)

    def add(self, kind: str, **kw: object) -> Fact:
        f = fact(self.seq(), kind, **kw)
        self.facts.append(f)
        return f

    def new_id(self) -> str:
        return f"c{next(self.ids)}"

    def _ctx(self) -> dict[str, object]:
        return {"instance": self.instance, "epoch": self.epoch}

    def command(self, *, channel: str | None = None, method: str | None = None,
                profile: str = "a", body: str | None = None, session: str | None = None,
                effect: bool = True, refused: bool = False) -> str:
        cid = self.new_id()
        self.add("deliver", command_id=cid, connection_id=channel, method=method, **self._ctx())
        self.add("admit", command_id=cid, outcome="refused" if refused else "granted", **self._ctx())
        if effect and not refused:
            self.add("effect", command_id=cid, connection_id=channel, method=method,
                     profile=profile, instance=self.instance)
        body = body or (f'{{"error":{{"code":"runner_command_not_admitted","n":"{cid}"}}}}'
                        if refused else f'{{"result":"{cid}"}}')
        self.add("result", command_id=cid, connection_id=channel, method=method, body=body,
                 session_id=session, outcome="accepted",
                 code="runner_command_not_admitted" if refused else None, **self._ctx())
        self.done.append((cid, body, "runner_command_not_admitted" if refused else None))
        return cid

    # steps ------------------------------------------------------------------------------------
    def http(self) -> None:
        self.command(profile="b")

    def refused(self) -> None:
        self.command(refused=True)

    def open(self) -> None:
        ch = f"ch{next(self.ids)}"
        self.command(channel=ch, method=None)
        self.channels[ch] = []

    def create(self) -> None:
        if not self.channels:
            return self.open()
        ch = sorted(self.channels)[-1]
        sid = f"s{next(self.ids)}"
        self.command(channel=ch, method="session.create", session=sid)
        self.channels[ch].append(sid)
        self.add("event", connection_id=ch, session_id=sid, op="message.delta",
                 outcome="accepted", **self._ctx())

    def prompt(self) -> None:
        owned = [(ch, s) for ch, ss in sorted(self.channels.items()) for s in ss]
        if not owned:
            return self.create()
        ch, sid = owned[0]
        self.command(channel=ch, method="prompt.submit")
        self.add("event", connection_id=ch, session_id=sid, op="message.complete",
                 outcome="accepted", **self._ctx())

    def close(self) -> None:
        if not self.channels:
            return self.open()
        ch = sorted(self.channels)[0]
        self.command(channel=ch, method=None, effect=False)
        self.add("close", connection_id=ch)
        del self.channels[ch]
        self.closed.append(ch)

    def replay(self) -> None:
        if not self.done:
            return self.http()
        cid, body, code = self.done[0]
        self.add("deliver", command_id=cid, **self._ctx())
        self.add("result", command_id=cid, body=body, code=code, outcome="accepted", **self._ctx())

    def restart(self) -> None:
        """Kill -9 mid-command (maybe inside Hermes), restart, redeliver: answered uncertain."""
        cid = self.new_id()
        self.add("deliver", command_id=cid, **self._ctx())
        self.add("admit", command_id=cid, outcome="granted", **self._ctx())
        self.add("effect", command_id=cid, indeterminate=True, instance=self.instance)
        self.add("kill", instance=self.instance, command_id=cid, reason="during_hermes")
        self.gen += 1
        self.instance, self.epoch = f"i{self.gen}", f"E{self.gen}"
        self.add("start", instance=self.instance)
        self.add("fence", instance=f"i{self.gen - 1}")
        self.add("epoch", epoch=self.epoch)
        self.closed += list(self.channels)
        self.channels = {}
        self.add("deliver", command_id=cid, **self._ctx())
        self.add("result", command_id=cid, body=UNCERTAIN_BODY, code="runner_command_uncertain",
                 outcome="accepted", **self._ctx())
        self.done.append((cid, UNCERTAIN_BODY, "runner_command_uncertain"))

    def held_revoke(self) -> None:
        """A prompt held at a Hermes pause point while its channel is revoked: lands late, fine."""
        owned = [(ch, ss[0]) for ch, ss in sorted(self.channels.items()) if ss]
        if not owned:
            return self.create()
        ch, sid = owned[0]
        cid = self.new_id()
        self.add("deliver", command_id=cid, connection_id=ch, method="prompt.submit", **self._ctx())
        self.add("admit", command_id=cid, outcome="granted", **self._ctx())
        self.add("held", command_id=cid, session_id=sid)
        self.add("revoke", connection_id=ch, reason="channel")
        self.add("effect", command_id=cid, connection_id=ch, method="prompt.submit", profile="a",
                 session_id=sid, instance=self.instance)
        self.add("result", command_id=cid, connection_id=ch, body=f'{{"result":"{cid}"}}',
                 outcome="accepted", **self._ctx())
        self.done.append((cid, f'{{"result":"{cid}"}}', None))
        del self.channels[ch]
        self.closed.append(ch)

    def stop_after_revoke(self) -> None:
        """session.interrupt on a channel whose account authorization changed: allowed."""
        owned = [(ch, ss[0]) for ch, ss in sorted(self.channels.items()) if ss]
        if not owned:
            return self.create()
        ch, _ = owned[0]
        cid = self.new_id()
        self.add("deliver", command_id=cid, connection_id=ch, method="session.interrupt",
                 **self._ctx())
        self.add("admit", command_id=cid, outcome="granted", **self._ctx())
        self.add("revoke", reason="account_authorization")
        self.add("effect", command_id=cid, connection_id=ch, method="session.interrupt",
                 profile="a", instance=self.instance)

    def revoke(self) -> None:
        if not self.channels:
            return self.open()
        ch = sorted(self.channels)[-1]
        self.add("revoke", connection_id=ch, reason="channel")
        del self.channels[ch]
        self.closed.append(ch)


STEPS = ["http", "refused", "open", "create", "prompt", "close", "replay", "restart", "revoke",
         "held_revoke", "stop_after_revoke"]


# injections: each appends one violation of one invariant ---------------------------------------
def inj1(run: Run) -> None:
    cid = run.command()
    run.add("effect", command_id=cid, instance=run.instance, profile="a")


def inj2(run: Run) -> None:
    cid = run.new_id()
    run.add("deliver", command_id=cid, **run._ctx())
    run.add("effect", command_id=cid, instance=run.instance, profile="a")


def inj3(run: Run) -> None:
    ch = f"ch{next(run.ids)}"
    cid = run.new_id()
    run.add("deliver", command_id=cid, connection_id=ch, method="prompt.submit", **run._ctx())
    run.add("admit", command_id=cid, outcome="granted", **run._ctx())
    run.add("revoke", connection_id=ch, reason="channel")
    run.add("effect", command_id=cid, connection_id=ch, method="prompt.submit", profile="a")


def inj4(run: Run) -> None:
    run.open()
    run.create()
    sid = next(s for ss in run.channels.values() for s in ss)
    run.add("event", connection_id="ch-foreign", session_id=sid, op="message.delta",
            outcome="accepted", **run._ctx())


def inj5(run: Run) -> None:
    run.add("result", command_id=run.new_id(), body="{}", outcome="accepted",
            instance=run.instance, epoch="E-stale")


def inj6(run: Run) -> None:
    done = [cid for cid, _, code in run.done if code != "runner_command_uncertain"]
    cid = done[0] if done else run.command()
    run.add("deliver", command_id=cid, **run._ctx())
    run.add("result", command_id=cid, body='{"result":"other"}', outcome="accepted", **run._ctx())


def inj7(run: Run) -> None:
    cid = run.new_id()
    run.add("deliver", command_id=cid, **run._ctx())
    run.add("admit", command_id=cid, outcome="granted", **run._ctx())
    run.add("kill", instance=run.instance, command_id=cid, reason="admit_held")
    run.gen += 1
    run.instance, run.epoch = f"i{run.gen}", f"E{run.gen}"
    run.add("start", instance=run.instance)
    run.add("epoch", epoch=run.epoch)
    run.add("deliver", command_id=cid, **run._ctx())
    run.add("result", command_id=cid, body='{"result":"ran"}', outcome="accepted", **run._ctx())


def inj8(run: Run) -> None:
    run.open()
    run.close()
    run.add("event", connection_id=run.closed[-1], session_id="s-late", op="message.delta",
            outcome="refused", **run._ctx())


def inj9(run: Run) -> None:
    run.command(profile="c")


INJECT: dict[str, Callable[[Run], None]] = {
    "INV-1": inj1, "INV-2": inj2, "INV-3": inj3, "INV-4": inj4, "INV-5": inj5,
    "INV-6": inj6, "INV-7": inj7, "INV-8": inj8, "INV-9": inj9,
}

histories = st.lists(st.sampled_from(STEPS), max_size=20)


def build(steps: list[str]) -> Run:
    run = Run()
    for s in steps:
        getattr(run, s)()
    return run


@given(histories)
def test_valid_histories_have_no_violation(steps: list[str]) -> None:
    report = check(build(steps).facts)
    assert report.violations == [], "\n".join(render(v) for v in report.violations)


@given(histories, st.sampled_from(sorted(INJECT)), histories)
def test_an_injected_violation_is_found_with_a_minimal_witness(
        before: list[str], inv_id: str, after: list[str]) -> None:
    run = build(before)
    INJECT[inv_id](run)
    for s in after:
        getattr(run, s)()
    report = check(run.facts)
    found = [v for v in report.violations if v.invariant_id == inv_id]
    assert found, f"{inv_id} not found; steps {before} / {after}"
    v = found[0]
    assert is_minimal(v), render(v)
    # the witness is made of recorded facts, and names them by their seqs
    assert set(v.witness) <= set(run.facts)
