"""The issue-12 acceptance: team tools through a runner, against the scripted Hermes and a real
Hermes Agent 0.19.0 with our plugin. Run with ``HERMES_TEAM_RUNNER=1 pytest conformance -m
acceptance``; see docs/acceptance.md."""
