"""The agent gateway: the doors agents use to take a trial, observe, act and submit.

`operations` is the one layer over a trial session (guardrails, limits, costs, the audit trail);
`routes` are its HTTP routers, built into an app by `app.create_app(registry)` over a
`sessions.SessionRegistry`; `mcp` serves the same operations as Model Context Protocol tools. The
request and response bodies live in `schemas` (shared with the SDK, `itbench.client`).
"""
