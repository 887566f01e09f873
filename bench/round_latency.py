#!/usr/bin/env python3
"""Per-task consensus round latency from a devnet's node logs (logfmt).

For every task a node both seated and certified, the time from "committee seated" to
"task certified" on that node: execution plus the vote round (with commit-reveal: the
commitment, then the reveal). Prints p50/p90/p99/max over all (node, task) pairs.

  bench/round_latency.py /tmp/devnet-bench/node*/consensord.log
"""
import re
import sys
from datetime import datetime

LINE = re.compile(r'ts=(\S+) level=\S+ msg="([^"]+)" task=([0-9a-f]{64})')


def parse_ts(text):
    return datetime.strptime(text.rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f").timestamp()


def main(paths):
    samples = []
    for path in paths:
        seated, certified = {}, {}
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = LINE.match(line)
                if not m:
                    continue
                ts, msg, task = parse_ts(m.group(1)), m.group(2), m.group(3)
                if msg == "committee seated":
                    seated.setdefault(task, ts)
                elif msg == "task certified":
                    certified.setdefault(task, ts)
        samples += [certified[t] - seated[t] for t in certified if t in seated]
    if not samples:
        sys.exit("no task was both seated and certified in these logs")
    samples.sort()

    def pct(p):
        return samples[min(len(samples) - 1, int(p / 100 * len(samples)))]

    print(f"seated -> certified over {len(samples)} (node, task) pairs: p50 {pct(50)*1000:.1f} ms, "
          f"p90 {pct(90)*1000:.1f} ms, p99 {pct(99)*1000:.1f} ms, max {samples[-1]*1000:.1f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
