"""Targets and graphite-web 1.1.10's parse of them (its grammar_unsafe.py, parseAll=True),
as JSON lines [target, canonical text or null] for src/grammar/tests.rs's differential test:
python3 grammar_cases.py SEED COUNT. cases/grammar.jsonl holds seed 1's 2,000 (remake it after
changing this generator); the test also runs this script with seed 2 as it runs. Any Python
with graphite-web 1.1.10 and its pinned pyparsing does: the reference virtual environment
(scripts/requirements-graphite.txt), or GRAPHITE_WEBAPP naming a webapp directory."""
import os, sys, json, warnings
warnings.simplefilter('ignore')
# graphite-web's webapp directory if given, else the graphite package installed (the
# reference virtual environment's); the two settings these modules read, configured here.
if os.environ.get('GRAPHITE_WEBAPP'):
    sys.path.insert(0, os.environ['GRAPHITE_WEBAPP'])
from django.conf import settings
settings.configure(TIME_ZONE='UTC', UTF8_METRICS=False)
import random
from graphite.render.grammar_unsafe import grammar
import pyparsing

def expr(t):
    # t: a ParseResults with .template/.call/.pathExpression (an 'expression' group content)
    if t.template:
        tt = t.template
        inner = expr(tt)
        args = [lit(a) for a in (tt.args or [])]
        kws = ['%s=%s' % (k.argname, lit(k.args[0])) for k in (tt.kwargs or [])]
        return 'T(%s;%s;%s)' % (inner, ','.join(args), ','.join(kws))
    if t.call:
        return call(t.call, None)
    if t.pathExpression:
        return 'P(%s)' % t.pathExpression
    raise Exception('?')

def top(t):
    e = t.expression
    base = expr(e)
    for pc in (e.pipedCalls or []):
        base = call(pc.call if pc.call else pc, base)
    return base

def call(c, piped):
    args = [arg(a) for a in (c.args or [])]
    if piped is not None: args.insert(0, piped)
    kws = ['%s=%s' % (k.argname, arg(k.args[0])) for k in (c.kwargs or [])]
    return '%s(%s;%s)' % (c.funcname, ','.join(args), ','.join(kws))

def arg(a):
    if a.expression: return top(a)
    return lit(a)

def lit(t):
    if t.number:
        if t.number.integer: return 'I(%d)' % int(t.number.integer)
        if t.number.float: return 'F(%r)' % float(t.number.float)
        if t.number.scientific: return 'F(%r)' % float(t.number.scientific[0])
    if t.string: return 'S(%s)' % t.string[1:-1]
    if t.boolean: return 'B(%s)' % (t.boolean[0] == 'true')
    if t.none: return 'N'
    if t.infinity: return 'INF'
    raise Exception('lit?')


random.seed(int(sys.argv[1]) if len(sys.argv)>1 else 1)
atoms = ['a','a.b','a.*.c','x{a,b}','[0-9]','1','-1','1.5','1e5','1E-3','"s"',"'t'",'"a""b"','"\\1 A"','true','False','none','inf','Inf','=','a=b','b.c=d','\\(','\\,','$x','$1','-','1.5.3','5x','#','%','*','?']
seps = [',', ', ', ' ,', ',\n', ' ']
def gen(d):
    r = random.random()
    if d > 3 or r < 0.35:
        return random.choice(atoms)
    if r < 0.5:
        return random.choice(atoms) + random.choice(['.', '', '{', '}', '(', ')', ' ', '|']) + random.choice(atoms)
    name = random.choice(['f','sumSeries','g_1','template','x'])
    n = random.randint(0, 3)
    args = [gen(d+1) for _ in range(n)]
    k = random.randint(0, 2) if random.random() < 0.4 else 0
    kw = ['%s%s=%s' % (random.choice(['k','x','alpha']), random.choice(['',' ']), gen(d+1)) for _ in range(k)]
    allargs = args + kw
    if random.random() < 0.2: random.shuffle(allargs)
    body = ''.join((random.choice(seps) if i else '') + a for i, a in enumerate(allargs))
    s = name + random.choice(['(', ' (']) + body + random.choice([')', ')', ' )', ''])
    if random.random() < 0.15:
        s = s + random.choice([' | ', '|', ' |']) + 'g(' + gen(d+1) + ')'
    return s
for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 3000):
    s = random.choice(['', ' ', '\t']) + gen(0) + random.choice(['', ' ', '\n', ')', 'x'])
    try:
        print(json.dumps([s, top(grammar.parseString(s, parseAll=True))]))
    except pyparsing.ParseException:
        print(json.dumps([s, None]))
