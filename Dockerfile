# kvplan service image.
#   docker build -t kvplan .
#   docker run -p 8000:8000 kvplan            # then http://localhost:8000/docs
# GPU probe variant (CUDA build of torch), for GPU nodes that calibrate a central planner:
#   docker build --target gpu -t kvplan-probe .
#   docker run --gpus all kvplan-probe kvplan probe --device cuda --report http://planner:8000 --token "$KVPLAN_ADMIN_TOKEN"
# Settings are KVPLAN_* environment variables (README); calibrations persist in /data (a volume).
#
# Base: python:3.11-slim pinned by digest (Python 3.11.16, the multi-arch index digest that
# `docker pull python:3.11-slim` resolved to). Bump the tag and the digest together, in both stages.

FROM python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7 AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/venv
COPY pyproject.toml README.md constraints.txt ./
COPY planner/ planner/
COPY templates/ templates/
COPY static/ static/
# The wheel carries static/ and templates/ inside the package (planner/_static, _templates).
# The `postgres` extra (psycopg, libpq inside its wheel) lets replicas share a PostgreSQL store.
# constraints.txt pins every dependency exactly, so two builds of one commit install the same;
# PIP_CONSTRAINT carries the pins into pip's isolated build of the wheel (hatchling) as well.
RUN PIP_CONSTRAINT=/src/constraints.txt /opt/venv/bin/pip install --no-cache-dir '/src[postgres]'

# The probe image: the same venv plus PyPI's CUDA build of torch (it bundles the CUDA runtime;
# the host needs the NVIDIA driver and container toolkit) and NVML bindings for clocks.
# torch is pinned to the version the test suite cross-checks against (pyproject's crosscheck
# extra). HOME is writable: torch and the CUDA runtime cache kernels under ~/.cache.
FROM python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7 AS gpu
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH \
    HOME=/home/kvplan
RUN groupadd --system --gid 10001 kvplan \
    && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /home/kvplan \
       --shell /usr/sbin/nologin kvplan
COPY --from=build /opt/venv /opt/venv
COPY constraints.txt constraints-gpu.txt /tmp/pins/
# Both constraint files: the service's pins stay as they are, and torch's open ranges are pinned.
RUN /opt/venv/bin/pip install --no-cache-dir -c /tmp/pins/constraints.txt -c /tmp/pins/constraints-gpu.txt \
       'torch==2.13.0' 'nvidia-ml-py==13.615.71' \
    && rm -rf /tmp/pins
USER 10001:10001
WORKDIR /home/kvplan
CMD ["kvplan", "probe", "--device", "cuda", "--json"]

# The service image (the default target: the last stage).
FROM python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7 AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH \
    KVPLAN_HOST=0.0.0.0 \
    KVPLAN_PORT=8000 \
    KVPLAN_DATA_DIR=/data
RUN groupadd --system --gid 10001 kvplan \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin kvplan \
    && mkdir -p /data \
    && chown 10001:10001 /data
COPY --from=build /opt/venv /opt/venv
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8000
# slim has no curl: probe /healthz with the image's own Python, where the server listens
# (KVPLAN_HOST and KVPLAN_PORT; a wildcard address is reached on loopback).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; h = os.environ.get('KVPLAN_HOST', '127.0.0.1').strip('[]'); h = {'': '127.0.0.1', '0.0.0.0': '127.0.0.1', '::': '::1'}.get(h, h); h = '[%s]' % h if ':' in h else h; urllib.request.urlopen('http://%s:%s/healthz' % (h, os.environ.get('KVPLAN_PORT', '8000')), timeout=4)"]
# One uvicorn process on KVPLAN_HOST:KVPLAN_PORT (0.0.0.0:8000); exec form, so SIGTERM reaches it.
CMD ["kvplan", "serve"]
