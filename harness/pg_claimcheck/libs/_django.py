"""What the Django queue libraries (django-tasks, django-q2) share: a Django project for the run, its
management commands as the library's own processes, and the recording task's recorder inside them.

A Django library is deployed as management commands of the user's project (`manage.py migrate`,
`manage.py db_worker`, `manage.py qcluster`), each a process that reads the project's settings. The
project here is `pg_claimcheck.libs.django_settings`, built from the environment this module gives each
process (DJANGO_ENV): the run's database and the library's apps and settings. The coordinator never
configures Django itself (a process configures it once, and a bench runs many databases): the schema
is made by `migrate`, the jobs enqueued by this module run as a command (`enqueue_command`), and the
workers are the library's commands (pg_claimcheck.libs._adapter.spawn_command).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import psycopg

from pg_claimcheck.errors import ClaimcheckError
from pg_claimcheck.libs._adapter import command_env

DJANGO_ENV = "CLAIMCHECK_DJANGO"
"""The run's project as JSON (dsn, apps, settings): read by pg_claimcheck.libs.django_settings."""
SETTINGS_MODULE = "pg_claimcheck.libs.django_settings"
COMMAND_TIMEOUT_S = 300.0
"""The longest `migrate` or the enqueue may take (a loaded machine, thousands of jobs)."""
_DSN_KEYS = {"dbname": "NAME", "user": "USER", "password": "PASSWORD", "host": "HOST", "port": "PORT"}


def database(dsn: str) -> dict:
    """A libpq connection string as Django's DATABASES entry: what Django has a key for in its keys, the rest
    (application_name, by which the sampler and the terminate fault find a worker's backends) in OPTIONS, which
    Django's PostgreSQL backend hands to psycopg as they are."""
    params = {k: v for k, v in psycopg.conninfo.conninfo_to_dict(dsn).items() if v is not None}
    entry: dict = {"ENGINE": "django.db.backends.postgresql", "OPTIONS": {}}
    for key, value in params.items():
        if key in _DSN_KEYS:
            entry[_DSN_KEYS[key]] = str(value)
        else:
            entry["OPTIONS"][key] = value
    return entry


def environment(dsn: str, apps: list[str], settings: dict, worker=None) -> dict[str, str]:
    """The environment of one of the run's Django processes: the project (and a worker's config)."""
    project = {"DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
               DJANGO_ENV: json.dumps({"dsn": dsn, "apps": apps, "settings": settings})}
    return command_env(worker, **project) if worker is not None else dict(os.environ, **project)


def manage(env: dict[str, str], *argv: str) -> str:
    """`manage.py ARGV` in the run's project (`python -m django`, which is what manage.py runs); its stdout."""
    done = subprocess.run([sys.executable, "-m", "django", *argv], env=env, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S)
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise ClaimcheckError(f"manage.py {' '.join(argv)} failed (exit {done.returncode}): "
                              f"{said[-1] if said else 'it said nothing'}")
    return done.stdout


def enqueue_command(env: dict[str, str], library: str, keys: range) -> list[str]:
    """Run `enqueue_here` of `library`'s adapter in a process of the run's project (see `main`): its job ids."""
    done = subprocess.run([sys.executable, "-m", __name__, library, str(keys.start), str(keys.stop)], env=env,
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        raise ClaimcheckError(f"enqueueing {library} jobs failed (exit {done.returncode}): "
                              f"{said[-1] if said else 'it said nothing'}")
    return json.loads(done.stdout)


def setup_here(env: dict[str, str]) -> None:
    """Configure Django in this process for the run's project (the producer of `lib --rate`, forked for one run)."""
    os.environ.update({k: env[k] for k in (DJANGO_ENV, "DJANGO_SETTINGS_MODULE")})
    import django

    django.setup()


def main(argv: list[str]) -> int:
    """`python -m pg_claimcheck.libs._django LIBRARY FIRST STOP`: enqueue keys FIRST..STOP-1 through the library's
    public API in the run's project, the job ids as JSON on stdout."""
    from pg_claimcheck.libs import load_adapter

    library, first, stop = argv
    import django

    django.setup()
    print(json.dumps(load_adapter(library).enqueue_here(range(int(first), int(stop)))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
