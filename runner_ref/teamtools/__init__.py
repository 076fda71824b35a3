"""Team tools: per-lease loopback listener, opaque tool ids, callId dedupe, plugin bind."""
