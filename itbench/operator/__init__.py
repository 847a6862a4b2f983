"""The Kopf operator: thin handlers per kind over the core runner; `app.run_operator` starts it."""
