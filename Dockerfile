# The cpci result service (FastAPI + SQLModel). No torch: the service only stores and analyses
# results. SQLite in the /var/lib/cpci volume by default; set CPCI_DATABASE_URL for PostgreSQL.
#
# The base image goes by digest, which no one can point at other content as a tag can be:
#   docker build --build-arg BASE_IMAGE=python:3.11-slim-bookworm@sha256:DIGEST -t cpci-service .
# (SECURITY.md says how to look the digest up and check it), or a local base made from signed
# Debian packages (scripts/make-base-image.sh, named localhost/...). Any Debian or Ubuntu with
# python3 >= 3.10 and venv will do. A plain tag is refused unless ALLOW_UNPINNED_BASE=true.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
ARG BASE_IMAGE
ARG ALLOW_UNPINNED_BASE=false
RUN case "$BASE_IMAGE" in \
      *@sha256:*|localhost/*) ;; \
      *) [ "$ALLOW_UNPINNED_BASE" = true ] || { \
           echo "BASE_IMAGE=$BASE_IMAGE is a tag, which can be moved to other content: pass" \
             "it by digest (NAME@sha256:..., see SECURITY.md) or a local base" \
             "(scripts/make-base-image.sh), or --build-arg ALLOW_UNPINNED_BASE=true" >&2; \
           exit 1; } ;; \
    esac
LABEL org.opencontainers.image.base.name="${BASE_IMAGE}"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/cpci/bin:$PATH
RUN python3 -m venv /opt/cpci

WORKDIR /src
# Dependencies first, so code changes do not reinstall them: every one pinned with its hashes in
# requirements/service.lock (pip-compile --generate-hashes over pyproject.toml; its header says
# how to make it again), and pip refuses any file whose hash is not there.
# Behind a TLS-intercepting proxy, pass its CA bundle: --build-arg PIP_CERT=/path (mounted).
ARG PIP_CERT
COPY requirements/service.lock ./
RUN pip install --require-hashes --requirement service.lock

# cpci itself, built by the locked setuptools: no build isolation, so nothing unhashed is fetched.
COPY pyproject.toml README.md ./
COPY cpci ./cpci
RUN pip install --no-deps --no-build-isolation . && rm -rf /src

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
