"""The evaluation scenarios: data and requests, answered by graphite-web 1.1.10
(graphite_web.py) into ../fixtures/<name>.json (the data in ../fixtures/data.json), which
tests/tally-graphite/graphite_web.rs replays against
this crate over its in-memory store. Run: python3 scenarios.py (with the environment
graphite_web.py needs); the fixtures are committed."""
import json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
PY = os.environ.get('GRAPHITE_PYTHON', sys.executable)
NOW = 1700000000  # 2023-11-14 22:13:20 UTC


def series_data(archives, seed, gaps=5, span_points=None):
    """Values for each archive: slots within its retention before NOW, a gap every `gaps`."""
    data = []
    for step, points in archives:
        last = NOW - NOW % step
        n = min(points, span_points or points)
        pts = []
        for i in range(n):
            ts = last - i * step
            k = ts // step
            if gaps and (k + seed) % gaps == 0:
                continue
            pts.append([ts, round(((k * 7 + seed * 13) % 23) * 1.25 - 3.0, 2)])
        data.append(pts)
    return data


ARCH3 = [[10, 360], [60, 1440], [600, 1008]]
FILES = {
    'app.web1.requests': {'archives': ARCH3, 'data': series_data(ARCH3, 1)},
    'app.web2.requests': {'archives': ARCH3, 'data': series_data(ARCH3, 2, gaps=3)},
    'app.db.requests': {'archives': ARCH3, 'data': series_data(ARCH3, 3, gaps=0)},
    'app.empty.requests': {'archives': ARCH3, 'data': [[], [], []]},
    'app.mixed.fine': {'archives': [[10, 8640]], 'data': series_data([[10, 8640]], 4, span_points=720)},
    'app.mixed.coarse': {'archives': [[60, 1440]], 'data': series_data([[60, 1440]], 5)},
    'app.both': {'archives': [[60, 1440]], 'data': series_data([[60, 1440]], 6)},
    'app.both.child': {'archives': [[60, 1440]], 'data': series_data([[60, 1440]], 7)},
    'app.plus+sign': {'archives': [[60, 1440]], 'data': series_data([[60, 1440]], 8)},
    'other.load': {'archives': [[60, 1440]], 'data': series_data([[60, 1440]], 9)},
}
DIRS = ['app.emptydir']


def render(target, frm='-1h', until=None, fmt='json', **extra):
    targets = target if isinstance(target, list) else [target]
    params = [['target', t] for t in targets]
    if frm is not None:
        params.append(['from', frm])
    if until is not None:
        params.append(['until', until])
    params += [['now', str(NOW)], ['format', fmt]]
    for k, v in extra.items():
        params.append([k, str(v)])
    return {'path': '/render/', 'params': params}


SCENARIOS = {
    'render_basics': [
        render('app.web1.requests'),
        render('app.web1.requests', frm='-10min', until='-5min'),
        render('app.*.requests', frm='-30min'),
        render(['app.{web1,db}.requests', 'app.web2.requests'], frm='-15min'),
        render('app.web1.requests', frm='-2h'),
        render('app.web1.requests', frm='-3d', until='-2d'),
        render('app.db.requests', frm='-30d'),
        render('app.web1.requests', frm='-20min', until='+1h'),
        render('nope.*'),
        render('app.empty.requests', frm='-5min'),
        render('app.web1.requests', frm=str(NOW - 600), until=str(NOW - 300)),
        render('app.web1.requests', frm=str(NOW - 601), until=str(NOW - 299)),
        render('app.web1.requests', frm='-5min', until='now'),
        render('app.web1.requests', frm='21:00_20231114', until='22:00_20231114'),
        render('app.web1.requests', frm='20231113', until='20231114'),
        render('app.web1.requests', frm='yesterday', until='noon'),
        render('app.web1.requests', frm='-10min', noNullPoints=1),
        render('app.empty.requests', frm='-5min', noNullPoints=1),
        render('app.web1.requests', frm='-10min', fmt='csv'),
        render(['app.*.requests', 'sumSeries(app.*.requests)'], frm='-3min', fmt='csv'),
        render('app.web1.requests', frm='-10min', pretty=1),
        render('app.web1.requests', frm='-5min', until='-10min'),
        render('  '),
        render('app.web1.requests', frm='-5min', xFilesFactor='0.5', maxDataPoints=10),
    ],
    'render_max_data_points': [
        render('app.web1.requests', frm='-1d', maxDataPoints=100),
        render('app.web1.requests', frm='-1d', maxDataPoints=1),
        render('app.web1.requests', frm='-1h', maxDataPoints=7),
        render('app.web1.requests', frm='-1h', maxDataPoints=360),
        render('app.web1.requests', frm='-1h', maxDataPoints=359),
        render(['app.web1.requests', 'app.db.requests'], frm='-7d', maxDataPoints=50),
        render(['app.mixed.fine', 'app.mixed.coarse'], frm='-2h', maxDataPoints=30),
        render('consolidateBy(app.web1.requests, "sum")', frm='-1h', maxDataPoints=13),
        render('consolidateBy(app.web1.requests, "max")', frm='-1h', maxDataPoints=13),
        render('consolidateBy(app.web1.requests, "min")', frm='-1h', maxDataPoints=13),
        render('consolidateBy(app.web1.requests, "first")', frm='-1h', maxDataPoints=13),
        render('consolidateBy(app.web1.requests, "last")', frm='-1h', maxDataPoints=13),
        render('consolidateBy(app.web2.requests, "avg_zero")', frm='-1h', maxDataPoints=13),
        render('consolidateBy(app.web2.requests, "avg")', frm='-1h', maxDataPoints=13),
        render('app.web2.requests', frm='-1h', maxDataPoints=13, xFilesFactor='0.7'),
        render('app.web1.requests', frm='-1h', maxDataPoints=13, noNullPoints=1),
        render('app.web1.requests', frm='-1h', maxDataPoints='abc'),
    ],
    'functions_phase2': [
        render('sumSeries(app.*.requests)', frm='-10min'),
        render('sum(app.*.requests)', frm='-10min'),
        render('sumSeries(app.web1.requests, app.db.requests)', frm='-10min'),
        render('sumSeries(app.web1.requests)', frm='-10min'),
        render('sumSeries(app.mixed.*)', frm='-20min'),
        render('sumSeries(app.mixed.fine, app.web1.requests)', frm='-2h'),
        render('sumSeries(nope.*)', frm='-10min'),
        render('sumSeries(app.empty.requests)', frm='-5min'),
        render('sumSeries(app.web2.requests, app.db.requests)', frm='-10min', xFilesFactor='0.6'),
        render('alias(app.web1.requests, "front door")', frm='-5min'),
        render('alias(app.*.requests, \'all\')', frm='-5min'),
        render('aliasByNode(app.*.requests, 1)', frm='-5min'),
        render('aliasByNode(app.*.requests, 1, -1)', frm='-5min'),
        render('aliasByNode(app.*.requests, 7)', frm='-5min'),
        render('aliasByNode(app.*.requests, "name")', frm='-5min'),
        render('aliasByNode(sumSeries(app.*.requests), 0, 2)', frm='-5min'),
        render('aliasByNode(scale(sumSeries(app.*.requests), 2), 0)', frm='-5min'),
        render('aliasSub(app.*.requests, "(^.*$)", "\\1 A")', frm='-5min'),
        render('aliasSub(app.*.requests, "^app\\.([^.]*)\\..*", "\\1")', frm='-5min'),
        render('aliasSub(sumSeries(app.*.requests), "Series", "")', frm='-5min'),
        render('aliasSub(app.web1.requests, "e", "\\g<0>\\g<0>")', frm='-5min'),
        render('scale(app.web1.requests, 10)', frm='-5min'),
        render('scale(app.web1.requests, 0.5)', frm='-5min'),
        render('scale(app.web1.requests, -1.5e3)', frm='-5min'),
        render('scale(app.*.requests, "2")', frm='-5min'),
        render('scale(sumSeries(app.*.requests), 1234567)', frm='-5min'),
        render('constantLine(100)', frm='-1h'),
        render('constantLine(1.5)', frm='-1h', until='-59min'),
        render('constantLine(-2e-7)', frm=str(NOW - 3601), until=str(NOW)),
        render('aliasSub(constantLine(100), "(^.*$)", "\\1 A")', frm='-1h'),
        render('consolidateBy(app.web1.requests, "sum")', frm='-5min'),
        render('app.web1.requests|scale(2)|alias("piped")', frm='-5min'),
        render('template(app.$host.requests, host="web1")', frm='-5min'),
        render('template(scale(app.$host.requests, $f), host="db", f=3)', frm='-5min'),
        render('template(app.$1.requests, "web2")', frm='-5min'),
        render('aliasByNode(app.both, 1)', frm='-5min'),
        render('alias(app.web1.requests, "h\u00e9llo, \\"w\\"")', frm='-2min'),
        render('alias(app.web1.requests, "h\u00e9llo, \\"w\\"")', frm='-2min', fmt='csv'),
        render('alias(app.web1.requests, "NaN, Infinity,")', frm='-2min'),
        render('aliasByNode(aliasSub(app.*.requests, "app", "x.y"), 1, 0)', frm='-2min'),
        render('scale(scale(sumSeries(app.web1.requests, app.web2.requests), 2), 0.25)', frm='-2min'),
        render('sumSeries(sumSeries(app.web1.requests), scale(app.db.requests, -1))', frm='-2min'),
        render('consolidateBy(sumSeries(app.*.requests), "max")', frm='-2h', maxDataPoints=17),
        render('aliasByNode(app.*.requests, 1)', frm='-2h', maxDataPoints=17, fmt='csv'),
        render('app.both.*', frm='-5min'),
        {'path': '/render/', 'params': [['target', 'template(app.$host.requests, host="web1")'], ['template[host]', 'db'], ['from', '-5min'], ['now', str(NOW)], ['format', 'json']]},
    ],
    'render_errors': [
        render('foo(app.web1.requests)'),
        render(['app.web1.requests', 'nosuch(app.*)']),
        render('app.web1.requests', frm='-5m'),
        render('app.web1.requests', frm='garbage'),
        render('app.web1.requests', frm='-1h', until='-1h'),
        render('app.web1.requests', frm='now', until='now'),
        render('template(app.x, b.c)'),
        dict(render('sumSeries(app.*.requests, xFilesFactor=0.5)'), differs='graphite-web logs the unexpected keyword and fails calling the function (500)'),
        render('app.web1.requests', frm='-5min', noCache=1),
        render('app.web1.requests', frm='-5min', cacheTimeout=0),
        render('app.web1.requests', frm='-5min', cacheTimeout=300),
        render('app.web1.requests', xFilesFactor='abc'),
        render('app.web1.requests', cacheTimeout='x'),
    ],
    'find': [
        {'path': '/metrics/find/', 'params': [['query', 'app.*']]},
        {'path': '/metrics/find/', 'params': [['query', '*']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.web1.*']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.both*']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.both.*']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.{web1,db}']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.[a-w]*.requests']]},
        {'path': '/metrics/find/', 'params': [['query', '*.*.requests']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.pl*']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.nothing.*']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.*'], ['wildcards', '1']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.*.*'], ['leavesOnly', '1']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.*'], ['from', '-6h'], ['until', 'now']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.*'], ['format', 'completer']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.w'], ['format', 'completer']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.*.*'], ['format', 'nodelist'], ['position', '1']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.*'], ['accept', 'x']], 'accept': 'application/json, text/plain, */*'},
        {'path': '/metrics/find/', 'method': 'POST', 'params': [['from', '-6h'], ['until', 'now']], 'body': 'query=app.{web1,db}.*'},
        {'path': '/metrics/find/', 'method': 'POST', 'params': [], 'body': 'query=app.*&from=1699990000&until=1700000000'},
        {'path': '/metrics/find/', 'params': []},
        {'path': '/metrics/find/', 'params': [['query', '']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.*'], ['from', 'garbage']]},
        {'path': '/metrics/find/', 'params': [['query', 'app.*'], ['leavesOnly', 'x']]},
        {'path': '/metrics/expand/', 'params': [['query', 'app.*']]},
        {'path': '/metrics/expand/', 'params': [['query', 'app.*.requests'], ['query', 'other.*']]},
        {'path': '/metrics/expand/', 'params': [['query', 'app.*.requests'], ['query', 'other.*'], ['groupByExpr', '1']]},
        {'path': '/metrics/expand/', 'params': [['query', 'app.*'], ['leavesOnly', '1']]},
        {'path': '/metrics/expand/', 'params': []},
    ],
    'functions': [
        {'path': '/functions/', 'params': []},
        {'path': '/functions/', 'params': [['grouped', 'true']]},
        {'path': '/functions/', 'params': [['group', 'Alias'], ['pretty', '1']]},
        dict({'path': '/functions/', 'params': [['type', 'pie']]}, differs='no pie functions here'),
        {'path': '/functions/scale', 'params': []},
        {'path': '/functions/aliasByNode', 'params': []},
        {'path': '/functions/nosuch', 'params': []},
    ],
    'grafana': [
        {'path': '/render/', 'method': 'POST', 'params': [], 'body': 'target=aliasSub(app.web1.requests%2C%20%22(%5E.*%24)%22%2C%20%22%5C1%20A%22)&from=1699996400&until=1700000000&now=1700000000&format=json&maxDataPoints=1000'},
        {'path': '/render/', 'method': 'POST', 'params': [], 'body': 'target=aliasSub(sumSeries(app.*.requests)%2C%20%22(%5E.*%24)%22%2C%20%22%5C1%20A%22)&target=aliasSub(app.db.requests%2C%20%22(%5E.*%24)%22%2C%20%22%5C1%20B%22)&from=1699913599&until=1700000001&now=1700000000&format=json&maxDataPoints=300'},
        {'path': '/render/', 'method': 'POST', 'params': [], 'body': 'target=constantLine(100)&from=-1h&until=now&now=1700000000&format=json'},
        {'path': '/render/', 'method': 'POST', 'params': [], 'body': 'target=app.web1.requests&from=-6h&until=now&now=1700000000&format=json&maxDataPoints=500'},
    ],
}

SCENARIOS.update(__import__('scenarios_combine').scenarios(render))


def main():
    # The data every fixture's requests read, once.
    with open(os.path.join(HERE, '..', 'fixtures', 'data.json'), 'w') as f:
        json.dump({'now': NOW, 'files': FILES, 'dirs': DIRS}, f, separators=(',', ':'))
    for name, requests in SCENARIOS.items():
        spec = {'files': FILES, 'dirs': DIRS, 'requests': requests}
        out = subprocess.run([PY, os.path.join(HERE, 'graphite_web.py')], input=json.dumps(spec),
                             capture_output=True, text=True, check=True).stdout
        answers = json.loads(out.strip().splitlines()[-1])
        for r, a in zip(requests, answers):
            r['expected'] = a
        with open(os.path.join(HERE, '..', 'fixtures', name + '.json'), 'w') as f:
            json.dump({'requests': requests}, f, indent=1)
        print(name, len(requests), 'requests', sum(1 for a in answers if a['status'] != 200), 'non-200')
    import scenarios_transform
    scenarios_transform.main()


if __name__ == '__main__':
    main()
