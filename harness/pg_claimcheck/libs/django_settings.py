"""The minimal Django project a Django queue library runs in (`DJANGO_SETTINGS_MODULE` of its processes).

A Django library's workers are its own management commands (`manage.py db_worker`, `manage.py qcluster`),
which read the project's settings module. This is that module for one run, built from what the adapter
put in the process's environment (`pg_claimcheck.libs._django.environment`): the run's database and the
library's apps and settings. Nothing is written to disk, so a run leaves no project behind, and the DSN
(which may hold a password) travels in the environment, never on a command line.
"""
import json
import os

from pg_claimcheck.libs._adapter import say_hello
from pg_claimcheck.libs._django import DJANGO_ENV, database

_run = json.loads(os.environ[DJANGO_ENV])

SECRET_KEY = "claimcheck-not-secret"  # required by Django; nothing here signs anything
DEBUG = False  # db_worker reloads on code changes under DEBUG (its --reload default)
USE_TZ = True
DATABASES = {"default": database(_run["dsn"])}
INSTALLED_APPS = ["django.contrib.contenttypes", *_run["apps"]]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGGING_CONFIG = None  # the library's log lines would fill the worker's stderr, which the report shows
globals().update(_run["settings"])

say_hello()  # a worker command has loaded Django's settings: it is up (CommandWorker)
