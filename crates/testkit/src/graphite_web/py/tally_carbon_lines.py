"""What carbon 1.1.10's plaintext receivers make of lines: the oracle of Tally's
carbon listener, run by Tally's test harness.

The receivers are carbon's own classes (carbon.protocols.MetricLineReceiver for
TCP, MetricDatagramReceiver for UDP) with carbon's default settings. Three
things around them are the harness's: the sink (carbon.events.metricReceived,
where carbon hands a datapoint on to its pipeline, records it instead), the
listener log (records carbon's message for an invalid line) and the clock
(carbon.protocols' time, read for a timestamp of -1, is fixed at argv[1]).

Input, one request per line on stdin: "tcp HEX" (one line, without its
newline, sent on a fresh connection) or "udp HEX" (one datagram). Output, per
request, events in order and then "end", fields separated by spaces:
  accepted HEX(path) repr(value) repr(timestamp)
  invalid HEX(carbon's log message)
  raised HEX(exception)   -- it escaped carbon's receiver
  closed HEX(reason)      -- carbon closed the connection itself
"""
import binascii
import sys

from carbon import events, log, protocols
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure


class FixedClock(object):
    def __init__(self, now):
        self.now = now

    def time(self):
        return self.now


def hexed(text):
    return binascii.hexlify(text.encode('utf-8')).decode('ascii')


def main():
    protocols.time = FixedClock(float(sys.argv[1]))
    recorded = []
    events.metricReceived.handlers = [
        lambda metric, datapoint: recorded.append(
            'accepted %s %r %r' % (hexed(metric), datapoint[1], datapoint[0]))
    ]
    listening = [False]

    def listener(message):
        if listening[0]:
            recorded.append('invalid ' + hexed(message))

    log.listener = listener

    for request in sys.stdin:
        kind, _, data = request.strip().partition(' ')
        data = binascii.unhexlify(data)
        del recorded[:]
        if kind == 'tcp':
            receiver = protocols.MetricLineReceiver()
            transport = StringTransport()
            receiver.makeConnection(transport)
            listening[0] = True
            try:
                receiver.dataReceived(data + b'\n')
            except Exception as e:
                recorded.append('raised ' + hexed('%s: %s' % (type(e).__name__, e)))
            listening[0] = False
            if transport.disconnecting:
                recorded.append('closed ' + hexed(
                    'line longer than %d bytes' % receiver.MAX_LENGTH))
            receiver.connectionLost(Failure(ConnectionDone()))
        elif kind == 'udp':
            receiver = protocols.MetricDatagramReceiver()
            listening[0] = True
            try:
                receiver.datagramReceived(data, ('127.0.0.1', 2003))
            except Exception as e:
                recorded.append('raised ' + hexed('%s: %s' % (type(e).__name__, e)))
            listening[0] = False
        else:
            raise SystemExit('unknown request kind %r' % kind)
        for event in recorded:
            sys.stdout.write(event + '\n')
        sys.stdout.write('end\n')
    sys.stdout.flush()


if __name__ == '__main__':
    main()
