# The ITBench operator and gateway image (also usable as `itbench` CLI image).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY itbench ./itbench
COPY agents ./agents
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
COPY --from=build /install /usr/local
COPY scenarios /opt/itbench/scenarios
# The live-cluster fault playbooks use the kubernetes.core collection.
RUN ansible-galaxy collection install --collections-path /usr/share/ansible/collections \
        "kubernetes.core:>=6.2,<7"
ENV ITBENCH_CATALOG__SCENARIOS_DIR=/opt/itbench/scenarios \
    PYTHONUNBUFFERED=1
USER 10001
ENTRYPOINT ["itbench"]
CMD ["operator", "run"]
