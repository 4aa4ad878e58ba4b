"""WSGI entry point of the reference graphite-web that Tally's test harness starts.

graphite-web 1.1.10's function list (/functions, functions.functionInfo) calls
inspect.getargspec and inspect.formatargspec, which Python 3.11 removed. This
module puts both back, written over getfullargspec for the functions graphite
defines (positional parameters with defaults, *args, **kwargs), then hands over
to graphite's own WSGI application.
"""
import collections
import inspect

ArgSpec = collections.namedtuple('ArgSpec', 'args varargs keywords defaults')


def getargspec(func):
    spec = inspect.getfullargspec(func)
    return ArgSpec(spec.args, spec.varargs, spec.varkw, spec.defaults)


def formatargspec(args, varargs=None, varkw=None, defaults=None):
    defaults = tuple(defaults or ())
    first_default = len(args) - len(defaults)
    parts = []
    for i, name in enumerate(args):
        if i >= first_default:
            parts.append('%s=%r' % (name, defaults[i - first_default]))
        else:
            parts.append(name)
    if varargs is not None:
        parts.append('*' + varargs)
    if varkw is not None:
        parts.append('**' + varkw)
    return '(' + ', '.join(parts) + ')'


if not hasattr(inspect, 'getargspec'):
    inspect.getargspec = getargspec
if not hasattr(inspect, 'formatargspec'):
    inspect.formatargspec = formatargspec

from graphite.wsgi import application  # noqa: E402
