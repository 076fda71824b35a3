"""Admin API (protocol §7) over real loopback: sessions, CSRF, Origin, strict bodies, secrets."""
