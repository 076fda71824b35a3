"""LeaseManager tests: in-memory relay, plugin and sessions, a fake clock, real listeners."""
