"""Catalogue rows of the config process cases (tests: conformance/cases/
test_config_process_startup.py, _state.py and _stop.py)."""

from __future__ import annotations

from ..case_row import Case

F = "config and process"

ROWS: tuple[Case, ...] = (
    Case("CFG-001", "MUST", "A runner.json of mode 0600 connects and SIGTERM MUST end the runner "
         "with exit code 0 and no token in its output; a file of mode 0644 MUST be refused with a "
         "non-zero exit code and a message naming chmod 600, without any request.", "1.3", F,
         upstream="runner.test.ts#21"),
    Case("CFG-002", "MUST", "Each of nine invalid files (HTTP remote, userinfo, path, non-loopback "
         "Hermes, relative root, ../default profile, protocol 2, extra key, incomplete "
         "hermesCredentials) MUST end the runner with exit code 1, without a request and without "
         "echoing a value of the file.", "1.2", F, upstream="runnerConfig.test.ts#1"),
    Case("CFG-003", "MUST", "An http serverURL on a host that is not a literal loopback host, with "
         "allowInsecureLan: true and hermesCredentials, MUST be accepted and connect.", "1.2", F,
         upstream="runnerConfig.test.ts#2"),
    Case("CFG-004", "MUST", "An http serverURL on a host that is not a literal loopback host, "
         "without allowInsecureLan, MUST be refused at startup (exit 1, no request).", "1.2", F),
    Case("CFG-005", "MUST", "A relative computers path MUST be refused at startup; absolute paths "
         "MUST be accepted.", "1.1", F, upstream="runnerConfig.test.ts#4"),
    Case("CFG-006", "MUST", "satellite: true MUST be refused at startup (exit 1, no request).",
         "1.2", F, upstream="runnerConfig.test.ts#5"),
    Case("CFG-007", "MUST", "A hermesURL on the host localhost MUST be refused at startup "
         "(exit 1, no request).", "1.2", F),
    Case("CFG-008", "MUST", "A second process on the same state directory MUST exit with code 1 "
         "without a request, and the first MUST keep working.", "1.4", F),
    Case("CFG-009", "MUST", "The runner MUST keep its state in <dirname(runner.json)>/state/"
         "<runnerId>/.", "1.4", F),
    Case("CFG-010", "MUST", "On SIGTERM with a running session the runner MUST send "
         "session.interrupt to it and exit with code 0.", "1.5", F),
    Case("CFG-011", "SHOULD", "On SIGTERM the runner SHOULD let the result post of a command "
         "already executing finish before it exits with code 0.", "1.5", F),
    Case("CFG-012", "MUST", "runner_unauthorized on the first poll (a wrong token) MUST end the "
         "runner with exit code 1, without polling again.", "1.5", F),
    Case("CFG-013", "SHOULD", "The runner SHOULD create the state directory with mode 0700.",
         "1.4", F),
    Case("CFG-014", "SHOULD", "After a graceful stop the runner SHOULD print one line "
         "\"stopped\" on stderr and nothing on stdout.", "1.5", F),
)
ROWS += (
    Case("CFG-015", "MUST", "A hermesCredentials username over 256 chars or password over 4096 "
         "chars MUST be refused at startup (exit 1, no request, no echo).", "1.1", F),
    Case("CFG-016", "MUST", "A runner.json that is not JSON MUST end the runner with exit code 1, "
         "without a request.", "1.3", F),
    Case("CFG-017", "SHOULD", "service-instance.json SHOULD name the process's x-runner-instance "
         "as instanceId, and SHOULD be deleted at a clean exit.", "1.4", F),
    Case("CFG-018", "MUST", "During a graceful stop the runner MUST dispose every lease, including "
         "its plugin unbind.", "1.5", F, "team-tools"),
    Case("CFG-019", "MUST", "During a graceful stop the runner MUST close every gateway channel "
         "(its Hermes WebSocket closes).", "1.5", F),
    # 9NN: sentences of docs/protocol.md that no case tested until the spec-coverage sweep
    # (each tagged with its case there; docs/spec-coverage-gaps.txt lists those still open).
    Case("CFG-902", "MUST", "Without --config the runner MUST exit with code 1.", "1.5", F),
    Case("CFG-903", "SHOULD", "The runner SHOULD create every file in its state directory with "
         "mode 0600 (the ledger and its journal files included).", "1.4", F),
    Case("CFG-904", "MUST", "On the first SIGINT the runner MUST stop polling: no poll request "
         "reaches the control plane after the signal.", "1.5", F),
    Case("CFG-905", "MUST", "During a graceful stop the runner MUST NOT start executing a "
         "command it had not started: a command whose admit is granted after the SIGTERM causes "
         "no Hermes effect.", "1.5", F),
    Case("CFG-906", "SHOULD", "Each status line on stderr SHOULD have the form "
         "'<ISO-8601 time> <text>'.", "1.5", F),
)
