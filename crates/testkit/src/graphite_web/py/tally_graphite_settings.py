"""Settings of the reference graphite-web that Tally's test harness starts.

graphite.settings imports this module (GRAPHITE_SETTINGS_MODULE) in place of a
local_settings.py, so the installed package stays as PyPI ships it. Everything
lives under the harness's temporary directory, TALLY_GRAPHITE_DIR. The choices
make answers depend on the request and the whisper files only:

- UTC, DEBUG off, graphite-web's own error pages;
- a dummy cache: nothing rendered or found is ever served from a cache;
- the standard finder alone, on the whisper directory (no remote finder);
- no carbon-cache: no CarbonLink hosts, so whisper's points are merged with
  nothing (REPLICATION_FACTOR 0 lets the empty host list through; with the
  default 1, every fetch would log a traceback);
- the default tag database (SQLite, empty), so the tag routes answer;
- ENFORCE_INPUT_VALIDATION and UTF8_METRICS as the harness asks (graphite-web's
  defaults: both off).
"""
import os

_root = os.environ['TALLY_GRAPHITE_DIR']

SECRET_KEY = 'tally-testkit-reference-graphite'
TIME_ZONE = 'UTC'
DEBUG = False
URL_PREFIX = '/graphite'

CONF_DIR = os.path.join(_root, 'conf')
STORAGE_DIR = os.path.join(_root, 'storage')
WHISPER_DIR = os.path.join(STORAGE_DIR, 'whisper') + '/'
INDEX_FILE = os.path.join(STORAGE_DIR, 'index')
LOG_DIR = os.path.join(_root, 'log')

STORAGE_FINDERS = ('graphite.finders.standard.StandardFinder',)
CARBONLINK_HOSTS = []
REPLICATION_FACTOR = 0
CACHES = {'default': {'BACKEND': 'django.core.cache.backends.dummy.DummyCache'}}

ENFORCE_INPUT_VALIDATION = os.environ.get('TALLY_GRAPHITE_ENFORCE_INPUT_VALIDATION') == '1'
UTF8_METRICS = os.environ.get('TALLY_GRAPHITE_UTF8_METRICS') == '1'
