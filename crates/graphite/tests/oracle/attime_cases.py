"""Time texts and graphite-web 1.1.10's reading of them (its attime.py in UTC), as JSON lines
[text, now, epoch or null, error or null] for src/attime/tests.rs's differential test:
python3 attime_cases.py SEED COUNT. cases/attime.jsonl holds seed 1's 2,000 (remake it after
changing this generator); the test also runs this script with seed 2 as it runs. Any Python
with graphite-web 1.1.10, Django and pytz does: the reference virtual environment
(scripts/requirements-graphite.txt), or GRAPHITE_WEBAPP naming a webapp directory."""
import os, sys, json, warnings
warnings.simplefilter('ignore')
# graphite-web's webapp directory if given, else the graphite package installed (the
# reference virtual environment's); the two settings these modules read, configured here.
if os.environ.get('GRAPHITE_WEBAPP'):
    sys.path.insert(0, os.environ['GRAPHITE_WEBAPP'])
from django.conf import settings
settings.configure(TIME_ZONE='UTC', UTF8_METRICS=False)
import calendar, random
from datetime import datetime, timezone
import pytz
from graphite.render.attime import parseATTime
random.seed(int(sys.argv[1]))
refs = ['', 'now', 'today', 'yesterday', 'tomorrow', 'noon', 'midnight', 'teatime', '6am', '11pm', '12am', '12pm', '3:30pm', '14:05', '8:00_20240229', '23:59_20231231', '20240101', '20241301', '19000101', '19010101', '01/02/24', '01/02/70', '12/31/1999', '02/30/2020', 'jan1', 'feb29', 'dec31', 'march15', 'mon', 'friday', 'sun', 'sunday', '1700000000', '0', '86400', 'noonyesterday', 'noontomorrow', 'midnight today', '6pmtoday', 'Today', 'NOW', ' now ', 'now_', 'x', '25:00', '1:2', 'jan', '13/01/20', '9am_20240101', '10:00am']
offs = ['', '-1h', '-5min', '+1d', '-1d', '-30s', '-2w', '-1mon', '-1y', '-1h30min', '-5m', '-5', '+', '-', '-1x', '-10minutes', '-3days', '-1week', '+2hours', '-1d2h', '--1h', '-1h-1h', '-999999999d', '-1sec', '-0d', '1d']
for _ in range(int(sys.argv[2])):
    s = random.choice(refs) + random.choice(offs)
    if random.random() < 0.1: s = random.choice(offs)
    now = random.choice([1700000000, 1709251199, 1704067200, 0, 86399, 1000000000, 1719792000])
    try:
        dt = parseATTime(s, pytz.utc, datetime.fromtimestamp(now, pytz.utc))
        print(json.dumps([s, now, calendar.timegm(dt.astimezone(pytz.utc).timetuple()), None]))
    except Exception as e:
        print(json.dumps([s, now, None, str(e)]))
