"""The transform, moving-window and time functions' scenarios: their own data
(../fixtures/transform_data.json: gauges with gaps, counters with resets and wraps, runs of
nulls, several steps, many hosts) and requests, answered by graphite-web 1.1.10
(graphite_web.py) into ../fixtures/transform_*.json, which
tests/tally-graphite/graphite_web_transform.rs replays against this crate and
tests/tally-graphite/live_graphite_web_transform.rs sends to a running graphite-web. scenarios.py runs main(); run alone: python3 scenarios_transform.py (with the
environment graphite_web.py needs, see README.md). A request marked `differs` is one where
graphite-web fails (or uses a value its own validation refused) and this crate answers 400;
the body kept of graphite-web's 500 page is its exception's last line."""
import html, json, os, random, re, subprocess
from urllib.parse import quote, urlencode

from scenarios import HERE, NOW, PY, render

A3 = [[10, 360], [60, 1440], [600, 1008]]


def slots(step, points, span_points=None):
    """The slot timestamps of an archive, newest first, within its retention before NOW."""
    last = NOW - NOW % step
    return [last - i * step for i in range(min(points, span_points or points))]


def archive_data(archives, value, spans=None):
    """Each archive's [ts, value] points; `value(ts, step)` None leaves the slot empty."""
    data = []
    for i, (step, points) in enumerate(archives):
        span = spans[i] if spans else None
        data.append([[ts, v] for ts in slots(step, points, span)
                     for v in [value(ts, step)] if v is not None])
    return data


def wave(seed, gaps=0, hole=None):
    """Values going up and down around zero; a gap every `gaps` slots, and none in `hole`
    (a range of slot numbers modulo 50)."""
    def value(ts, step):
        k = ts // step
        if gaps and (k + seed) % gaps == 0:
            return None
        if hole and hole[0] <= k % 50 < hole[1]:
            return None
        return round(((k * 7 + seed * 13) % 23) * 1.25 - 3.0, 2)
    return value


def counter_reset(gaps):
    """A counter rising by 3.7 to 6.7 every 10 s and reset to zero every 10,000 s (last
    3,000 s before NOW), a gap every `gaps` slots."""
    def value(ts, step):
        k = ts // step
        if gaps and k % gaps == 0:
            return None
        tick = ts // 10
        return round(((tick + 300) % 1000) * 3.7 + (tick % 7) * 0.5, 2)
    return value


def counter_wrap(low, high, spike=False):
    """A counter of 7.5 per 10 s wrapping from below `high` to `low`; with `spike`, a value
    far above `high` every 50 slots."""
    def value(ts, step):
        k = ts // step
        if spike and k % 50 == 0:
            return 5000.0
        return round((ts // 10 * 7.5) % (high - low) + low, 2)
    return value


def sparse(ts, step):
    """Runs of 1 to 5 nulls between runs of values, a run of 4 nulls at the newest end."""
    k = ts // step
    if ts > NOW - 4 * step:
        return None
    if k % 21 in (2, 5, 6, 9, 10, 11, 14, 15, 16, 17):
        return None
    if k % 43 in range(20, 25):
        return None
    return round((k % 13) * 1.5 - 4.0, 2)


def big(ts, step):
    k = ts // step
    return 1e15 + k * 123456.789 if k % 2 else round(k % 9 * 1e-7, 9)


FILES = {
    'tx.gauge.a': {'archives': A3, 'data': archive_data(A3, wave(1, gaps=5), [360, 720, 432])},
    'tx.gauge.b': {'archives': A3, 'data': archive_data(A3, wave(2, gaps=3, hole=(20, 30)), [360, 720, 432])},
    'tx.gauge.c': {'archives': A3, 'data': archive_data(A3, wave(3), [360, 720, 432])},
    'tx.counter.a': {'archives': A3, 'data': archive_data(A3, counter_reset(7), [360, 720, 432])},
    'tx.counter.b': {'archives': A3, 'data': archive_data(A3, counter_wrap(0, 1000, spike=True), [360, 720, 432])},
    'tx.counter.c': {'archives': A3, 'data': archive_data(A3, counter_wrap(100, 1000), [360, 720, 432])},
    'tx.sparse': {'archives': [[10, 360], [60, 1440]], 'data': archive_data([[10, 360], [60, 1440]], sparse, [360, 480])},
    'tx.coarse': {'archives': [[60, 1440]], 'data': archive_data([[60, 1440]], wave(7, gaps=4), [480])},
    'tx.big': {'archives': [[10, 360]], 'data': archive_data([[10, 360]], big)},
}
for n in range(1, 21):
    FILES['app.host%02d.requests' % n] = {
        'archives': [[10, 360], [60, 1440]],
        'data': archive_data([[10, 360], [60, 1440]], wave(n, gaps=n % 4 + 3), [180, 150]),
    }
DIRS = []


def grafana(target, frm, until, max_data_points):
    """A panel's query as Grafana 11 posts it: a form body, the target percent-encoded."""
    body = urlencode([('target', target), ('from', str(frm)), ('until', str(until)),
                      ('now', str(NOW)), ('format', 'json'),
                      ('maxDataPoints', str(max_data_points))], quote_via=quote)
    return {'path': '/render/', 'method': 'POST', 'params': [], 'body': body}


def differs(request, reason):
    return dict(request, differs=reason)


FAILS = 'graphite-web fails on it (500); a 400 here'
USES_REFUSED = 'graphite-web logs that its validation refuses the value and uses it anyway; a 400 here'

def mixed(seed, count):
    """`count` random nestings of these functions (two deep at most, odd parameters among
    them) over short ranges, the same for a seed; graphite-web's 500s among them marked
    `differs` by main()."""
    rng = random.Random(seed)
    series = ['tx.gauge.a', 'tx.gauge.*', 'tx.counter.*', 'tx.sparse', 'tx.coarse',
              'app.host0[1-3].requests', 'tx.big', 'tx.counter.c']
    aggs = ['"sum"', '"avg"', '"max"', '"min"', '"last"', '"median"', '"stddev"', '"count"',
            '"range"', '"diff"', '"avg_zero"', '"multiply"']
    intervals = ['"1min"', '"5min"', '"70s"', '"90s"', '"4min"', '"2min"', '"13min"', '"1h"']
    shifts = ['"1min"', '"5min"', '"1h"', '"-10min"', '"+2min"', '"1d"', '"2h"']
    windows = ['1', '2', '3', '5', '10', '"1min"', '"5min"', '"90s"', '"30min"', '0', '"10s"']
    calls = {
        'scaleToSeconds': lambda: ', ' + rng.choice(['1', '60', '2.5', '-10']),
        'offset': lambda: ', ' + rng.choice(['1', '-3.5', '1e6']),
        'absolute': lambda: '',
        'derivative': lambda: '',
        'integral': lambda: '',
        'perSecond': lambda: rng.choice(['', '', ', 999', ', minValue=100', ', 999, 100']),
        'nonNegativeDerivative': lambda: rng.choice(['', '', ', 999', ', minValue=100']),
        'summarize': lambda: ', ' + rng.choice(intervals) + rng.choice(
            ['', ', ' + rng.choice(aggs), ', %s, true' % rng.choice(aggs)]),
        'hitcount': lambda: ', ' + rng.choice(intervals) + rng.choice(['', ', true']),
        'movingAverage': lambda: ', ' + rng.choice(windows) + rng.choice(['', '', ', 0.5']),
        'movingSum': lambda: ', ' + rng.choice(windows) + rng.choice(['', ', 1']),
        'movingMax': lambda: ', ' + rng.choice(windows),
        'movingMin': lambda: ', ' + rng.choice(windows),
        'timeShift': lambda: ', ' + rng.choice(shifts) + rng.choice(['', ', false', ', true, true']),
        'keepLastValue': lambda: rng.choice(['', ', 1', ', 3', ', 0']),
        'transformNull': lambda: rng.choice(['', ', -1', ', 2, tx.gauge.a', ', 0, tx.coarse']),
    }
    names = sorted(calls)

    def target(depth):
        if depth > 1 or rng.random() < 0.2:
            return rng.choice(series)
        name = rng.choice(names)
        inner = target(depth + 1)
        return '%s(%s%s)' % (name, inner, calls[name]())

    requests = []
    for _ in range(count):
        extra = {}
        if rng.random() < 0.25:
            extra['maxDataPoints'] = rng.choice([7, 20, 50])
        elif rng.random() < 0.1:
            extra['xFilesFactor'] = rng.choice(['0.3', '0.5', '1'])
        frm = rng.choice(['-5min', '-10min', '-20min', '-61min', '-2h', str(NOW - 1234)])
        until = rng.choice([None, None, '-2min', '+30min', str(NOW - 301)])
        requests.append(render(target(0), frm=frm, until=until, **extra))
    return requests


SCENARIOS = {
    'transform_points': [
        render('scaleToSeconds(tx.gauge.a, 60)', frm='-10min'),
        render('scaleToSeconds(tx.gauge.*, 1)', frm='-2h'),
        render('scaleToSeconds(tx.counter.a, 2.5)', frm='-5min'),
        render('scaleToSeconds(tx.big, 7)', frm='-5min'),
        render('scaleToSeconds(tx.gauge.b, -30)', frm='-3min'),
        render('offset(tx.gauge.a, 10)', frm='-5min'),
        render('offset(tx.gauge.*, -2.5)', frm='-5min'),
        render('offset(tx.gauge.b, "1e3")', frm='-5min'),
        render('offset(tx.gauge.a, 0.1)', frm='-3min'),
        render('absolute(tx.gauge.*)', frm='-5min'),
        render('absolute(offset(tx.gauge.a, -10))', frm='-5min'),
        render('derivative(tx.gauge.a)', frm='-10min'),
        render('derivative(tx.counter.a)', frm='-2h'),
        render('integral(tx.gauge.b)', frm='-10min'),
        render('integral(tx.counter.a)', frm='-12h'),
        render('derivative(integral(tx.gauge.a))', frm='-10min'),
        render('perSecond(tx.counter.a)', frm='-30min'),
        render('perSecond(tx.counter.*)', frm='-3h'),
        render('perSecond(tx.counter.b, 999)', frm='-20min'),
        render('perSecond(tx.counter.c, 999, 100)', frm='-10min'),
        render('perSecond(tx.counter.c, minValue=100)', frm='-10min'),
        render('perSecond(tx.big)', frm='-5min'),
        render('nonNegativeDerivative(tx.counter.a)', frm='-1h'),
        render('nonNegativeDerivative(tx.counter.b, 999)', frm='-30min'),
        render('nonNegativeDerivative(tx.counter.c, maxValue=999, minValue=100)', frm='-20min'),
        render('nonNegativeDerivative(tx.counter.b, minValue=50)', frm='-20min'),
        render('nonNegativeDerivative(tx.gauge.c)', frm='-10min'),
        render('nonNegativeDerivative(tx.counter.*)', frm='-2d'),
        render('keepLastValue(tx.sparse)', frm='-20min'),
        render('keepLastValue(tx.sparse, 2)', frm='-20min'),
        render('keepLastValue(tx.sparse, 0)', frm='-20min'),
        render('keepLastValue(tx.sparse, inf)', frm='-20min'),
        render('keepLastValue(tx.sparse, -1)', frm='-20min'),
        render('keepLastValue(tx.sparse, "3")', frm='-20min'),
        render('keepLastValue(tx.sparse, limit=4)', frm='-3h'),
        render('keepLastValue(tx.gauge.*, 1)', frm='-10min'),
        render('transformNull(tx.sparse)', frm='-20min'),
        render('transformNull(tx.sparse, -1)', frm='-20min'),
        render('transformNull(tx.gauge.b, 0)', frm='-10min'),
        render('transformNull(tx.sparse, 5, tx.gauge.a)', frm='-20min'),
        render('transformNull(tx.sparse, 5, referenceSeries=tx.gauge.a)', frm='-20min'),
        render('transformNull(tx.gauge.b, 1.5, tx.sparse)', frm='-20min'),
        render('transformNull(tx.coarse, 0, tx.gauge.a)', frm='-30min'),
        render('transformNull(tx.gauge.a, 7, tx.coarse)', frm='-10min'),
        render('transformNull(tx.sparse, 2, nope.*)', frm='-10min'),
        render('transformNull(nope.*, 1)', frm='-10min'),
        render('scaleToSeconds(perSecond(tx.counter.a), 60)', frm='-10min'),
        render('aliasByNode(perSecond(tx.counter.*), 1)', frm='-10min'),
        render('sumSeries(perSecond(tx.counter.*))', frm='-10min'),
        render('perSecond(sumSeries(tx.counter.*))', frm='-10min'),
        render('perSecond(tx.counter.a)', frm='-1h', maxDataPoints=50),
        render('keepLastValue(tx.sparse)', frm='-1h', maxDataPoints=40, xFilesFactor='0.5'),
        render('absolute(nope.*)', frm='-10min'),
    ],
    'transform_moving': [
        render('movingAverage(tx.gauge.a, 5)', frm='-10min'),
        render('movingAverage(tx.gauge.a, "1min")', frm='-10min'),
        render('movingSum(tx.gauge.b, 10)', frm='-15min'),
        render('movingSum(tx.gauge.b, "5min")', frm='-30min'),
        render('movingMin(tx.gauge.*, 3)', frm='-5min'),
        render('movingMax(tx.gauge.*, "2min")', frm='-5min'),
        render('movingAverage(tx.gauge.b, 6, 0.5)', frm='-10min'),
        render('movingAverage(tx.gauge.b, "1min", xFilesFactor=0.9)', frm='-10min'),
        render('movingAverage(tx.gauge.b, 4)', frm='-10min', xFilesFactor='0.7'),
        render('movingAverage(tx.gauge.a, 10)', frm='-59min'),
        render('movingAverage(tx.gauge.a, "30min")', frm='-40min'),
        render('movingAverage(tx.gauge.a, 5)', frm='-2h'),
        render('movingSum(tx.coarse, "5min")', frm='-30min'),
        render('movingMax(tx.coarse, 2)', frm='-10min'),
        render('movingMin(tx.sparse, "1min")', frm='-3h'),
        render('movingAverage(app.*.requests, 5)', frm='-5min'),
        render('movingAverage(tx.gauge.a, 0)', frm='-5min'),
        render('movingAverage(tx.gauge.a, "5s")', frm='-5min'),
        render('movingAverage(tx.gauge.a, 2.5)', frm='-5min'),
        render('movingAverage(tx.gauge.a, true)', frm='-5min'),
        render('movingAverage(tx.gauge.a, -2)', frm='-5min'),
        render('movingAverage(tx.gauge.a, "-1min")', frm='-5min'),
        render('movingAverage(nope.*, 5)', frm='-5min'),
        render('movingAverage(timeShift(tx.gauge.a, "1h"), 5)', frm='-10min'),
        render('movingAverage(scale(tx.gauge.a, 2), "1min")', frm='-10min'),
        render('sumSeries(movingAverage(tx.gauge.*, 3))', frm='-10min'),
        render('movingAverage(sumSeries(tx.gauge.*), 3)', frm='-10min'),
        render('movingMax(perSecond(tx.counter.a), 4)', frm='-10min'),
        render('aliasByNode(movingSum(app.*.requests, "1min"), 1)', frm='-5min'),
        render('movingAverage(movingAverage(tx.gauge.a, 3), 3)', frm='-10min'),
        render('movingSum(transformNull(tx.sparse), 3)', frm='-10min'),
        render('template(movingAverage(tx.gauge.$x, 3), x="a")', frm='-10min'),
        render('movingAverage(tx.gauge.a, 5)', frm='-1h', maxDataPoints=20),
        render(['movingAverage(tx.gauge.a, 3)', 'tx.gauge.a'], frm='-5min'),
        render('movingAverage(consolidateBy(tx.gauge.a, "max"), 5)', frm='-1h', maxDataPoints=30),
        grafana('aliasSub(movingAverage(tx.gauge.a, "5min"), "(^.*$)", "\\1 A")', NOW - 3601, NOW + 1, 100),
        grafana('aliasSub(movingMax(app.*.requests, 10), "(^.*$)", "\\1 B")', NOW - 1801, NOW + 1, 50),
    ],
    'transform_time': [
        render('timeShift(tx.gauge.a, "5min")', frm='-10min'),
        render('timeShift(tx.gauge.a, "-5min")', frm='-10min'),
        render('timeShift(tx.gauge.a, "+5min")', frm='-30min', until='-20min'),
        render('timeShift(tx.gauge.a, "1h")', frm='-30min'),
        render('timeShift(tx.gauge.a, "1d")', frm='-1h'),
        render('timeShift(tx.gauge.a, "2h")', frm='-10min'),
        render('timeShift(tx.gauge.a, "5min", false)', frm='-10min'),
        render('timeShift(tx.gauge.*, "10min", resetEnd=false)', frm='-5min'),
        render('timeShift(tx.gauge.a, "1h", false)', frm='-30min'),
        render('timeShift(tx.gauge.a, "1h", true, true)', frm='-10min'),
        render('timeShift(tx.gauge.a, "1h")', frm='-10min', until='+1h'),
        render('timeShift(tx.gauge.a, "1h", false)', frm='-10min', until='+1h'),
        render('timeShift(nope.*, "1h")', frm='-10min'),
        render('timeShift(tx.gauge.a, "30d")', frm='-10min'),
        render('aliasByNode(timeShift(app.*.requests, "10min"), 1)', frm='-3min'),
        render('summarize(tx.gauge.a, "1min")', frm='-10min'),
        render('summarize(tx.gauge.a, "1min", "avg")', frm='-10min'),
        render('summarize(tx.gauge.b, "1min", "average")', frm='-10min'),
        render('summarize(tx.gauge.b, "1min", "max")', frm='-10min'),
        render('summarize(tx.gauge.b, "1min", "min")', frm='-10min'),
        render('summarize(tx.gauge.b, "1min", "last")', frm='-10min'),
        render('summarize(tx.gauge.b, "1min", "current")', frm='-10min'),
        render('summarize(tx.gauge.b, "1min", "count")', frm='-10min'),
        render('summarize(tx.gauge.b, "2min", "median")', frm='-10min'),
        render('summarize(tx.gauge.b, "2min", "stddev")', frm='-10min'),
        render('summarize(tx.gauge.b, "2min", "range")', frm='-10min'),
        render('summarize(tx.gauge.b, "2min", "rangeOf")', frm='-10min'),
        render('summarize(tx.gauge.b, "2min", "diff")', frm='-10min'),
        render('summarize(tx.gauge.c, "1min", "multiply")', frm='-10min'),
        render('summarize(tx.gauge.b, "1min", "multiply")', frm='-10min'),
        render('summarize(tx.gauge.b, "2min", "avg_zero")', frm='-10min'),
        render('summarize(tx.gauge.b, "2min", "total")', frm='-10min'),
        render('summarize(tx.gauge.a, "5min", "sum", true)', frm='-17min'),
        render('summarize(tx.gauge.b, "2min", "average", true)', frm='-13min'),
        render('summarize(tx.gauge.b, "2min", alignToFrom=true)', frm='-13min'),
        render('summarize(tx.gauge.*, "1h")', frm='-1d'),
        render('summarize(tx.counter.a, "1d", "max")', frm='-7d'),
        render('summarize(tx.gauge.b, "1min", "sum")', frm='-10min', xFilesFactor='0.5'),
        render('summarize(tx.gauge.b, "1min", "sum")', frm='-10min', xFilesFactor='1'),
        render('summarize(tx.gauge.a, "7s")', frm='-2min'),
        render('summarize(tx.gauge.a, "90s", "avg", true)', frm='-10min'),
        render('summarize(tx.coarse, "10min", "avg")', frm='-2h'),
        render('summarize(perSecond(tx.counter.a), "5min", "sum")', frm='-1h'),
        render('aliasByNode(summarize(app.*.requests, "5min", "sum"), 1)', frm='-1h'),
        render('aliasByNode(summarize(app.*.requests, "30min", "avg"), 1)', frm='-6h'),
        render('summarize(nope.*, "1h")', frm='-10min'),
        render('summarize(tx.gauge.a, "1min")', frm='-1h', maxDataPoints=25),
        render('sumSeries(summarize(tx.gauge.*, "2min", "max"))', frm='-20min'),
        render('hitcount(tx.gauge.c, "1min")', frm='-10min'),
        render('hitcount(tx.gauge.a, "5min")', frm='-1h'),
        render('hitcount(tx.gauge.a, "7s")', frm='-2min'),
        render('hitcount(tx.gauge.a, "1h")', frm='-1d'),
        render('hitcount(tx.gauge.a, "1min", true)', frm='-10min'),
        render('hitcount(tx.gauge.a, "1h", true)', frm='-3h'),
        render('hitcount(tx.gauge.a, "1d", true)', frm='-2d'),
        render('hitcount(tx.gauge.a, "30s", true)', frm='-5min'),
        render('hitcount(tx.gauge.a, "2min", alignToInterval=true)', frm=str(NOW - 1007)),
        render('hitcount(tx.coarse, "5min")', frm='-1h'),
        render('hitcount(perSecond(tx.counter.a), "10min")', frm='-2h'),
        render('hitcount(nope.*, "1h")', frm='-10min'),
        render('hitcount(tx.gauge.b, "1min")', frm=str(NOW - 607), until=str(NOW - 13)),
        grafana('aliasSub(summarize(perSecond(tx.counter.a), "5min", "sum"), "(^.*$)", "\\1 A")', NOW - 86401, NOW + 1, 300),
        grafana('aliasSub(timeShift(tx.gauge.c, "1d"), "(^.*$)", "\\1 A")', '-6h', 'now', 500),
        grafana('aliasSub(hitcount(tx.counter.b, "1h"), "(^.*$)", "\\1 A")', '-1d', 'now', 1000),
    ],
    'transform_errors': [
        differs(render('summarize(tx.gauge.a, "1x")'), FAILS),
        differs(render('summarize(tx.gauge.a, "0s")'), FAILS),
        differs(render('summarize(tx.gauge.a)'), FAILS),
        differs(render('summarize(tx.gauge.a, 5)'), FAILS),
        differs(render('summarize(tx.gauge.a, "1h", "foo")'), 'graphite-web answers 400 too, with the message of the function rather than of its validation'),
        differs(render('hitcount(tx.gauge.a, "0min")'), FAILS),
        differs(render('hitcount(tx.gauge.a, "bad")'), FAILS),
        differs(render('movingAverage(tx.gauge.a, "abc")'), FAILS),
        differs(render('movingAverage(tx.gauge.a, "5")'), FAILS),
        differs(render('movingAverage(tx.gauge.a, tx.gauge.b)'), FAILS),
        differs(render('movingAverage(tx.gauge.a)'), FAILS),
        differs(render('movingAverage(tx.gauge.a, 5, "x")'), FAILS),
        differs(render('movingAverage(tx.gauge.a, 1000000000000)'), FAILS),
        differs(render('timeShift(tx.gauge.a, "")'), FAILS),
        differs(render('timeShift(tx.gauge.a, "1x")'), FAILS),
        differs(render('timeShift(tx.gauge.a, 5)'), FAILS),
        differs(render('timeShift(tx.gauge.a, "900000000d")'), FAILS),
        differs(render('scaleToSeconds(tx.gauge.a, "x")'), FAILS),
        differs(render('offset(tx.gauge.a, "x")'), FAILS),
        differs(render('offset(tx.gauge.a)'), FAILS),
        differs(render('absolute(tx.gauge.a, 1)'), FAILS),
        differs(render('keepLastValue(tx.sparse, "x")'), FAILS),
        differs(render('keepLastValue(tx.sparse, 2.5)'), USES_REFUSED),
        differs(render('transformNull(tx.sparse, "x")'), FAILS),
        differs(render('transformNull(tx.sparse, None)'), FAILS),
        differs(render('nonNegativeDerivative(tx.counter.a, 999)'), FAILS),
        differs(render('perSecond(tx.counter.a, minValue=0)'), FAILS),
        differs(render('perSecond(tx.counter.a, "x")'), FAILS),
        render('summarize(nope.*, "0s")'),
        render('movingAverage(nope.*, "abc")'),
        render('keepLastValue(tx.gauge.c, None)', frm='-5min'),
        differs(render('timeShift(tx.coarse, "1d")', frm='-1d', maxDataPoints=20),
                'graphite-web fails (500) consolidating the shifted series, shorter than the values its first bucket drops; a 400 here'),
    ],
    'transform_mixed': mixed(1, 100),
}


def exception_of(page):
    """The last `SomeError: message` of a Django error page."""
    found = re.findall(r'(\w+(?:Error|Exception))(?:</[^>]*>)?:? ?([^<\n]{0,200})', page)
    return html.unescape('%s: %s' % found[-1]) if found else page[:200]


def main():
    fixtures = os.path.join(HERE, '..', 'fixtures')
    with open(os.path.join(fixtures, 'transform_data.json'), 'w') as f:
        json.dump({'now': NOW, 'files': FILES, 'dirs': DIRS}, f, separators=(',', ':'))
    for name, requests in SCENARIOS.items():
        spec = {'files': FILES, 'dirs': DIRS, 'requests': requests}
        out = subprocess.run([PY, os.path.join(HERE, 'graphite_web.py')], input=json.dumps(spec),
                             capture_output=True, text=True, check=True).stdout
        answers = json.loads(out.strip().splitlines()[-1])
        for r, a in zip(requests, answers):
            if a['status'] == 500:
                a['body'] = exception_of(a['body'])
                r.setdefault('differs', 'graphite-web fails: ' + a['body'])
            r['expected'] = a
        with open(os.path.join(fixtures, name + '.json'), 'w') as f:
            json.dump({'requests': requests}, f, indent=1)
        print(name, len(requests), 'requests', sum(1 for a in answers if a['status'] != 200), 'non-200')


if __name__ == '__main__':
    main()
