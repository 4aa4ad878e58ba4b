"""The evaluation scenarios: data and requests (the render requests in the tables
scenarios.txt, scenarios_combine.txt, scenarios_graph.txt, scenarios_math.txt,
scenarios_select.txt and scenarios_forecast.txt, read by table()), answered by
graphite-web 1.1.10 (graphite_web.py) into ../fixtures/<name>.json (the data in
../fixtures/data.json), which tests/tally-graphite/graphite_web.rs replays against this
crate over its in-memory store. Run: python3 scenarios.py (with the environment
graphite_web.py needs); the fixtures are committed."""
import json, os, re, subprocess, sys
from urllib.parse import quote, urlencode

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


def grafana(request):
    """`request` as Grafana 11 posts a panel's query: its parameters as a form body, each
    percent-encoded."""
    body = urlencode([tuple(p) for p in request['params']], quote_via=quote)
    return {'path': '/render/', 'method': 'POST', 'params': [], 'body': body}


def table(name):
    """The requests of the scenario table `name` (a file beside this one), by fixture.

    A line is a comment (`#`), a fixture's start (`[name]`, then `@ key=value ...`: the
    defaults of its requests), `let NAME = text`, `! reason` (the request above is one
    graphite-web fails, or answers leniently, where this crate answers 400 on purpose: marked
    `differs` with the reason), or a request: `target ;; target ... @ key=value ...`, made by
    render() with `from`, `until` and `format` as its arguments and any other key a parameter
    after them in order; the word `post` sends it as Grafana does (grafana()). In a line,
    `{NAME}` stands for a `let`'s text and `{each NAME}` for each of its words in turn (a
    request each); a value `NOW-600` is that many seconds before NOW; a target written as a
    JSON string is that string (one of spaces only, say)."""
    fixtures, names, defaults, requests = {}, {}, [], None
    with open(os.path.join(HERE, name), encoding='utf-8') as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            if line.startswith('let '):
                key, text = line[4:].split('=', 1)
                names[key.strip()] = text.strip()
            elif line.startswith('!'):
                requests[-1] = dict(requests[-1], differs=expand(line[1:].strip(), names)[0])
            elif line.startswith('['):
                head, _, rest = line.partition(' @ ')
                requests = fixtures[head.strip()[1:-1]] = []
                defaults = rest.split()
            else:
                requests.extend(table_request(line, names, defaults))
    return fixtures


def expand(line, names):
    """`line` with its `{NAME}`s replaced, once for each word of an `{each NAME}`."""
    each = re.search(r'\{each (\w+)\}', line)
    if each:
        return [l for word in names[each.group(1)].split()
                for l in expand(line.replace(each.group(0), word, 1), names)]
    return [re.sub(r'\{(\w+)\}', lambda m: names.get(m.group(1), m.group(0)), line)]


def table_request(line, names, defaults):
    """The requests of a table's request line (more than one for an `{each NAME}`)."""
    out = []
    for line in expand(line, names):
        targets, _, rest = line.partition(' @ ')
        targets = [json.loads(t) if t.startswith('"') else t
                   for t in (t.strip() for t in targets.split(' ;; '))]
        args, post = {}, False
        for word in defaults + rest.split():
            if word == 'post':
                post = True
                continue
            key, value = word.split('=', 1)
            now = re.fullmatch(r'NOW([+-]\d+)?', value)
            args['fmt' if key == 'format' else 'frm' if key == 'from' else key] = \
                str(NOW + int(now.group(1) or 0)) if now else value
        request = render(targets if len(targets) > 1 else targets[0], **args)
        out.append(grafana(request) if post else request)
    return out


SCENARIOS = table('scenarios.txt')
# Its `template[host]` parameter stands before `from`, as render() puts none.
SCENARIOS['functions_phase2'].append(
    {'path': '/render/', 'params': [['target', 'template(app.$host.requests, host="web1")'], ['template[host]', 'db'], ['from', '-5min'], ['now', str(NOW)], ['format', 'json']]})
SCENARIOS.update({
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
})
SCENARIOS.update(table('scenarios_combine.txt'))
SCENARIOS.update(table('scenarios_graph.txt'))
SCENARIOS.update(table('scenarios_math.txt'))
SCENARIOS.update(table('scenarios_select.txt'))
SCENARIOS.update(table('scenarios_forecast.txt'))


def record(data, files, dirs, scenarios, keep=None):
    """Writes `files` and `dirs` into ../fixtures/<data>, then each of `scenarios` (fixture
    name: requests) with graphite-web's answers into ../fixtures/<name>.json; `keep(request,
    answer)`, if given, sees each pair before it is written."""
    fixtures = os.path.join(HERE, '..', 'fixtures')
    with open(os.path.join(fixtures, data), 'w') as f:
        json.dump({'now': NOW, 'files': files, 'dirs': dirs}, f, separators=(',', ':'))
    for name, requests in scenarios.items():
        spec = {'files': files, 'dirs': dirs, 'requests': requests}
        out = subprocess.run([PY, os.path.join(HERE, 'graphite_web.py')], input=json.dumps(spec),
                             capture_output=True, text=True, check=True).stdout
        answers = json.loads(out.strip().splitlines()[-1])
        for r, a in zip(requests, answers):
            if keep:
                keep(r, a)
            r['expected'] = a
        with open(os.path.join(fixtures, name + '.json'), 'w') as f:
            json.dump({'requests': requests}, f, indent=1)
        print(name, len(requests), 'requests', sum(1 for a in answers if a['status'] != 200), 'non-200')


def main():
    # The data every fixture's requests read, once.
    record('data.json', FILES, DIRS, SCENARIOS)
    import scenarios_transform
    scenarios_transform.main()


if __name__ == '__main__':
    main()
