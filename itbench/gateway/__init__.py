"""The agent gateway: the HTTP API agents use to take a trial, observe, act and submit.

`app.create_app(registry)` builds it over a `sessions.SessionRegistry` of trial sessions; the
request and response bodies live in `schemas` (shared with the SDK, `itbench.client`).
"""
