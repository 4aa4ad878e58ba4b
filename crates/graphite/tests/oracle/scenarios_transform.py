"""The transform, moving-window and time functions' scenarios: their own data
(../fixtures/transform_data.json: gauges with gaps, counters with resets and wraps, runs of
nulls, several steps, many hosts) and requests (the table scenarios_transform.txt, and
mixed()), answered by graphite-web 1.1.10
(graphite_web.py) into ../fixtures/transform_*.json, which
tests/tally-graphite/graphite_web_transform.rs replays against this crate and
tests/tally-graphite/live_graphite_web_transform.rs sends to a running graphite-web. scenarios.py runs main(); run alone: python3 scenarios_transform.py (with the
environment graphite_web.py needs, see README.md). A request marked `differs` is one where
graphite-web fails (or uses a value its own validation refused) and this crate answers 400;
the body kept of graphite-web's 500 page is its exception's last line."""
import html, random, re

from scenarios import NOW, record, render, table

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


def every(n, zero_first=False):
    """A value every `n` slots and nulls between (a source writing `n` times slower than the
    archive's step); with `zero_first`, the value of every 3rd such slot is 0."""
    def value(ts, step):
        k = ts // step
        if k % n:
            return None
        if zero_first and (k // n) % 3 == 0:
            return 0.0
        return round((k // n) % 11 * 2.5 + 1, 2)
    return value


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
    'tx.every6': {'archives': [[10, 360]], 'data': archive_data([[10, 360]], every(6))},
    'tx.every4z': {'archives': [[10, 360]], 'data': archive_data([[10, 360]], every(4, True))},
}
for n in range(1, 21):
    FILES['app.host%02d.requests' % n] = {
        'archives': [[10, 360], [60, 1440]],
        'data': archive_data([[10, 360], [60, 1440]], wave(n, gaps=n % 4 + 3), [180, 150]),
    }
DIRS = []


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


SCENARIOS = table('scenarios_transform.txt')
SCENARIOS['transform_mixed'] = mixed(1, 100)
SCENARIOS.update(table('scenarios_higher.txt'))


def exception_of(page):
    """The last `SomeError: message` of a Django error page."""
    found = re.findall(r'(\w+(?:Error|Exception))(?:</[^>]*>)?:? ?([^<\n]{0,200})', page)
    return html.unescape('%s: %s' % found[-1]) if found else page[:200]


def keep_exception(request, answer):
    """Of a 500, only its exception, and the request marked `differs` with it."""
    if answer['status'] == 500:
        answer['body'] = exception_of(answer['body'])
        request.setdefault('differs', 'graphite-web fails: ' + answer['body'])


def main():
    record('transform_data.json', FILES, DIRS, SCENARIOS, keep_exception)


if __name__ == '__main__':
    main()
