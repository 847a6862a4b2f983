# The ITBench operator and gateway image (also usable as `itbench` CLI image). It runs as the
# non-root user 10001 on a read-only root filesystem (the chart mounts an emptyDir at /tmp, where
# HOME, Ansible's and Helm's working files and each playbook run's private directory live), with
# everything the live-cluster playbooks call pinned: ansible-core and ansible-runner, the
# kubernetes.core collection (itbench/stack/pins.yaml ansible.collectionVersion), kubectl (the
# pinned Kubernetes version) and Helm, each binary checked against its publisher's checksum.
ARG KUBECTL_VERSION=v1.32.4
ARG HELM_VERSION=v3.18.4
ARG ANSIBLE_CORE_VERSION=2.19.14
ARG ANSIBLE_RUNNER_VERSION=2.4.3
ARG KUBERNETES_CORE_VERSION=6.2.0

FROM python:3.11-slim AS build
ARG ANSIBLE_CORE_VERSION
ARG ANSIBLE_RUNNER_VERSION
WORKDIR /src
COPY pyproject.toml README.md ./
COPY itbench ./itbench
COPY agents ./agents
RUN pip install --no-cache-dir --prefix=/install . \
        "ansible-core==${ANSIBLE_CORE_VERSION}" "ansible-runner==${ANSIBLE_RUNNER_VERSION}"

FROM python:3.11-slim AS tools
ARG TARGETARCH
ARG KUBECTL_VERSION
ARG HELM_VERSION
ARG KUBERNETES_CORE_VERSION
RUN apt-get update && apt-get install -y --no-install-recommends curl ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /tools
RUN arch="${TARGETARCH:-amd64}" \
    && curl -fsSLO "https://dl.k8s.io/release/${KUBECTL_VERSION}/bin/linux/${arch}/kubectl" \
    && curl -fsSLO "https://dl.k8s.io/release/${KUBECTL_VERSION}/bin/linux/${arch}/kubectl.sha256" \
    && echo "$(cat kubectl.sha256)  kubectl" | sha256sum -c - \
    && curl -fsSLO "https://get.helm.sh/helm-${HELM_VERSION}-linux-${arch}.tar.gz" \
    && curl -fsSLO "https://get.helm.sh/helm-${HELM_VERSION}-linux-${arch}.tar.gz.sha256sum" \
    && sha256sum -c "helm-${HELM_VERSION}-linux-${arch}.tar.gz.sha256sum" \
    && tar -xzf "helm-${HELM_VERSION}-linux-${arch}.tar.gz" --strip-components=1 "linux-${arch}/helm" \
    && install -m 0755 kubectl helm /usr/local/bin/
COPY --from=build /install /usr/local
RUN ansible-galaxy collection install --collections-path /usr/share/ansible/collections \
        "kubernetes.core:==${KUBERNETES_CORE_VERSION}"

FROM python:3.11-slim
COPY --from=build /install /usr/local
COPY --from=tools /usr/local/bin/kubectl /usr/local/bin/helm /usr/local/bin/
COPY --from=tools /usr/share/ansible/collections /usr/share/ansible/collections
COPY scenarios /opt/itbench/scenarios
# Bytecode now: the root filesystem is read-only at run time.
RUN python -m compileall -q /usr/local/lib/python3.11 /usr/share/ansible/collections \
    && groupadd --gid 10001 itbench \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin itbench
ENV ITBENCH_CATALOG__SCENARIOS_DIR=/opt/itbench/scenarios \
    ANSIBLE_COLLECTIONS_PATH=/usr/share/ansible/collections \
    HOME=/tmp \
    ANSIBLE_HOME=/tmp/.ansible \
    ANSIBLE_LOCAL_TEMP=/tmp/.ansible/tmp \
    HELM_CACHE_HOME=/tmp/.cache/helm \
    HELM_CONFIG_HOME=/tmp/.config/helm \
    HELM_DATA_HOME=/tmp/.local/share/helm \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
ENTRYPOINT ["itbench"]
CMD ["operator", "run"]
