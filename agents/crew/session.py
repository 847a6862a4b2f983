"""One trial worked by a crew: settings, models, trajectory, telemetry off; take the trial, kick
the crew off with the task, report FINISHED. Shared by the SRE and FinOps baselines."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agents.crew.config import (
    ModelSettings,
    decline_first_run_tracing,
    settings_from,
    telemetry_off,
)
from agents.crew.recorder import Trajectory
from itbench.client import Domain, ITBenchAPIError, ITBenchClient, TaskDescription


@dataclass
class Session:
    """What a crew builder gets.

    Attributes:
        client: The SDK client, on the trial.
        task: The trial's task.
        settings: The model settings.
        reasoning_model: The crew members' model.
        tool_model: The model behind the NL2* tools.
        trajectory: Where everything is recorded.
    """

    client: ITBenchClient
    task: TaskDescription
    settings: ModelSettings
    reasoning_model: Any
    tool_model: Any
    trajectory: Trajectory


def work_trial(
    client: ITBenchClient,
    *,
    domain: Domain,
    build: Callable[[Session], Any],
    args: Mapping[str, str | None],
    trajectory: str | None,
    models: tuple[Any, Any] | None = None,
) -> Any:
    """Take the trial, run the crew `build` makes on it, report FINISHED.

    Args:
        client: The SDK client (on the trial already, or it takes the next ready one).
        domain: The domain the crew works; other trials are finished at once.
        build: Makes the crew from the session.
        args: The agent's arguments (None: not given; ITBENCH_AGENT__* variables apply).
        trajectory: The trajectory file (None: kept in memory).
        models: The reasoning and tool models to use instead of the configured ones (tests).

    Returns:
        The crew's output (None when the trial was not of its domain).

    Raises:
        ModelNotConfiguredError: When no model is configured (before the trial is touched).
    """
    telemetry_off()
    given = {k: v for k, v in args.items() if v is not None}
    settings = settings_from(given if models is None else {"model": "scripted", **given})
    record = Trajectory(trajectory)
    if models is None:
        from agents.crew.models import build_models

        models = build_models(settings, record)
    else:
        for model in models:
            model.engine.trajectory = record
    if client.trial_id is None:
        client.next_trial()
    task = client.task()
    client.started()
    try:
        if task.domain != domain:
            record.step("note", f"a {task.domain.value} trial; this crew works {domain.value}")
            return None
        decline_first_run_tracing()
        crew = build(Session(client, task, settings, models[0], models[1], record))
        output = crew.kickoff()
        record.step("note", f"crew finished: {getattr(output, 'raw', output)}", actor="crew")
        return output
    finally:
        try:
            client.finished()
        except ITBenchAPIError as exc:
            if exc.status not in (401, 409):
                raise


def main(domain: Domain, crew_module: str) -> int:
    """Entry point of a crew run as a command or image: the trial from ITBENCH_* variables.

    The model settings are checked before CrewAI is imported, so a missing model fails in
    moments, saying what to set.

    Args:
        domain: The domain the crew works.
        crew_module: The module whose `build(session)` makes the crew.

    Returns:
        The exit status: 0 done, 2 not configured (the message says what to set).
    """
    import importlib
    import sys

    from agents.crew.config import check

    url = os.environ.get("ITBENCH_GATEWAY_URL")
    token = os.environ.get("ITBENCH_TOKEN")
    if not url or not token:
        print("error: set ITBENCH_GATEWAY_URL and ITBENCH_TOKEN (the runner does)", file=sys.stderr)
        return 2
    problems = check({})
    if problems:
        print(f"error: {'; '.join(problems)}", file=sys.stderr)
        return 2
    build = importlib.import_module(crew_module).build
    with ITBenchClient(url, token) as client:
        trial = os.environ.get("ITBENCH_TRIAL") or os.environ.get("ITBENCH_TRIAL_ID")
        if trial:
            client.use_trial(trial)
        work_trial(
            client,
            domain=domain,
            build=build,
            args={},
            trajectory=os.environ.get("ITBENCH_TRAJECTORY_FILE"),
        )
    return 0


def crew_runner(domain: Domain, crew_module: str) -> Callable[..., None]:
    """The `run(client, **args)` of a crew baseline (its arguments as the registry reads them).

    Args:
        domain: The domain the crew works.
        crew_module: The module whose `build(session)` makes the crew (imported on first run,
            so the registry can read the agent without importing CrewAI).
    """

    def run(
        client: ITBenchClient,
        *,
        model: str | None = None,
        tool_model: str | None = None,
        base_url: str | None = None,
        tool_base_url: str | None = None,
        temperature: str | None = None,
        seed: str | None = None,
        token_budget: str | None = None,
        max_retries: str | None = None,
        max_iterations: str | None = None,
        request_timeout: str | None = None,
        trajectory: str | None = None,
    ) -> None:
        """Work one trial with the crew (each argument falls back to ITBENCH_AGENT__<NAME>).

        Args:
            client: The SDK client holding the trial's token.
            model: The reasoning model, a LiteLLM model string (`replay/<file>` replays one).
            tool_model: The model that writes queries and commands [default: model].
            base_url: The models' endpoint (e.g. an OpenAI-compatible server).
            tool_base_url: The tool model's endpoint [default: base_url].
            temperature: Sampling temperature [0].
            seed: Sampling seed [42].
            token_budget: Tokens of a tool output the model sees at most [2000].
            max_retries: Re-prompts after a lint or execution error [3].
            max_iterations: Reasoning steps per crew member [20].
            request_timeout: Seconds per model request [120].
            trajectory: The trajectory file (given by the runner).
        """
        import importlib

        build = importlib.import_module(crew_module).build
        work_trial(
            client,
            domain=domain,
            build=build,
            args={
                "model": model,
                "tool_model": tool_model,
                "base_url": base_url,
                "tool_base_url": tool_base_url,
                "temperature": temperature,
                "seed": seed,
                "token_budget": token_budget,
                "max_retries": max_retries,
                "max_iterations": max_iterations,
                "request_timeout": request_timeout,
            },
            trajectory=trajectory,
        )

    return run


def alert_lines(task: TaskDescription) -> str:
    """The task's alerts, one per line, for a crew's task description."""
    lines = []
    for alert in task.alerts:
        labels = ", ".join(f"{k}={v}" for k, v in sorted(alert.labels.items()) if k != "alertname")
        lines.append(
            f"- {alert.alertname} ({labels}) {alert.state} since {alert.active_at:%H:%M:%S}"
        )
    return "\n".join(lines) or "- none firing yet"


def member_options(settings: ModelSettings) -> dict[str, Any]:
    """What every crew member shares: no delegation, no cached tool results, bounded steps."""
    return {
        "allow_delegation": False,
        "verbose": False,
        "cache": False,
        "max_iter": settings.max_iterations,
        "respect_context_window": True,
    }
