"""Catalogue rows of the permission cases (tests: conformance/cases/test_permission.py)."""

from __future__ import annotations

from ..case_row import Case

_F = "permission intersection"
_HTTP = "3.1 http"
_RPC = "3.3 gateway.rpc"

ROWS: tuple[Case, ...] = (
    Case("PERM-001", "MUST", "GET /api/status MUST be relayed as {status, headers, body (base64)}.",
         _HTTP, _F),
    Case("PERM-002", "MUST", "A non-GET http command MUST be refused runner_http_forbidden with no "
         "Hermes effect.", _HTTP, _F),
    Case("PERM-003", "MUST", "A GET outside the read-only allowlist MUST be refused "
         "runner_http_forbidden with no effect.", _HTTP, _F),
    Case("PERM-004", "MUST", "A profile-checked path naming a profile outside allowedProfiles MUST "
         "be refused runner_profile_forbidden with no effect.", _HTTP, _F),
    Case("PERM-005", "MUST", "A download of a file inside an artifactRoot MUST return its bytes.",
         _HTTP, _F),
    Case("PERM-006", "MUST", "A download through a symlink leaving the roots MUST be refused "
         "runner_artifact_forbidden.", _HTTP, _F),
    Case("PERM-007", "MUST", "A download whose path leaves the roots with .. MUST be refused "
         "runner_artifact_forbidden.", _HTTP, _F),
    Case("PERM-008", "MUST", "With artifactRoots [] every download MUST be refused.", _HTTP, _F),
    Case("PERM-009", "MUST", "A gateway.rpc method outside the allowlist MUST be refused "
         "runner_command_forbidden with nothing sent to Hermes.", _RPC, _F),
    Case("PERM-010", "MUST", "session.create or session.resume with a profile outside "
         "allowedProfiles MUST be refused runner_profile_forbidden with no session made.",
         _RPC, _F),
    Case("PERM-011", "MUST", "A cleanup channel MUST refuse prompt.submit with "
         "runner_cleanup_forbidden and MUST allow resume, interrupt, active_list and close.",
         _RPC, _F),
    Case("PERM-012", "MUST", "session.active_list MUST need params exactly {profile, "
         "current_session_id} of an owned session, and its result MUST hold only that session.",
         _RPC, _F),
    Case("PERM-013", "MUST", "Unauthorized HTTP operations and artifact paths MUST be refused "
         "(runner_http_forbidden, runner_artifact_forbidden).", _HTTP, _F,
         upstream="runner.test.ts#12"),
    Case("PERM-014", "MUST", "After task permission is revoked only stop operations MUST run on an "
         "existing channel: interrupt and an owned active_list execute, a prompt does not.",
         "2.6.2 admit", _F, upstream="runner.test.ts#24"),
    # 9NN: sentences of docs/protocol.md that no case tested until the spec-coverage sweep
    # (each tagged with its case there; docs/spec-coverage-gaps.txt lists those still open).
    Case("PERM-901", "MUST", "A core runner (no computers) MUST refuse every http request that "
         "carries a computer target (a download, session messages, /api/status), without a Hermes "
         "effect.",
         "3.1 http", _F),
    Case("PERM-902", "SHOULD", "The runner SHOULD ask Hermes for the realpath it checked: a "
         "download through a symlink inside the roots reaches Hermes as the link's target.",
         "3.1 http", _F),
    Case("PERM-903", "SHOULD", "When Hermes' session.active_list reply has no session list, the "
         "runner SHOULD answer 502 session_stop_unconfirmed (not an empty list).", "3.3",
         _F),
)
