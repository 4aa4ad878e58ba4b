"""graphite-web 1.1.10 answering requests in-process (Django's test client) over whisper
files built from a JSON spec: how the fixtures under ../fixtures are made.

Spec on stdin: {"files": {path: {"archives": [[step, points], ...], "data": [[[ts, value],
...] per archive]}}, "dirs": [path, ...], "requests": [{"path", "params": [[k, v]],
"method": "GET"|"POST", "body": raw body or null, "accept": header or null}]}; prints the
answers as JSON. Each archive is written slot by slot (no propagation between archives),
the first point written becoming the ring's base, as a fresh whisper file does.

Needs GRAPHITE_WEBAPP (graphite-web 1.1.10's `webapp` directory with a local_settings.py
pointing WHISPER_DIR at a scratch directory, `django-admin migrate --run-syncdb` done) and a
Python with Django 3.0, pytz, pyparsing, whisper 1.1.10, urllib3, six and django-tagging;
GRAPHITE_STUBS may name a directory holding an empty `cairo.py` (no image is rendered).
"""
import os, sys, json, shutil, struct
sys.path[:0] = [os.environ.get('GRAPHITE_WEBAPP', '/tmp/mini/webapp'), os.environ.get('GRAPHITE_STUBS', '/tmp/mini/stubs')]
os.environ['DJANGO_SETTINGS_MODULE'] = 'graphite.settings'
import inspect
if not hasattr(inspect, 'getargspec'):
    from collections import namedtuple
    ArgSpec = namedtuple('ArgSpec', 'args varargs keywords defaults')
    def getargspec(f):
        s = inspect.getfullargspec(f)
        return ArgSpec(s.args, s.varargs, s.varkw, s.defaults)
    inspect.getargspec = getargspec
if not hasattr(inspect, 'formatargspec'):
    def formatargspec(args, varargs=None, varkw=None, defaults=None):
        parts = []
        nd = len(defaults) if defaults else 0
        for i, a in enumerate(args):
            if defaults and i >= len(args) - nd:
                parts.append('%s=%r' % (a, defaults[i - (len(args) - nd)]))
            else:
                parts.append(a)
        if varargs: parts.append('*' + varargs)
        if varkw: parts.append('**' + varkw)
        return '(' + ', '.join(parts) + ')'
    inspect.formatargspec = formatargspec
import django
django.setup()
import whisper
from django.test import Client
from django.conf import settings

spec = json.load(sys.stdin)
root = settings.WHISPER_DIR
shutil.rmtree(root, ignore_errors=True)
os.makedirs(root)
for path, f in spec.get('files', {}).items():
    fs = os.path.join(root, *path.split('.')) + '.wsp'
    os.makedirs(os.path.dirname(fs), exist_ok=True)
    whisper.create(fs, [tuple(a) for a in f['archives']], xFilesFactor=0, aggregationMethod='average')
    info = whisper.info(fs)
    with open(fs, 'r+b') as fh:
        for archive, points in zip(info['archives'], f.get('data', [])):
            if not points: continue
            step = archive['secondsPerPoint']
            points = sorted((int(t) - int(t) % step, v) for t, v in points)
            base = points[0][0]
            for t, v in points:
                pos = ((t - base) // step) % archive['points']
                fh.seek(archive['offset'] + pos * 12)
                fh.write(struct.pack('!Ld', t, v))
    for d in f.get('dirs', []):
        os.makedirs(os.path.join(root, *d.split('.')), exist_ok=True)
for d in spec.get('dirs', []):
    os.makedirs(os.path.join(root, *d.split('.')), exist_ok=True)

client = Client(raise_request_exception=False)
out = []
for r in spec['requests']:
    extra = {}
    if r.get('accept'): extra['HTTP_ACCEPT'] = r['accept']
    params = r.get('params', [])
    from urllib.parse import urlencode
    qs = urlencode([tuple(p) for p in params])
    if r.get('method', 'GET') == 'POST':
        body = r.get('body')
        if body is None:
            body = urlencode([tuple(p) for p in r.get("form", [])])
        resp = client.generic('POST', r['path'] + ('?' + qs if qs else ''), body, content_type='application/x-www-form-urlencoded', **extra)
    else:
        resp = client.get(r['path'] + ('?' + qs if qs else ''), **extra)
    hdrs = {k: v for k, v in resp.items() if k in ('Content-Type', 'Pragma', 'Cache-Control')}
    out.append({'status': resp.status_code, 'headers': hdrs, 'body': resp.content.decode('utf-8', 'replace')})
print(json.dumps(out))
