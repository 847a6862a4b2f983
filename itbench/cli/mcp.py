"""`itbench mcp --scenario NAME`: one practice trial's tools over the Model Context Protocol, on
stdio or streamable HTTP, for any MCP-capable agent."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import uvicorn
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from itbench.cli.context import BadInput, pass_settings, warn
from itbench.cli.scenarios import open_catalog, scenarios_dir_option
from itbench.cli.serve import (
    PracticeTrial,
    external_agent,
    practice_trial,
    wait_until_listening,
)
from itbench.core.catalog import did_you_mean
from itbench.core.models.trial import TrialStatus
from itbench.core.runner.machine import new_status
from itbench.execution.benchmark import EMBEDDED_CONFIG
from itbench.execution.driver import drive_trial
from itbench.gateway.errors import UnauthenticatedError
from itbench.gateway.mcp import build_server
from itbench.gateway.routes.deps import bearer
from itbench.gateway.sessions import TrialSession
from itbench.settings import Settings

READY_SECONDS = 300.0
"""How long a tool call waits for the trial to become Ready."""


class _Trial:
    """The practice trial behind the tools: driven in a thread, Ready once its alerts fire."""

    def __init__(self, trial: PracticeTrial, agent_seconds: int) -> None:
        self.trial = trial
        self.ready = threading.Event()
        self.final: TrialStatus | None = None
        self.token = ""
        self._agent_seconds = agent_seconds
        self.serving: Callable[[], None] = lambda: None
        """Returns once the transport takes connections (the token is announced after it)."""

    def drive(self) -> None:
        def on_ready(trial_id: str, token: str) -> None:
            self.token = token
            self.serving()
            click.echo(f"trial:   {trial_id}", err=True)
            click.echo(f"token:   {token}", err=True)
            self.ready.set()

        executor = self.trial.executor
        self.final = drive_trial(
            new_status(executor.now()),
            executor,
            persist=lambda _s: None,
            run_agent=external_agent(on_ready, wall_seconds=float(self._agent_seconds)),
            config=EMBEDDED_CONFIG,
        )
        final = self.final
        click.echo(f"trial {self.trial.plan.name}: {final.phase.value} ({final.reason})", err=True)
        if final.scores is not None:
            click.echo(final.scores.model_dump_json(by_alias=True, exclude_none=True), err=True)

    def session(self, ctx: Context, *, check_token: bool) -> TrialSession:
        if not self.ready.wait(READY_SECONDS):
            raise ToolError('{"type": "trial-not-ready", "detail": "the trial is not Ready yet"}')
        if check_token:
            headers = ctx.headers or {}
            try:
                token = bearer(headers.get("authorization"))
            except UnauthenticatedError:
                token = ""
            if token != self.token:
                raise ToolError(
                    '{"type": "unauthenticated", "detail": "send the trial\'s token as '
                    '`Authorization: Bearer <token>`"}'
                )
        sessions = self.trial.registry.sessions()
        if not sessions:
            raise ToolError('{"type": "trial-finished", "detail": "the trial is closed"}')
        return sessions[0]


@click.command("mcp")
@click.option("--scenario", "scenario_name", required=True, help="The scenario to work on.")
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio, or streamable HTTP at /mcp (bearer token required).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP listen address.")
@click.option("--port", default=8090, show_default=True, type=click.IntRange(1, 65535))
@click.option("--seed", default=42, show_default=True, type=click.IntRange(0), help="Seed.")
@click.option(
    "--agent-seconds",
    default=900,
    show_default=True,
    type=click.IntRange(1, 86400),
    help="The agent's time limit (virtual seconds; also the real-time bound).",
)
@click.option("--allow-oracle", is_flag=True, help="Let the oracle read the ground truth.")
@scenarios_dir_option
@pass_settings
def mcp_command(
    settings: Settings,
    scenario_name: str,
    transport: str,
    host: str,
    port: int,
    seed: int,
    agent_seconds: int,
    allow_oracle: bool,
    scenarios_dir: Path | None,
) -> None:
    """Serve one practice trial's tools over MCP (alerts, PromQL, LogQL, traces, topology,
    kubectl, actions, wait, reports and the run protocol).

    The same guardrails, limits and audit trail as the HTTP API. Trial details and the final
    score go to stderr (stdout is the protocol on stdio).
    """
    catalog = open_catalog(settings, scenarios_dir)
    if scenario_name not in catalog:
        raise BadInput(
            f"unknown scenario {scenario_name!r}{did_you_mean(scenario_name, catalog.names)}; "
            "see `itbench scenarios list`"
        )
    trial = _Trial(
        practice_trial(
            catalog.get(scenario_name),
            seed=seed,
            agent_seconds=agent_seconds,
            allow_oracle=allow_oracle,
        ),
        agent_seconds,
    )
    check_token = transport == "http"

    def resolve(ctx: Context) -> TrialSession:
        return trial.session(ctx, check_token=check_token)

    server = build_server(resolve)
    warn(f"preparing {scenario_name}: injecting the fault, waiting for alerts")
    if transport == "stdio":
        threading.Thread(target=trial.drive, name="mcp-trial", daemon=True).start()
        server.run("stdio")
        return
    app: Any = server.streamable_http_app(host=host)
    http = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))

    trial.serving = lambda: wait_until_listening(http)
    threading.Thread(target=trial.drive, name="mcp-trial", daemon=True).start()
    click.echo(f"mcp:     http://{host}:{port}/mcp", err=True)
    sys.stderr.flush()
    http.run()
