# The image `labkit export --k8s --image ...` runs: the pinned stack and labkit, nothing else.
#   docker build -t registry.example.com/pslab:0.1 . && docker push registry.example.com/pslab:0.1
# Every ps, worker and chief container runs it with its own TF_CONFIG in the environment.
FROM python:3.11-slim

WORKDIR /opt/pslab
COPY pyproject.toml README.md ./
COPY labkit ./labkit
RUN pip install --no-cache-dir . && useradd --uid 1000 --create-home pslab

# What `import labkit` sets too; here also for programs that import TensorFlow first.
ENV TF_USE_LEGACY_KERAS=1 GRPC_FAIL_FAST=use_caller TF_CPP_MIN_LOG_LEVEL=2 PYTHONUNBUFFERED=1
USER pslab
WORKDIR /home/pslab
# TensorFlow servers listen on every interface with no authentication: the manifests'
# NetworkPolicy admits only the cluster's own Pods to the TF ports.
EXPOSE 2222
CMD ["python", "-m", "labkit.runtime.server"]
