#!/bin/sh
# Start one process of the DRA Dashboard image. Every process reads DASHBOARD_* variables.
#   web      uvicorn (ASGI: HTTP and websockets, options in console/serve.py) on
#            0.0.0.0:${DASHBOARD_PORT:-8000}; no proxy headers: the app takes them from
#            DASHBOARD_TRUSTED_PROXIES only
#   worker   Celery worker (watchers and what-if jobs); run any number: each adopts free watch
#            leases itself when it consumes the watch queue (DASHBOARD_WORKER_QUEUES)
#   beat     Celery beat with django_celery_beat's DatabaseScheduler (optional; at most one)
#   migrate  apply database migrations, then exit (one-shot, before web/worker/beat)
#   manage   any manage.py command, e.g. `manage createsuperuser`
# Anything else is run as given.
# Logs: every process writes log records only, one JSON object a line with DASHBOARD_LOG_JSON=1
# (--quiet: Celery's banners are plain text; the worker logs their facts as one record instead).
set -eu
cd /app

command="${1:-web}"
[ "$#" -gt 0 ] && shift
case "$command" in
  web)
    exec python -m console.serve --host 0.0.0.0 --port "${DASHBOARD_PORT:-8000}" \
      console.asgi:application "$@"
    ;;
  worker)
    # Threads: each kind's watcher holds a slot for minutes while it waits on the API server, so
    # a process per slot would waste memory; 24 covers all 15 watchers (a lone survivor takes
    # every kind over) plus what-if jobs. A worker started without the watch queue in
    # DASHBOARD_WORKER_QUEUES runs jobs only and never adopts a watcher.
    exec celery -A dashboard --quiet worker --loglevel "${DASHBOARD_LOG_LEVEL:-INFO}" \
      --queues "${DASHBOARD_WORKER_QUEUES:-celery,${DASHBOARD_WATCH_QUEUE:-watchers}}" \
      --pool threads --concurrency "${DASHBOARD_WORKER_CONCURRENCY:-24}" "$@"
    ;;
  beat)
    exec celery -A dashboard --quiet beat --loglevel "${DASHBOARD_LOG_LEVEL:-INFO}" \
      --scheduler django_celery_beat.schedulers:DatabaseScheduler "$@"
    ;;
  migrate)
    exec python manage.py migrate --noinput "$@"
    ;;
  manage)
    exec python manage.py "$@"
    ;;
  *)
    exec "$command" "$@"
    ;;
esac
