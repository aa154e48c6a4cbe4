# One image for every process of the DRA Dashboard: web (uvicorn, ASGI), Celery worker, Celery beat
# and the one-shot migrate. Pick the process with the first argument (see deploy/entrypoint.sh):
#   docker run IMAGE web | worker | beat | migrate | manage <command> ...
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    # Run from the source tree: settings find templates/ and static/ beside the apps.
    PYTHONPATH=/app \
    DJANGO_SETTINGS_MODULE=dashboard.settings \
    DASHBOARD_STATIC_ROOT=/app/staticfiles \
    DASHBOARD_VAR_DIR=/tmp/dra-dashboard

WORKDIR /app

# Dependencies first (exact pins from constraints.txt), so code changes reuse this layer.
COPY pyproject.toml constraints.txt ./
COPY dashboard/__init__.py dashboard/__init__.py
COPY inventory/__init__.py inventory/__init__.py
COPY claims/__init__.py claims/__init__.py
RUN python -m venv "$VIRTUAL_ENV" \
    && pip install -c constraints.txt . \
    && pip uninstall --yes dra-dashboard

# Every package pyproject.toml lists (tests/deploy/test_image.py builds /app from these lines).
COPY manage.py ./
COPY dralib dralib
COPY dashboard dashboard
COPY inventory inventory
COPY claims claims
COPY console console
COPY demo demo
COPY templates templates
COPY static static
COPY deploy/entrypoint.sh /usr/local/bin/dra-dashboard

# Static files are collected at build time (compressed, served by WhiteNoise), and every module is
# byte-compiled because the root filesystem is read-only at run time. The key only lets settings
# load for this step: it is not an ENV, so it is not in the image's environment and never signs
# anything. The in-memory database keeps settings from creating a SQLite file (and a root-owned
# DASHBOARD_VAR_DIR) in the image.
RUN DASHBOARD_SECRET_KEY=build-only-collectstatic-key-never-used-at-run-time \
    DASHBOARD_DATABASE_URL=sqlite:///:memory: \
    python manage.py collectstatic --noinput -v0 \
    && python -m compileall -q .
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /nonexistent dashboard

# Non-root; the root filesystem can be mounted read-only (only /tmp must be writable).
USER 10001:10001
EXPOSE 8000
ENTRYPOINT ["dra-dashboard"]
CMD ["web"]
