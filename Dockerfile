# The cpci result service (FastAPI + SQLModel). No torch: the service only stores and analyses
# results. SQLite in the /var/lib/cpci volume by default; set CPCI_DATABASE_URL for PostgreSQL.
# Build: docker build -t cpci-service .   (or --build-arg BASE_IMAGE=<any Debian/Ubuntu with python3 >= 3.10>)
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/cpci/bin:$PATH
RUN python3 -m venv /opt/cpci

WORKDIR /src
# Dependencies first, from pyproject.toml alone: code changes do not reinstall them.
# Behind a TLS-intercepting proxy, pass its CA bundle: --build-arg PIP_CERT=/path (mounted).
ARG PIP_CERT
COPY pyproject.toml ./
RUN python3 -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + p['optional-dependencies']['service']))" > requirements.txt \
    && pip install --requirement requirements.txt

COPY README.md ./
COPY cpci ./cpci
RUN pip install --no-deps . && rm -rf /src

RUN groupadd --gid 10001 cpci && useradd --uid 10001 --gid 10001 --no-log-init --home-dir /var/lib/cpci --create-home cpci
USER 10001:10001
WORKDIR /var/lib/cpci
ENV CPCI_HOST=0.0.0.0 \
    CPCI_PORT=8000 \
    CPCI_DATABASE_URL=sqlite:////var/lib/cpci/cpci.db
VOLUME ["/var/lib/cpci"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('CPCI_PORT', '8000'), timeout=4)"]
# `cpci serve` applies the database migrations before it starts listening.
CMD ["cpci", "serve"]
