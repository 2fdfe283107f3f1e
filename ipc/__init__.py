"""Transport and protocol: websocket server, auth, JSON-RPC dispatch, channel adapters."""
