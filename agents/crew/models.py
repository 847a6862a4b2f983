"""The crew's models as CrewAI LLMs: any LiteLLM model string (OpenAI-compatible servers such as
vLLM or Ollama, watsonx, Azure OpenAI, ...) at temperature 0 and seed 42 where the provider
allows, and a scripted model that replays recorded answers (offline tests and demos).

Both record every call on the trajectory: the answer as the model gave it, prompt and completion
tokens, latency and estimated cost. Both speak CrewAI's text protocol (Thought / Action / Action
Input), which every model can follow, rather than provider-specific function calling.

The work is done by an engine (`LiteLLMEngine`, `ScriptEngine`); `CrewLLM` is the thin CrewAI
LLM subclass around it, for CrewAI releases whose LLM base is a pydantic model and for older
ones whose base is a plain class (the releases that resolve next to MCP SDK 2).
"""

from __future__ import annotations

import copy
import json
import re
import time
from pathlib import Path
from typing import Any

import pydantic
import yaml
from crewai.llms.base_llm import BaseLLM

from agents.crew.budget import estimate_tokens
from agents.crew.config import ModelSettings
from agents.crew.recorder import Trajectory

_THOUGHT = re.compile(r"^\s*(?:Thought:)?\s*(.*?)(?:\n\s*(?:Action|Final Answer)\s*:|$)", re.DOTALL)


def _messages(messages: Any) -> list[dict[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    return [dict(m) for m in messages]


def _cut(text: str, stops: list[str]) -> str:
    cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=-1)
    return text[:cut].strip() if cut >= 0 else text


class Engine:
    """What answers a CrewAI LLM's calls and records them.

    Attributes:
        model: The model's name as recorded.
        temperature: Sampling temperature.
        actor: Who calls it when CrewAI does not say (e.g. the tool model).
        reasoning: Whether its answers hold thoughts worth recording.
        trajectory: Where calls are recorded.
    """

    def __init__(
        self,
        model: str,
        *,
        temperature: float | None = None,
        actor: str = "",
        reasoning: bool = True,
        trajectory: Trajectory | None = None,
    ) -> None:
        """Name the model and where its calls go."""
        self.model = model
        self.temperature = temperature
        self.actor = actor
        self.reasoning = reasoning
        self.trajectory = trajectory

    def answer(
        self, messages: list[dict[str, Any]], stop: list[str]
    ) -> tuple[str, int, int, float | None]:
        """The answer, prompt tokens, completion tokens and estimated cost (None: unknown)."""
        raise NotImplementedError

    def context_window(self) -> int:
        """Tokens the model takes."""
        return 32_768

    def complete(self, messages: Any, stop: list[str], from_agent: Any = None) -> str:
        """Answer one call and record it."""
        conversation = _messages(messages)
        start = time.monotonic()
        text, prompt_tokens, completion_tokens, cost = self.answer(conversation, stop)
        latency = time.monotonic() - start
        text = _cut(text, stop)
        if self.trajectory is not None:
            role = getattr(from_agent, "role", None)
            actor = str(role) if role else self.actor
            self.trajectory.step(
                "model-call",
                text,
                actor=actor,
                model=self.model,
                promptTokens=prompt_tokens,
                completionTokens=completion_tokens,
                latencySeconds=round(latency, 4),
                costUsd=cost,
            )
            match = _THOUGHT.match(text) if self.reasoning else None
            thought = match.group(1).strip() if match else ""
            if thought:
                self.trajectory.step("thought", thought, actor=actor)
        return text


class LiteLLMEngine(Engine):
    """A model reached through LiteLLM (`provider/model` strings)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        seed: int = 42,
        request_timeout: float = 120.0,
        actor: str = "",
        reasoning: bool = True,
        trajectory: Trajectory | None = None,
    ) -> None:
        """Reach `model` (at `base_url`), sampling at `temperature` with `seed`."""
        super().__init__(
            model, temperature=temperature, actor=actor, reasoning=reasoning, trajectory=trajectory
        )
        self.base_url = base_url
        self.api_key = api_key
        self.seed = seed
        self.request_timeout = request_timeout

    def answer(
        self, messages: list[dict[str, Any]], stop: list[str]
    ) -> tuple[str, int, int, float | None]:
        """One completion through LiteLLM."""
        import litellm

        response = litellm.completion(
            model=self.model,
            messages=messages,
            temperature=self.temperature,
            seed=self.seed,
            stop=stop or None,
            api_base=self.base_url,
            api_key=self.api_key,
            timeout=self.request_timeout,
            drop_params=True,  # temperature and seed only where the provider takes them
            num_retries=2,
        )
        text = str(response.choices[0].message.content or "")
        usage = getattr(response, "usage", None)
        try:
            cost: float | None = float(litellm.completion_cost(completion_response=response))
        except Exception:  # a local or unknown model has no price
            cost = None
        return (
            text,
            int(getattr(usage, "prompt_tokens", 0) or 0),
            int(getattr(usage, "completion_tokens", 0) or 0),
            cost,
        )

    def context_window(self) -> int:
        """The model's context window as LiteLLM knows it (32k when unknown)."""
        try:
            import litellm

            return int(litellm.get_model_info(self.model).get("max_input_tokens") or 32_768)
        except Exception:
            return 32_768


class ScriptExhaustedError(RuntimeError):
    """The scripted model was asked for more answers than its script has."""


class ScriptEngine(Engine):
    """Replays recorded answers in order and keeps every conversation it was given.

    Tokens are estimated (one per four characters); calls cost nothing.
    """

    def __init__(self, model: str, responses: list[str], **kwargs: Any) -> None:
        """Replay `responses`."""
        super().__init__(model, **kwargs)
        self.responses = list(responses)
        self.prompts: list[list[dict[str, Any]]] = []

    def answer(
        self, messages: list[dict[str, Any]], stop: list[str]
    ) -> tuple[str, int, int, float | None]:
        """The next recorded answer.

        Raises:
            ScriptExhaustedError: When no answer is left.
        """
        conversation = copy.deepcopy(messages)
        self.prompts.append(conversation)
        if len(self.prompts) > len(self.responses):
            last = str(conversation[-1].get("content", ""))[-400:] if conversation else ""
            raise ScriptExhaustedError(
                f"the scripted model {self.model!r} has {len(self.responses)} answers and was "
                f"asked for answer {len(self.prompts)}; the last message ended: {last!r}"
            )
        text = self.responses[len(self.prompts) - 1]
        prompt = "\n".join(str(m.get("content", "")) for m in conversation)
        return _cut(text, stop), estimate_tokens(prompt), estimate_tokens(_cut(text, stop)), 0.0

    def context_window(self) -> int:
        """Large enough that CrewAI never summarises the conversation behind the script."""
        return 1_000_000


class _CallsEngine:
    """CrewAI's LLM interface, answered by the engine (text protocol, stop words applied)."""

    engine: Engine

    def call(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> str:
        """Answer one call."""
        stops = list(getattr(self, "stop_sequences", None) or getattr(self, "stop", None) or [])
        return self.engine.complete(messages, stops, from_agent)

    def supports_function_calling(self) -> bool:
        """The crew uses the text protocol with every model."""
        return False

    def supports_stop_words(self) -> bool:
        """Stop words are applied to every answer."""
        return True

    def get_context_window_size(self) -> int:
        """The engine's context window."""
        return self.engine.context_window()

    @property
    def prompts(self) -> list[list[dict[str, Any]]]:
        """Every conversation a scripted model was given (empty for others)."""
        return list(getattr(self.engine, "prompts", []))

    @property
    def remaining(self) -> int:
        """Answers a scripted model has not given yet."""
        engine = self.engine
        if isinstance(engine, ScriptEngine):
            return len(engine.responses) - len(engine.prompts)
        return 0


if issubclass(BaseLLM, pydantic.BaseModel):

    class CrewLLM(_CallsEngine, BaseLLM):  # type: ignore[misc]
        """A CrewAI LLM answered by an engine (CrewAI releases with a pydantic LLM base)."""

        llm_type: str = "itbench"
        engine: Any = pydantic.Field(default=None, exclude=True)

        @classmethod
        def of(cls, engine: Engine) -> CrewLLM:
            """The LLM around an engine."""
            return cls(model=engine.model, temperature=engine.temperature, engine=engine)

else:

    class CrewLLM(_CallsEngine, BaseLLM):  # type: ignore[no-redef,misc]
        """A CrewAI LLM answered by an engine (CrewAI releases with a plain LLM base)."""

        def __init__(self, engine: Engine) -> None:
            """Wrap an engine."""
            super().__init__(model=engine.model, temperature=engine.temperature)
            self.engine = engine

        @classmethod
        def of(cls, engine: Engine) -> CrewLLM:
            """The LLM around an engine."""
            return cls(engine)


def scripted_model(
    responses: list[str],
    *,
    model: str = "scripted",
    actor: str = "",
    reasoning: bool = True,
    trajectory: Trajectory | None = None,
) -> CrewLLM:
    """A CrewAI LLM that replays `responses` in order."""
    return CrewLLM.of(
        ScriptEngine(model, responses, actor=actor, reasoning=reasoning, trajectory=trajectory)
    )


def load_script(path: str | Path) -> tuple[list[str], list[str]]:
    """A recorded session: `{"reasoning": [answers...], "tool": [answers...]}` (JSON or YAML).

    Raises:
        ValueError: When the file does not hold two lists of strings.
    """
    text = Path(path).read_text(encoding="utf-8")
    doc = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: a script is an object with reasoning and tool answers")
    lists = []
    for key in ("reasoning", "tool"):
        answers = doc.get(key) or []
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise ValueError(f"{path}: {key} must be a list of strings")
        lists.append(list(answers))
    return lists[0], lists[1]


def build_models(settings: ModelSettings, trajectory: Trajectory) -> tuple[CrewLLM, CrewLLM]:
    """The reasoning model and the tool model (a `replay/<file>` model replays a script)."""
    if settings.scripted:
        reasoning, tool = load_script(settings.model.removeprefix("replay/"))
        return (
            scripted_model(reasoning, model=settings.model, trajectory=trajectory),
            scripted_model(
                tool,
                model=settings.model,
                actor="tool-model",
                reasoning=False,
                trajectory=trajectory,
            ),
        )
    common: dict[str, Any] = {
        "temperature": settings.temperature,
        "seed": settings.seed,
        "api_key": settings.api_key,
        "request_timeout": settings.request_timeout,
        "trajectory": trajectory,
    }
    return (
        CrewLLM.of(LiteLLMEngine(settings.model, base_url=settings.base_url, **common)),
        CrewLLM.of(
            LiteLLMEngine(
                settings.tool_model,
                base_url=settings.tool_base_url,
                actor="tool-model",
                reasoning=False,
                **common,
            )
        ),
    )
