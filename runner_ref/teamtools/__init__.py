"""Team tools: per-lease loopback listener, opaque tool ids, callId dedupe, plugin bind."""
from .leases import LeaseManager, PluginClient, Relay, SessionDirectory
from .listener import ListenerTimings, LoopbackListener, ToolSpec

__all__ = ["LeaseManager", "ListenerTimings", "LoopbackListener", "PluginClient", "Relay",
           "SessionDirectory", "ToolSpec"]
