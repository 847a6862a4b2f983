"""Model settings of the CrewAI baselines, from the agent's arguments or ITBENCH_AGENT__* variables,
and the checks that stop a run before it starts when no model is configured."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass

ENV_PREFIX = "ITBENCH_AGENT__"
"""Arguments reach an agent command or image as ITBENCH_AGENT__<NAME> variables."""

TELEMETRY_OFF = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "OTEL_SDK_DISABLED": "true",
    # LiteLLM would fetch its price list from the network at import; the bundled copy is enough.
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
}
"""Telemetry is off unless the user set these variables otherwise."""

PROVIDER_VARIABLES: dict[str, tuple[tuple[str, ...], ...]] = {
    "openai": (("OPENAI_API_KEY",),),
    "azure": (("AZURE_API_KEY",), ("AZURE_API_BASE",), ("AZURE_API_VERSION",)),
    "watsonx": (("WATSONX_URL",), ("WATSONX_APIKEY", "WATSONX_TOKEN"), ("WATSONX_PROJECT_ID",)),
    "anthropic": (("ANTHROPIC_API_KEY",),),
}
"""Variables LiteLLM reads per provider (each group: one of them must be set)."""

MODEL_HELP = (
    "pass --model <litellm-model> or set ITBENCH_AGENT__MODEL (e.g. openai/gpt-4o, "
    "azure/<deployment>, watsonx/<model-id>, or for a local OpenAI-compatible server "
    "hosted_vllm/<name> or openai/<name> with --base-url / ITBENCH_AGENT__BASE_URL, "
    "ollama/<name>); optionally --tool-model / ITBENCH_AGENT__TOOL_MODEL for the model that "
    "writes queries and commands"
)


def telemetry_off() -> None:
    """Switch CrewAI's, OpenTelemetry's and LiteLLM's telemetry off (unless set otherwise).

    Runs when `agents.crew` is imported, before CrewAI reads the variables.
    """
    for key, value in TELEMETRY_OFF.items():
        os.environ.setdefault(key, value)


def decline_first_run_tracing() -> None:
    """Answer CrewAI's first-run trace offer with no, as a user would once (saved in its user
    data under HOME), so a crew never collects traces for it nor prints the offer's outcome."""
    if os.environ.get("CREWAI_TRACING_ENABLED", "").lower() == "true":
        return
    try:
        from crewai.events.listeners.tracing.utils import mark_first_execution_done
    except ImportError:  # another CrewAI release: the variables above still apply
        return
    mark_first_execution_done(user_consented=False)


class ModelNotConfiguredError(RuntimeError):
    """No model (or no credentials for it) is configured; the message says what to set."""


@dataclass(frozen=True)
class ModelSettings:
    """How the crew reaches its models.

    Attributes:
        model: The reasoning model (a LiteLLM model string).
        tool_model: The model that writes queries and commands.
        base_url: The endpoint of both models (None: the provider's default).
        tool_base_url: The tool model's endpoint.
        api_key: A key for the endpoint (from ITBENCH_AGENT__API_KEY; None: the provider's
            variables).
        temperature: Sampling temperature (0, where the provider allows).
        seed: Sampling seed (42, where the provider allows).
        token_budget: Tokens of a tool's output the model sees at most.
        max_retries: Re-prompts of the tool model after a lint or execution error.
        max_iterations: Reasoning steps per crew member.
        request_timeout: Seconds per model request.
    """

    model: str
    tool_model: str
    base_url: str | None = None
    tool_base_url: str | None = None
    api_key: str | None = None
    temperature: float = 0.0
    seed: int = 42
    token_budget: int = 2000
    max_retries: int = 3
    max_iterations: int = 20
    request_timeout: float = 120.0

    @property
    def scripted(self) -> bool:
        """Whether the models replay a recorded script (offline)."""
        return self.model.startswith("replay/")


def _value(args: Mapping[str, str], env: Mapping[str, str], key: str) -> str | None:
    value = args.get(key)
    if value is None:
        value = env.get(f"{ENV_PREFIX}{key.upper()}")
    return value.strip() if value is not None and value.strip() else None


def _number(text: str | None, default: float, key: str) -> float:
    if text is None:
        return default
    try:
        return float(text)
    except ValueError:
        raise ModelNotConfiguredError(f"{key} must be a number, got {text!r}") from None


def settings_from(args: Mapping[str, str], env: Mapping[str, str] | None = None) -> ModelSettings:
    """The model settings from the agent's arguments, falling back to ITBENCH_AGENT__* variables.

    Raises:
        ModelNotConfiguredError: When no model is configured, naming what to set.
    """
    env = os.environ if env is None else env
    model = _value(args, env, "model")
    if model is None:
        raise ModelNotConfiguredError(f"no model configured: {MODEL_HELP}")
    base_url = _value(args, env, "base_url")
    return ModelSettings(
        model=model,
        tool_model=_value(args, env, "tool_model") or model,
        base_url=base_url,
        tool_base_url=_value(args, env, "tool_base_url") or base_url,
        api_key=env.get(f"{ENV_PREFIX}API_KEY") or None,
        temperature=_number(_value(args, env, "temperature"), 0.0, "temperature"),
        seed=int(_number(_value(args, env, "seed"), 42, "seed")),
        token_budget=int(_number(_value(args, env, "token_budget"), 2000, "token_budget")),
        max_retries=int(_number(_value(args, env, "max_retries"), 3, "max_retries")),
        max_iterations=int(_number(_value(args, env, "max_iterations"), 20, "max_iterations")),
        request_timeout=_number(_value(args, env, "request_timeout"), 120.0, "request_timeout"),
    )


def missing_credentials(
    model: str, base_url: str | None, api_key: str | None, env: Mapping[str, str]
) -> list[str]:
    """The provider variables a model needs and the environment lacks (empty: fine).

    A key of our own (ITBENCH_AGENT__API_KEY) or a local endpoint (a base URL) is enough for
    key variables; providers this table does not know are left to LiteLLM.
    """
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    groups = PROVIDER_VARIABLES.get(provider, ())
    missing: list[str] = []
    for group in groups:
        is_key = any("KEY" in name or "TOKEN" in name for name in group)
        if is_key and (api_key or base_url):
            continue
        if provider == "azure" and group == ("AZURE_API_BASE",) and base_url:
            continue
        if not any(env.get(name) for name in group):
            missing.append(" or ".join(group))
    return missing


def check(args: Mapping[str, str], env: Mapping[str, str] | None = None) -> list[str]:
    """Problems that stop the CrewAI baselines before their first trial.

    Args:
        args: The agent's arguments (model, tool_model, base_url, ...).
        env: The environment (default: this process').

    Returns:
        Sentences naming what to install or which variables to set.
    """
    env = os.environ if env is None else env
    problems: list[str] = []
    if importlib.util.find_spec("crewai") is None:
        problems.append("CrewAI is not installed: pip install -e '.[agents]'")
    try:
        settings = settings_from(args, env)
    except ModelNotConfiguredError as exc:
        return [*problems, str(exc)]
    if settings.scripted:
        return problems
    if importlib.util.find_spec("litellm") is None:
        problems.append("LiteLLM is not installed: pip install -e '.[agents]'")
    for model, base in (
        (settings.model, settings.base_url),
        (settings.tool_model, settings.tool_base_url),
    ):
        missing = missing_credentials(model, base, settings.api_key, env)
        if missing:
            problems.append(
                f"model {model!r} needs {', '.join(missing)} in the environment (or "
                "ITBENCH_AGENT__API_KEY with the key, or --base-url for a local server)"
            )
    return sorted(set(problems), key=problems.index)
