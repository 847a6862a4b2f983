"""The HTTP routers of the agent API, one module per section of docs/agent-api.md, over the
operations layer."""
