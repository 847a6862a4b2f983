"""`itbench serve --env sim`: the agent gateway on a port with one ready trial, for practice; with
`--agent-cmd` the served trial is worked by that command and the server stops once it is scored."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
import uvicorn

from itbench.cli.context import BadInput, pass_settings, stdout_console, warn
from itbench.cli.scenarios import open_catalog, scenarios_dir_option
from itbench.core.catalog import did_you_mean
from itbench.core.models.agent_record import AgentInfo, AgentRuntimeKind
from itbench.core.models.benchmark_run import Timeouts
from itbench.core.models.scenario import Scenario
from itbench.core.models.trial import TrialStatus
from itbench.core.runner.machine import new_status
from itbench.environments.sim.twins import twin_for
from itbench.execution.agents import AgentProblemError, from_command
from itbench.execution.benchmark import EMBEDDED_CONFIG
from itbench.execution.driver import AgentRunner, drive_trial
from itbench.execution.evidence import MemoryEvidenceStore
from itbench.execution.executor import TrialExecutor
from itbench.execution.plan import TrialPlan, trial_seed
from itbench.execution.runners import AgentFiles, command_runner
from itbench.gateway.app import create_app
from itbench.gateway.sessions import AgentState, SessionRegistry
from itbench.settings import Settings

PRACTICE_AGENT = "external"
"""The agent name practice trials are published to."""


@dataclass
class PracticeTrial:
    """One trial served to an external agent.

    Attributes:
        plan: The trial.
        executor: Its executor (environment, sessions, evidence).
        registry: The gateway's sessions.
        app: The gateway app.
    """

    plan: TrialPlan
    executor: TrialExecutor
    registry: SessionRegistry
    app: object


def wait_until_listening(server: uvicorn.Server, seconds: float = 30.0) -> None:
    """Return once a uvicorn server takes connections (or after `seconds`). A trial can become
    Ready before its server listens; its token is announced only after this returns."""
    waited = 0.0
    while not server.started and waited < seconds:
        time.sleep(0.05)
        waited += 0.05


def practice_trial(
    scenario: Scenario,
    *,
    seed: int,
    agent_seconds: int,
    allow_oracle: bool,
    agent: AgentInfo | None = None,
) -> PracticeTrial:
    """Build a practice trial of a scenario on a fresh simulator, with its gateway.

    Args:
        scenario: The scenario.
        seed: The run seed (the environment's seed derives from it).
        agent_seconds: The agent's time limit.
        allow_oracle: Whether the oracle endpoint answers.
        agent: The agent that will work it [default: an external one].
    """
    name = f"practice--{scenario.name}"
    plan = TrialPlan(
        name=name,
        uid=str(uuid.uuid4()),
        run="practice",
        agent=agent
        or AgentInfo(
            name=PRACTICE_AGENT, runtime=AgentRuntimeKind.EXTERNAL, target="itbench serve"
        ),
        scenario=scenario,
        attempt=0,
        seed=trial_seed(seed, scenario.name, 0),
        timeouts=Timeouts(agent_seconds=agent_seconds),
        allow_oracle=allow_oracle,
    )
    env = twin_for(scenario, seed=plan.seed)
    registry = SessionRegistry()
    ctx = plan.context(agent_name=PRACTICE_AGENT)
    executor = TrialExecutor(ctx, env, registry, MemoryEvidenceStore(), virtual_time=True)
    return PracticeTrial(plan=plan, executor=executor, registry=registry, app=create_app(registry))


def external_agent(
    on_ready: Callable[[str, str], None],
    *,
    wall_seconds: float,
    poll: Callable[[], None] = lambda: time.sleep(0.5),
) -> Callable[[TrialExecutor], None]:
    """An agent runner that publishes the trial and waits for an external agent to finish.

    It returns when the agent reports FINISHED, its (virtual) deadline passes, or the wall-clock
    limit is reached.

    Args:
        on_ready: Called once with (trial id, token) when the trial is ready.
        wall_seconds: Real seconds to wait at most.
        poll: Waits between looks at the session.
    """

    def run(executor: TrialExecutor) -> None:
        session = executor.session()
        if session is None:
            return
        on_ready(session.trial_id, session.token)
        started = time.monotonic()
        while time.monotonic() - started < wall_seconds:
            if session.state in (AgentState.FINISHED, AgentState.CLOSED):
                return
            if session.remaining_seconds() == 0:
                return
            poll()

    return run


@click.command("serve")
@click.option(
    "--env",
    "env_type",
    type=click.Choice(["sim"]),
    default="sim",
    show_default=True,
    help="The environment behind the gateway (the simulator).",
)
@click.option("--scenario", "scenario_name", required=True, help="The scenario to practise on.")
@click.option("--host", default=None, help="Listen address [default: settings gateway.host].")
@click.option(
    "--port",
    default=None,
    type=click.IntRange(1, 65535),
    help="Listen port [default: settings gateway.port, 8080].",
)
@click.option("--seed", default=42, show_default=True, type=click.IntRange(0), help="Seed.")
@click.option(
    "--agent-seconds",
    default=900,
    show_default=True,
    type=click.IntRange(1, 86400),
    help="The agent's time limit (virtual seconds; also the real-time bound).",
)
@click.option("--allow-oracle", is_flag=True, help="Let GET /oracle reveal the ground truth.")
@click.option(
    "--agent-cmd",
    default=None,
    metavar="COMMAND",
    help="Work the trial with this command (ITBENCH_GATEWAY_URL, ITBENCH_TRIAL and ITBENCH_TOKEN "
    "set; no shell), print the score and stop.",
)
@click.option(
    "--agent-timeout",
    type=click.FloatRange(1, 86_400),
    default=None,
    help="Real seconds the --agent-cmd may take [default: --agent-seconds].",
)
@click.option(
    "--output-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where --agent-cmd's output goes (serve-<scenario>/agent/ under it) [default: settings "
    "outputDir, ./out].",
)
@scenarios_dir_option
@pass_settings
def serve_command(
    settings: Settings,
    env_type: str,
    scenario_name: str,
    host: str | None,
    port: int | None,
    seed: int,
    agent_seconds: int,
    allow_oracle: bool,
    agent_cmd: str | None,
    agent_timeout: float | None,
    output_dir: Path | None,
    scenarios_dir: Path | None,
) -> None:
    """Serve the agent API on a port with one ready trial, so an external agent can practise.

    The fault is injected and its alerts fire before the trial is published; the token is
    printed. When the agent reports FINISHED (or its time is up) the trial is scored and the
    result printed; the server keeps running until interrupted. With --agent-cmd the command
    works the trial (its output goes to <output dir>/serve-<scenario>/agent/) and the server
    stops once the trial is scored.
    """
    catalog = open_catalog(settings, scenarios_dir)
    if scenario_name not in catalog:
        raise BadInput(
            f"unknown scenario {scenario_name!r}{did_you_mean(scenario_name, catalog.names)}; "
            "see `itbench scenarios list`"
        )
    command: AgentInfo | None = None
    if agent_cmd is not None:
        try:
            command = from_command(agent_cmd, wall_seconds=agent_timeout or float(agent_seconds))
        except AgentProblemError as exc:
            raise BadInput(str(exc)) from None
    trial = practice_trial(
        catalog.get(scenario_name),
        seed=seed,
        agent_seconds=agent_seconds,
        allow_oracle=allow_oracle,
        agent=command,
    )
    bind_host = host or settings.gateway.host
    bind_port = port or settings.gateway.port
    console = stdout_console()
    server = uvicorn.Server(
        uvicorn.Config(trial.app, host=bind_host, port=bind_port, log_level="warning")  # type: ignore[arg-type]
    )
    files: AgentFiles | None = None
    if command is not None:
        base = (output_dir or settings.output_dir) / f"serve-{scenario_name}" / "agent"
        files = AgentFiles(
            stdout=base / "stdout.log", stderr=base / "stderr.log", steps=base / "steps.jsonl"
        )
    local = "127.0.0.1" if bind_host in ("0.0.0.0", "::", "") else bind_host

    def served_url() -> str:
        wait_until_listening(server)
        return f"http://{local}:{bind_port}"

    def on_ready(trial_id: str, token: str) -> None:
        served_url()  # the token is announced once the gateway answers
        console.print(f"gateway: http://{bind_host}:{bind_port}/v1  (OpenAPI: /docs)")
        console.print(f"trial:   {trial_id}")
        console.print(f"token:   {token}")
        console.print(f"export ITBENCH_GATEWAY_URL=http://{bind_host}:{bind_port}")
        console.print(f"export ITBENCH_TOKEN={token}")

    def drive() -> None:
        executor = trial.executor
        runner: AgentRunner = external_agent(on_ready, wall_seconds=float(agent_seconds))
        if command is not None:
            runner = command_runner(command, served_url, files)
        final = drive_trial(
            new_status(executor.now()),
            executor,
            persist=lambda _s: None,
            run_agent=runner,
            config=EMBEDDED_CONFIG,
        )
        _print_final(final)
        if command is not None and files is not None:
            console.print(f"agent output: {files.stdout.parent}")
            server.should_exit = True

    def _print_final(final: TrialStatus) -> None:
        console.print(f"trial {trial.plan.name}: {final.phase.value} ({final.reason})")
        console.print(final.message)
        if final.scores is not None:
            console.print_json(final.scores.model_dump_json(by_alias=True, exclude_none=True))

    warn(f"preparing {scenario_name} (env {env_type}): injecting the fault, waiting for alerts")
    threading.Thread(target=drive, name="practice-trial", daemon=True).start()
    server.run()
