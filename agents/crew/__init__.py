"""What the CrewAI baselines share: model settings, the models (LiteLLM and a scripted replay),
the trajectory recorder, output budgets, the linters behind reflection, and the tools.

Only `models` and `tools` import CrewAI; nothing here imports it on package import, which
switches CrewAI's, OpenTelemetry's and LiteLLM's telemetry off before CrewAI can read them.
"""

from agents.crew.config import telemetry_off

telemetry_off()
