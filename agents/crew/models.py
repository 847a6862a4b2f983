"""The crew's models as CrewAI LLMs: any LiteLLM model string (OpenAI-compatible servers such as
vLLM or Ollama, watsonx, Azure OpenAI, ...) at temperature 0 and seed 42 where the provider
allows, and a scripted model that replays recorded responses (offline tests and demos).

Both record every call on the trajectory: the answer as the model gave it, prompt and completion
tokens, latency and estimated cost. Both speak CrewAI's text protocol (Thought / Action / Action
Input), which every model can follow, rather than provider-specific function calling.
"""

from __future__ import annotations

import copy
import json
import re
import time
from pathlib import Path
from typing import Any

import yaml
from crewai.llms.base_llm import BaseLLM
from pydantic import Field

from agents.crew.budget import estimate_tokens
from agents.crew.config import ModelSettings
from agents.crew.recorder import Trajectory

_THOUGHT = re.compile(r"^\s*(?:Thought:)?\s*(.*?)(?:\n\s*(?:Action|Final Answer)\s*:|$)", re.DOTALL)


def _messages(messages: Any) -> list[dict[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    return [dict(m) for m in messages]


def _actor(from_agent: Any, default: str) -> str:
    role = getattr(from_agent, "role", None)
    return str(role) if role else default


def _record(
    trajectory: Trajectory | None,
    *,
    actor: str,
    model: str,
    text: str,
    prompt_tokens: int,
    completion_tokens: int,
    latency: float,
    cost: float | None,
    reasoning: bool,
) -> None:
    if trajectory is None:
        return
    trajectory.step(
        "model-call",
        text,
        actor=actor,
        model=model,
        promptTokens=prompt_tokens,
        completionTokens=completion_tokens,
        latencySeconds=round(latency, 4),
        costUsd=cost,
    )
    if reasoning:
        match = _THOUGHT.match(text)
        thought = match.group(1).strip() if match else ""
        if thought:
            trajectory.step("thought", thought, actor=actor)


class LiteLLMModel(BaseLLM):
    """A model reached through LiteLLM (`provider/model` strings), recorded on the trajectory."""

    llm_type: str = "litellm"
    is_litellm: bool = True
    actor: str = Field(default="", description="Who calls it, when CrewAI does not say.")
    reasoning: bool = Field(default=True, description="It reasons (its thoughts are recorded).")
    request_timeout: float = Field(default=120.0, description="Seconds per request.")
    trajectory: Any = Field(default=None, exclude=True, description="Where calls are recorded.")

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
        """Complete the conversation; returns the answer's text (cut at a stop word)."""
        import litellm

        start = time.monotonic()
        response = litellm.completion(
            model=self.model,
            messages=_messages(messages),
            temperature=self.temperature,
            seed=self.seed,
            stop=self.stop_sequences or None,
            api_base=self.base_url,
            api_key=self.api_key,
            max_tokens=self.max_tokens,
            timeout=self.request_timeout,
            drop_params=True,  # temperature and seed only where the provider takes them
            num_retries=2,
        )
        latency = time.monotonic() - start
        text = str(response.choices[0].message.content or "")
        text = self._apply_stop_words(text)
        usage = getattr(response, "usage", None)
        try:
            cost: float | None = float(litellm.completion_cost(completion_response=response))
        except Exception:  # a local or unknown model has no price
            cost = None
        _record(
            self.trajectory,
            actor=_actor(from_agent, self.actor),
            model=self.model,
            text=text,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            latency=latency,
            cost=cost,
            reasoning=self.reasoning,
        )
        return text

    def supports_function_calling(self) -> bool:
        """The crew uses the text protocol with every model."""
        return False

    def supports_stop_words(self) -> bool:
        """Stop words are passed to the provider and applied again to the answer."""
        return True

    def get_context_window_size(self) -> int:
        """The model's context window as LiteLLM knows it (32k when unknown)."""
        try:
            import litellm

            return int(litellm.get_model_info(self.model).get("max_input_tokens") or 32_768)
        except Exception:
            return 32_768


class ScriptExhaustedError(RuntimeError):
    """The scripted model was asked for more answers than its script has."""


class ScriptedModel(BaseLLM):
    """A model that replays recorded answers in order and keeps every prompt it was given.

    Tokens are estimated (one per four characters); calls cost nothing.
    """

    llm_type: str = "scripted"
    responses: list[str] = Field(default_factory=list, description="The answers, in order.")
    prompts: list[list[dict[str, Any]]] = Field(
        default_factory=list, description="Every conversation it was given."
    )
    actor: str = Field(default="", description="Who calls it, when CrewAI does not say.")
    reasoning: bool = Field(default=True, description="It reasons (its thoughts are recorded).")
    trajectory: Any = Field(default=None, exclude=True, description="Where calls are recorded.")

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
        """The next recorded answer (cut at a stop word).

        Raises:
            ScriptExhaustedError: When no answer is left.
        """
        conversation = copy.deepcopy(_messages(messages))
        self.prompts.append(conversation)
        if len(self.prompts) > len(self.responses):
            last = str(conversation[-1].get("content", ""))[-400:] if conversation else ""
            raise ScriptExhaustedError(
                f"the scripted model {self.model!r} has {len(self.responses)} answers and was "
                f"asked for answer {len(self.prompts)}; the last message ended: {last!r}"
            )
        text = self._apply_stop_words(self.responses[len(self.prompts) - 1])
        prompt = "\n".join(str(m.get("content", "")) for m in conversation)
        _record(
            self.trajectory,
            actor=_actor(from_agent, self.actor),
            model=self.model,
            text=text,
            prompt_tokens=estimate_tokens(prompt),
            completion_tokens=estimate_tokens(text),
            latency=0.0,
            cost=0.0,
            reasoning=self.reasoning,
        )
        return text

    @property
    def remaining(self) -> int:
        """Answers not yet given."""
        return len(self.responses) - len(self.prompts)

    def supports_function_calling(self) -> bool:
        """The crew uses the text protocol."""
        return False

    def get_context_window_size(self) -> int:
        """Large enough that CrewAI never summarises the conversation behind the script's back."""
        return 1_000_000


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


def build_models(settings: ModelSettings, trajectory: Trajectory) -> tuple[BaseLLM, BaseLLM]:
    """The reasoning model and the tool model (a `replay/<file>` model replays a script)."""
    if settings.scripted:
        reasoning, tool = load_script(settings.model.removeprefix("replay/"))
        return (
            ScriptedModel(model=settings.model, responses=reasoning, trajectory=trajectory),
            ScriptedModel(
                model=settings.model,
                responses=tool,
                actor="tool-model",
                reasoning=False,
                trajectory=trajectory,
            ),
        )
    common = {
        "temperature": settings.temperature,
        "seed": settings.seed,
        "api_key": settings.api_key,
        "request_timeout": settings.request_timeout,
        "trajectory": trajectory,
    }
    return (
        LiteLLMModel(model=settings.model, base_url=settings.base_url, **common),
        LiteLLMModel(
            model=settings.tool_model,
            base_url=settings.tool_base_url,
            actor="tool-model",
            reasoning=False,
            **common,
        ),
    )
