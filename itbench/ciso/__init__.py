"""The CISO persona's adapters: the policy engines, the evidence sandbox and the evaluation of
an agent's artefacts against the compliance twin."""
