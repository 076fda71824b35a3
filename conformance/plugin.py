"""The pytest plugin: the one engine behind ``pytest --pyargs conformance`` and ``certify``.

Registered with the ``pytest11`` entry point (``conformance.plugin``), so after ``pip install``
any repository can run ``pytest --pyargs conformance --runner-cmd "CMD --config {config}"``.

Rules of this module:
- A case is a test marked ``@case("GEN-003", **world_options)``; its row comes from the
  catalogue (``--conformance-catalogue MODULE:ATTR``, default ``conformance.catalogue:CATALOGUE``).
  Ordinary tests are left alone: the plugin only acts on case items.
- Selection happens at collection: ``--conformance-profile`` keeps the cases whose feature the
  profile certifies, ``--conformance-cases`` keeps the IDs matching a pattern; the rest are
  deselected. A case whose feature the runner does not advertise ends *not-applicable*.
- ``--conformance-shard K/N`` then keeps shard K's share of that selection (conformance/shards.py,
  the same split on every worker and machine) and deselects the rest; the share and the whole
  selection's fingerprint go into ``results.json`` ``shard`` (a worker sends its own to the
  controller in ``workeroutput``).
- Verdicts are computed per phase on the process that ran the case (an xdist worker or this
  one), redacted with the world's secrets, and carried to the controller on the teardown
  report (``report.conformance``); the controller collects them into ``results.json``.
- A case's transcript is data (JSON objects, redacted recursively); a passing case keeps only
  its digest unless ``--conformance-transcripts all`` (:mod:`conformance.transcripts`).
- Baselined cases: a failure becomes ``expected-fail`` (shown as xfail); a pass becomes
  ``stale`` and fails at teardown. ``--conformance-exitfirst`` stops at the first failing MUST.
- The ``world`` fixture imports the world factory lazily (``--conformance-world MODULE:ATTR``,
  default ``conformance.worlds:open_world``) and never imports the runner under test.
"""

from __future__ import annotations

import hashlib
import shlex
from collections import Counter
from collections.abc import Generator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from . import bounds, casefixtures, environment, hypothesis_profiles, shards
from .baseline import BaselineError
from .baseline import load as load_baseline
from .catalogue import PROFILES, Case, Catalogue, case_patterns, matches
from .causes import cause_lines
from .judge import STATE, CaseState, judge_phase, load_object, merge, require_row
from .junit import rewrite as rewrite_junit
from .kept_worlds import KEEPABLE_WORLD, keeps_worlds, shares_world, world_key
from .lanes import WORKER_LANES, Lanes, on_lane, take_bound
from .marks import ANY_HERMES, LONG, MARK, case_mark, is_long, runs_on_any_hermes
from .reference_cmd import REFERENCE_RUNNER_CMD
from .results import CaseResult, RunResults, combine, dump, redact, redact_data, verdict_line
from .run_order import case_order, lane_order
from .shards import ShardError
from .transcripts import DEFAULT as TRANSCRIPTS
from .transcripts import POLICIES
from .transcripts import keep as keep_transcript
from .verdict import NOT_RUN

DEFAULT_CATALOGUE = "conformance.catalogue:CATALOGUE"
DEFAULT_WORLD = KEEPABLE_WORLD  # conformance.worlds:open_world
HARNESS_VERSION = "0.1.0"


def harness_version() -> str:
    try:
        from importlib.metadata import version

        return version("hermes-runner-conformance")
    except Exception:  # noqa: BLE001 - not installed: a source checkout
        return HARNESS_VERSION


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("conformance", "Hermes Runner protocol 1 conformance")
    g.addoption("--runner-cmd", default=None, help="runner command template with {config}")
    g.addoption("--hermes", default="scripted", help="scripted | real[:PATH] (default scripted)")
    g.addoption("--conformance-profile", default="all", choices=sorted(PROFILES),
                help="features to certify (default all)")
    g.addoption("--conformance-cases", default=None, metavar="PATTERN",
                help="comma list of case ID patterns, e.g. 'GEN-*,DED-001'")
    g.addoption("--conformance-baseline", default=None, metavar="FILE",
                help="expected failures, one case ID a line")
    g.addoption("--conformance-out", default=None, metavar="DIR", help="write results.json here")
    g.addoption("--conformance-seed", default=None, type=int, metavar="N", help="run seed")
    g.addoption("--conformance-example-db", action="append", default=[], metavar="SPEC",
                help="Hypothesis example database of the property machines: DIR, "
                     "github:OWNER/REPO[/ARTIFACT] (read-only) or readonly:DIR; repeat to join "
                     "several (default: <--conformance-out>/hypothesis)")
    g.addoption("--conformance-soak", action="store_true",
                help="a soak round (certify --soak): the fault matrix runs its cells in an order "
                     "drawn from the case seed")
    g.addoption("--conformance-exitfirst", action="store_true",
                help="stop at the first failing MUST case")
    g.addoption("--conformance-catalogue", default=None, metavar="MODULE:ATTR")
    g.addoption("--conformance-world", default=None, metavar="MODULE:ATTR")
    g.addoption("--conformance-fresh-worlds", action="store_true",
                help="a fresh world (runner start-up) for every case; by default consecutive "
                     "plain cases share an idle one (conformance/kept_worlds.py)")
    g.addoption("--conformance-lanes", default=None, type=int, metavar="N",
                help="cases in flight in this process at once (default: 2 in an xdist worker, "
                     "which is also the most a worker can use; 1, one after the other, in a "
                     "plain session) (conformance/lanes.py)")
    g.addoption("--conformance-transcripts", default=TRANSCRIPTS, choices=sorted(POLICIES),
                help="which cases keep their transcript whole in results.json: failing "
                     "(default: every case that did not pass), all, or none; the others keep "
                     "a digest (conformance/transcripts.py)")
    g.addoption("--runner-file", action="append", default=[], metavar="PATH",
                help="runner file to fingerprint on the certificate (repeatable)")
    g.addoption("--timeout-multiplier", default=None, metavar="X",
                help="scale every bound of the harness by X (also $" + bounds.ENV + ")")
    g.addoption("--conformance-skip-unavailable", action="store_true",
                help="report the cases whose program is not installed as not-run "
                     "(conformance/environment.py) instead of running them")
    g.addoption("--conformance-shard", default=None, metavar="K/N",
                help="run shard K of N: a deterministic share of the selected cases, balanced "
                     "by recorded durations (conformance/shards.py)")
    g.addoption("--conformance-durations", default=None, metavar="FILE",
                help="the durations file a --conformance-shard split balances by (default: "
                     "the shipped conformance/durations.json)")
    parser.addini("conformance_catalogue", "catalogue as MODULE:ATTR", default=DEFAULT_CATALOGUE)
    parser.addini("conformance_world", "world factory as MODULE:ATTR", default=DEFAULT_WORLD)


def load_catalogue(spec: str) -> Catalogue:
    """The catalogue ``MODULE:ATTR`` names (TypeError when it is not one)."""
    found = load_object(spec)
    if not isinstance(found, Catalogue):
        raise TypeError(f"{spec} is not a Catalogue")
    return found


class Conformance:
    """Per-session state (registered as the ``conformance-session`` plugin)."""

    def __init__(self, config: pytest.Config) -> None:
        opt = config.option
        self.config = config
        spec = opt.conformance_catalogue or config.getini("conformance_catalogue")
        try:
            self.catalogue: Catalogue = load_catalogue(spec)
        except TypeError as exc:
            raise pytest.UsageError(f"--conformance-catalogue {exc}") from None
        self.world_spec: str = opt.conformance_world or config.getini("conformance_world")
        self.runner_cmd: str = opt.runner_cmd or REFERENCE_RUNNER_CMD
        self.profile: str = opt.conformance_profile
        self.patterns = case_patterns(opt.conformance_cases)
        self.baseline_path: str | None = opt.conformance_baseline
        try:
            self.baseline = load_baseline(self.baseline_path) if self.baseline_path else frozenset()
        except BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
        workerinput = getattr(config, "workerinput", None)
        if workerinput is not None and "conformance_seed" in workerinput:
            self.seed: int = int(workerinput["conformance_seed"])
        elif opt.conformance_seed is not None:
            self.seed = opt.conformance_seed
        else:
            self.seed = hypothesis_profiles.fresh_seed()
        self.out = Path(opt.conformance_out) if opt.conformance_out else None
        self.example_db: list[str] = list(opt.conformance_example_db)
        self.hermes: str = str(opt.hermes)
        #: why a case cannot run on this Hermes (None: it can), see :meth:`hermes_skip`
        self.real_hermes_missing: str | None = None
        if self.hermes != "scripted":
            if not (self.hermes == "real" or self.hermes.startswith("real:")):
                raise pytest.UsageError(f"--hermes must be scripted or real[:PATH], not {self.hermes!r}")
            from .real_world import resolve_hermes

            found, reason = resolve_hermes(self.hermes)
            self.real_hermes_missing = None if found is not None else reason
        self.records: list[CaseResult] = []
        self.started = datetime.now(UTC)
        self.is_controller = workerinput is None
        try:
            self.shard = shards.parse(opt.conformance_shard) if opt.conformance_shard else None
            self.durations = self._durations(opt.conformance_durations) if self.shard else None
        except ShardError as exc:
            raise pytest.UsageError(str(exc)) from None
        #: what this shard ran, for results.json: set at collection (a worker sends its own)
        self.shard_record: dict[str, Any] | None = None
        if opt.conformance_lanes is not None and opt.conformance_lanes < 1:
            raise pytest.UsageError(f"--conformance-lanes must be 1 or more, not {opt.conformance_lanes}")
        #: cases in flight in this process (conformance/lanes.py)
        self.width: int = (opt.conformance_lanes if opt.conformance_lanes is not None
                           else WORKER_LANES if workerinput is not None else 1)
        self.lanes: Lanes | None = None

    def _durations(self, path: str | None) -> tuple[dict[str, float], str]:
        """The durations of the run's profile and the sha256 of the file they came from."""
        try:
            text = Path(path or Path(__file__).with_name(shards.DURATIONS)).read_text(encoding="utf-8")
        except OSError as exc:
            raise ShardError(f"cannot read durations {path}: "
                             f"{exc.strerror or type(exc).__name__}") from None
        profiles = shards.read_durations(text, path or shards.DURATIONS)
        return (shards.for_profile(profiles, self.profile),
                hashlib.sha256(text.encode()).hexdigest())

    def case_seed(self, nodeid: str) -> int:
        return hypothesis_profiles.case_seed(self.seed, nodeid)

    def replay(self, case_id: str) -> str:
        hermes = "" if self.hermes == "scripted" else f" --hermes {shlex.quote(self.hermes)}"
        dbs = "".join(f" --example-db {shlex.quote(d)}" for d in self.example_db)
        return (f"python -m conformance certify --runner-cmd {shlex.quote(self.runner_cmd)} "
                f"--profile {self.profile} --cases {case_id} --seed {self.seed}{dbs}{hermes}")

    def selected(self, row: Case | None, case_id: str) -> bool:
        if not matches(case_id, self.patterns):
            return False
        return row is None or row.feature in PROFILES[self.profile]

    def hermes_skip(self, item: pytest.Item) -> str | None:
        """Under ``--hermes real[:PATH]`` only ``@any_hermes`` cases run, and only when that
        Hermes is installed; the reason a case cannot run, else None."""
        if self.hermes == "scripted":
            return None
        if not runs_on_any_hermes(item):
            return "needs the scripted Hermes (pause points / effect log)"
        return self.real_hermes_missing

    # -- hooks -------------------------------------------------------------------------------
    def pytest_report_header(self) -> str:
        shard = f", shard {self.shard}" if self.shard else ""
        return (f"conformance: profile {self.profile}{shard}, {len(self.catalogue)} catalogued "
                f"cases, seed {self.seed} (replay with --conformance-seed {self.seed})")

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["conformance_seed"] = self.seed

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        for item in items:
            if case_mark(item) is not None and "world" in getattr(item, "fixturenames", ()):
                # The world fixture runs on the worker's session loop (a kept world outlives
                # its case), so the case does too. Only cases: another test's own ``world``
                # fixture (tests/runner_ref has one) keeps its function loop.
                item.add_marker(pytest.mark.asyncio(loop_scope="session"), append=False)
        keep: list[pytest.Item] = []
        dropped: list[pytest.Item] = []
        for item in items:
            bound = case_mark(item)
            if bound is None:
                keep.append(item)
                continue
            case_id, options = bound
            row = self.catalogue.get(case_id)
            if not self.selected(row, case_id):
                dropped.append(item)
                continue
            skip = self.hermes_skip(item)
            if skip is not None:
                item.add_marker(pytest.mark.skip(reason=f"not-applicable: {skip}"))
            elif row is not None and (absent := self.unavailable(row)):
                item.add_marker(pytest.mark.skip(reason=f"{NOT_RUN}: {absent}"))
            self._scale_timeout(item)
            item.stash[STATE] = CaseState(case_id, row, options, case_id in self.baseline,
                                          self.case_seed(item.nodeid))
            props = [("case_id", case_id)]
            if row is not None:
                props += [("level", row.level), ("family", row.family), ("feature", row.feature),
                          ("section", row.section)]
            item.user_properties.extend(props)
            keep.append(item)
        if self.shard is not None:
            keep, elsewhere = self._take_share(keep)
            dropped += elsewhere
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        if self.width > 1:
            for item in keep:
                take_bound(item)
        keeping = keeps_worlds(fresh_worlds=config.getoption("conformance_fresh_worlds", False),
                               spec=self.world_spec, hermes_mode=self.hermes)
        workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
        key = self.share_key if keeping else (lambda item: None)
        # only the cases move, among the places cases had: other tests keep their order
        at = [i for i, it in enumerate(keep) if STATE in it.stash]
        cases = [keep[i] for i in at]
        if workers == 1 and self.width > 1:  # one process, its cases on lanes
            order = lane_order(cases, key, self.width, self._item_costs(cases).get, long=is_long)
        else:
            order = case_order(cases, key, workers, long=is_long)
        for i, it in zip(at, order, strict=True):
            keep[i] = it
        items[:] = keep

    def _item_costs(self, cases: list[pytest.Item]) -> dict[pytest.Item, float]:
        """Each case item's recorded duration (its case's, shared by the case's items); an
        item whose case the durations file does not know is left out."""
        try:
            durations = (self.durations
                         or self._durations(self.config.option.conformance_durations))[0]
        except ShardError as exc:
            raise pytest.UsageError(str(exc)) from None
        per_case = Counter(it.stash[STATE].case_id for it in cases)
        return {it: durations[cid] / per_case[cid] for it in cases
                if (cid := it.stash[STATE].case_id) in durations}

    def _take_share(self, items: list[pytest.Item]) -> tuple[list[pytest.Item], list[pytest.Item]]:
        """(this shard's items, the others'): the cases of ``items`` split by
        :func:`conformance.shards.split`, each case ID under its world key (None when it never
        shares a world, is a long case — dealt alone, longest first — or its items disagree)."""
        assert self.shard is not None and self.durations is not None
        keys: dict[str, str | None] = {}
        for item in items:
            state = item.stash.get(STATE, None)
            if state is not None:
                key = None if is_long(item) else self.share_key(item)
                keys[state.case_id] = key if keys.get(state.case_id, key) == key else None
        mine = set(shards.split(keys, self.durations[0], self.shard.total)[self.shard.index - 1])
        self.shard_record = {"index": self.shard.index, "total": self.shard.total,
                             "cases": sorted(mine), "selection": shards.fingerprint(keys),
                             "durations_sha256": self.durations[1]}
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput["conformance_shard"] = self.shard_record
        ours = [it for it in items if STATE not in it.stash or it.stash[STATE].case_id in mine]
        return ours, [it for it in items if STATE in it.stash and it.stash[STATE].case_id not in mine]

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        record = getattr(node, "workeroutput", {}).get("conformance_shard")
        if record is not None:
            self.shard_record = record

    def unavailable(self, row: Case) -> str | None:
        """Under ``--conformance-skip-unavailable``: why ``row`` cannot run here, else None."""
        if not self.config.getoption("conformance_skip_unavailable", False):
            return None
        absent = environment.missing([row])
        if not absent:
            return None
        return "; ".join(f"{name} is not installed (Debian package "
                         f"'{environment.PROGRAMS[name].package}')" for name in sorted(absent))

    def _scale_timeout(self, item: pytest.Item) -> None:
        """pytest-timeout's per-case bound, times the run's multiplier."""
        factor = bounds.multiplier()
        if factor == 1.0 or not self.config.pluginmanager.hasplugin("timeout"):
            return
        mark = item.get_closest_marker("timeout")
        base: Any = None
        if mark is not None:
            base = mark.args[0] if mark.args else mark.kwargs.get("timeout")
        if base is None:
            try:
                base = self.config.getoption("timeout", None) or self.config.getini("timeout")
            except (ValueError, KeyError):
                return
        try:
            seconds = float(base)
        except (TypeError, ValueError):
            return
        if seconds > 0:
            # first, so it is the closest even beside a case's own @pytest.mark.timeout
            item.add_marker(pytest.mark.timeout(seconds * factor), append=False)

    def share_key(self, item: pytest.Item) -> str | None:
        """The key of the kept worlds ``item`` may borrow (None: it never shares one)."""
        state = item.stash.get(STATE, None)
        if state is None or not shares_world(state.options):
            return None
        return world_key(self.runner_cmd, str(self.config.option.hermes), self.world_spec,
                         state.options)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        """A case on a lane (``--conformance-lanes N`` above 1: :mod:`conformance.lanes`)."""
        if self.width <= 1 or not on_lane(item):
            return None
        if self.lanes is None:
            order = None if hasattr(self.config, "workerinput") else item.session.items
            self.lanes = Lanes(self.config, self.width, order)
        self.lanes.protocol(item, nextitem)
        return True

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        state = item.stash.get(STATE, None)
        if state is not None:
            environment.take_uses()  # what this case uses is counted from here
            require_row(state, item.nodeid)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        rep = yield
        state = item.stash.get(STATE, None)
        if state is None:
            return rep
        judge_phase(state, rep, call)
        if rep.when == "teardown":
            self._finish(item, state, rep)
        return rep

    def _finish(self, item: pytest.Item, state: CaseState, rep: pytest.TestReport) -> None:
        if state.baselined and set(state.phases) <= {"pass"}:
            rep.outcome = "failed"
            rep.longrepr = (f"[stale] {state.case_id} is in the baseline but passes now: "
                            "remove it from the baseline")
            state.phases.append("stale")
            state.detail = str(rep.longrepr)
        used = environment.take_uses() if state.uses is None else state.uses
        undeclared = used - set(state.row.needs if state.row else ())
        if undeclared:
            state.phases.append("error")
            state.detail = (f"harness: the case used {', '.join(sorted(undeclared))} but its "
                            f"catalogue row does not declare needs={tuple(sorted(undeclared))!r} "
                            "(conformance/environment.py)\n" + state.detail)
        status = combine(state.phases)
        rep.user_properties.append(("status", status))
        row = state.row
        secrets = state.secrets()
        transcript, digest = keep_transcript(
            str(self.config.option.conformance_transcripts), status,
            redact_data(state.transcript, secrets))
        r = CaseResult(
            id=state.case_id, level=row.level if row else "MUST",
            family=row.family if row else "unknown", feature=row.feature if row else "core",
            section=row.section if row else "", requirement=row.requirement if row else "",
            upstream=row.upstream if row else None, status=status, nodeid=item.nodeid,
            expected=redact(state.expected, secrets), actual=redact(state.actual, secrets),
            witness=[redact(w, secrets) for w in state.witness],
            transcript=transcript, transcript_digest=digest,
            detail=redact(state.detail, secrets), seed=state.seed,
            duration=round(state.duration, 6), replay=self.replay(state.case_id),
            data=state.data)
        rep.conformance = r.__dict__.copy()  # type: ignore[attr-defined]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "conformance", None)
        if report.when != "teardown" or not isinstance(data, dict):
            return
        record = CaseResult(**data)
        self.records.append(record)
        if (self.config.option.conformance_exitfirst and record.status == "fail"
                and record.level == "MUST"):
            reason = f"first failing MUST: {record.id}"
            session = getattr(self.config, "_conformance_session", None)
            if session is not None:
                session.shouldstop = reason
            dsession = self.config.pluginmanager.getplugin("dsession")
            if dsession is not None:
                dsession.shouldstop = reason

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.config._conformance_session = session  # type: ignore[attr-defined]

    def results(self) -> RunResults:
        return RunResults(
            runner_cmd=self.runner_cmd, profile=self.profile, harness_version=harness_version(),
            started=self.started.isoformat(timespec="seconds"), seed=self.seed,
            duration=round((datetime.now(UTC) - self.started).total_seconds(), 3),
            hermes=self.config.option.hermes, baseline=self.baseline_path,
            cases=merge(self.records), shard=self.shard_record)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.lanes is not None:
            self.lanes.close()  # cases still in flight (after a stop) are cancelled
        if self.is_controller and self.out is not None:
            dump(self.results(), self.out / "results.json")
        xml = getattr(self.config.option, "xmlpath", None)
        if self.is_controller and xml:
            rewrite_junit(Path(xml))  # after pytest's junitxml wrote it (trylast)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.is_controller or not self.records:
            return
        res = RunResults(runner_cmd=self.runner_cmd, profile=self.profile, harness_version="",
                         started="", seed=self.seed, cases=merge(self.records))
        tr = terminalreporter
        tr.write_sep("=", "conformance")
        (mp, mt), (sp, st) = res.level_figures("MUST"), res.level_figures("SHOULD")
        counts = ", ".join(f"{n} {s}" for s, n in res.counts().items() if n)
        tr.write_line(f"{verdict_line(res)}  MUST {mp}/{mt}  SHOULD {sp}/{st}  ({counts})  "
                      f"seed {self.seed}")
        for line in cause_lines(res.cases):
            tr.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARK}(case_id, **world_options): a conformance case")
    config.addinivalue_line("markers", f"{ANY_HERMES}: a case that also runs on a real Hermes")
    config.addinivalue_line("markers", f"{LONG}: a long case, started first under xdist")
    if config.option.timeout_multiplier is not None:
        try:
            bounds.set_multiplier(bounds.parse(str(config.option.timeout_multiplier)))
        except bounds.MultiplierError as exc:
            raise pytest.UsageError(str(exc)) from None
    plugin = Conformance(config)
    config.pluginmanager.register(plugin, "conformance-session")
    if not config.pluginmanager.has_plugin("conformance.casefixtures"):
        config.pluginmanager.register(casefixtures, "conformance.casefixtures")
    _use_database(config, plugin)


def _use_database(config: pytest.Config, plugin: Conformance) -> None:
    """The machines' example database: ``--conformance-example-db``, else the run's out dir
    (``<out>/hypothesis``), else none (conformance/hypothesis_profiles.py); unset at the end."""
    try:
        if plugin.example_db:
            db = hypothesis_profiles.open_database(plugin.example_db)
        elif plugin.out is not None:
            db = hypothesis_profiles.open_database([str(plugin.out / "hypothesis")])
        else:
            db = None
    except hypothesis_profiles.DatabaseSpecError as exc:
        raise pytest.UsageError(str(exc)) from None
    hypothesis_profiles.use_database(db)
    config.add_cleanup(lambda: hypothesis_profiles.use_database(None))
