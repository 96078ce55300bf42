# Ferret's image (workers by default; `ferret serve`, the HTTP API, from the same image): slim, non-root,
# its dependencies installed from a pinned lock file (the serve extra's too) and Ferret itself from the wheel a
# build stage makes (one import root, `ferret`; the repository's worker/ and producer/ are mapped under it at
# build time). Stop grace must exceed the longest job (batch deadline 600 s + 2 s hard-timeout grace):
# ops/docker-compose.yml sets stop_grace_period: 11m.
FROM python:3.11-slim-bookworm AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY ferret ./ferret
COPY worker ./worker
COPY producer ./producer
RUN pip wheel --no-deps --wheel-dir /dist .

FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

COPY requirements.lock ./
RUN pip install --no-cache-dir -r requirements.lock

COPY --from=build /dist/ /dist/
RUN pip install --no-cache-dir --no-deps /dist/ferret_memory-*.whl \
    && rm -rf /dist \
    && useradd --create-home --uid 10001 --shell /usr/sbin/nologin ferret

USER 10001

EXPOSE 9100
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9100/metrics', timeout=4)"]
STOPSIGNAL SIGTERM
CMD ["ferret", "worker", "--metrics-port", "9100", "--metrics-host", "0.0.0.0"]
