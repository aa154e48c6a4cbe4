# One image for every process of the DRA Dashboard: web (Daphne, ASGI), Celery worker, Celery beat
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

COPY manage.py ./
COPY dashboard dashboard
COPY inventory inventory
COPY claims claims
COPY templates templates
COPY static static
COPY deploy/entrypoint.sh /usr/local/bin/dra-dashboard

# Static files are collected at build time (compressed, served by WhiteNoise); the key only lets
# settings load and is never used at run time.
RUN DASHBOARD_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput -v0 \
    && python -m compileall -q dashboard inventory claims \
    && useradd --uid 10001 --user-group --no-create-home --home-dir /nonexistent dashboard

# Non-root; the root filesystem can be mounted read-only (only /tmp must be writable).
USER 10001:10001
EXPOSE 8000
ENTRYPOINT ["dra-dashboard"]
CMD ["web"]
