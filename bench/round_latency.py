#!/usr/bin/env python3
"""Per-task consensus round latency from a devnet's node logs (logfmt).

For every task a node both seated and certified, the time from "committee seated" to
"task certified" on that node: execution plus the vote round (with commit-reveal: the
commitment, then the reveal). Prints p50/p90/p99/max over all (node, task) pairs.

With --phases, also where that time goes: for each phase the node logs (task queued, executed,
commitment sent, commitments admitted, window closed, reveal sent, votes counted, certified,
certificate and result stored), its time after "committee seated" on the same node; and how far
apart the nodes seated the same task (the round cannot be faster than its slowest member's
seating). Phases a node's version does not log are left out. Last, across nodes: how long the
last member's commitment took to reach the other nodes, and another member's reveal after it.

  bench/round_latency.py [--phases] /tmp/devnet-bench/node*/consensord.log
"""
import re
import sys
from collections import defaultdict
from datetime import datetime

LINE = re.compile(r'ts=(\S+) level=\S+ msg="([^"]+)" task=([0-9a-f]{64})(.*)')
RECORDS_MS = re.compile(r'records_ms=([0-9.]+)')

# Phases in round order; the n-th occurrence of a repeated message is its own phase.
PHASES = [
    ("task queued again", 1, "queued to execute"),
    ("task executed", 1, "executed (result written)"),
    ("commitment sent", 1, "own commitment sent"),
    ("commitment admitted", 1, "1st commitment admitted"),
    ("commitment admitted", 2, "2nd commitment admitted"),
    ("commitment admitted", 3, "3rd commitment admitted"),
    ("commit window closed", 1, "commit window closed"),
    ("reveal sent", 1, "own reveal sent"),
    ("vote counted", 1, "1st vote counted"),
    ("vote counted", 2, "2nd vote counted"),
    ("task certified", 1, "task certified"),
    ("certificate stored", 1, "certificate stored"),
    ("certified result stored", 1, "certified result stored (own)"),
    ("certified result fetched", 1, "certified result fetched"),
]


def parse_ts(text):
    return datetime.strptime(text.rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f").timestamp()


def pct(samples, p):
    return samples[min(len(samples) - 1, int(p / 100 * len(samples)))]


def summary(samples):
    samples = sorted(samples)
    return (f"p50 {pct(samples, 50)*1000:7.1f} ms  p90 {pct(samples, 90)*1000:7.1f} ms  "
            f"p99 {pct(samples, 99)*1000:7.1f} ms  max {samples[-1]*1000:7.1f} ms  (n={len(samples)})")


def main(args):
    phases = "--phases" in args
    paths = [a for a in args if a != "--phases"]
    samples = []
    events = []  # per node: task -> msg -> [timestamps]
    writes = defaultdict(list)  # msg -> records_ms of its batch
    for path in paths:
        seen = defaultdict(lambda: defaultdict(list))
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = LINE.match(line)
                if not m:
                    continue
                ts, msg, task = parse_ts(m.group(1)), m.group(2), m.group(3)
                seen[task][msg].append(ts)
                if w := RECORDS_MS.search(m.group(4)):
                    writes[msg].append(float(w.group(1)) / 1000)
        events.append(seen)
        samples += [t["task certified"][0] - t["committee seated"][0]
                    for t in seen.values() if t.get("task certified") and t.get("committee seated")]
    if not samples:
        sys.exit("no task was both seated and certified in these logs")
    print(f"seated -> certified over {len(samples)} (node, task) pairs: {summary(samples)}")
    if not phases:
        return

    print("\nafter 'committee seated' on the same node (pairs that were seated and certified there):")
    for msg, nth, label in PHASES:
        offsets = []
        for seen in events:
            for t in seen.values():
                if t.get("task certified") and t.get("committee seated") and len(t.get(msg, [])) >= nth:
                    offsets.append(sorted(t[msg])[nth - 1] - t["committee seated"][0])
        if offsets:
            print(f"  {label:32s} {summary(offsets)}")
    spread = defaultdict(list)
    for seen in events:
        for task, t in seen.items():
            if t.get("committee seated"):
                spread[task].append(t["committee seated"][0])
    gaps = [max(v) - min(v) for v in spread.values() if len(v) > 1]
    if gaps:
        print(f"\nseating spread across nodes (last - first 'committee seated' of a task): {summary(gaps)}")
    for msg, values in sorted(writes.items()):
        print(f"record writes before '{msg}' (the batch's synced writes): {summary(values)}")
    critical_path(events)


def critical_path(events):
    """Across nodes, per task: when the last member's commitment left its node, how long the
    other nodes took to admit it (one gossip hop, queueing included), and the next reveal."""
    hop_first, hop_last, next_reveal = [], [], []
    tasks = set().union(*(seen.keys() for seen in events))
    for task in tasks:
        sent = sorted((seen[task]["commitment sent"][0], i) for i, seen in enumerate(events)
                      if seen.get(task) and seen[task].get("commitment sent"))
        if len(sent) < 3:
            continue
        last_sent, last_node = sent[-1]
        admitted = [sorted(seen[task]["commitment admitted"])[-1] - last_sent
                    for i, seen in enumerate(events)
                    if i != last_node and seen.get(task) and len(seen[task].get("commitment admitted", [])) >= len(sent)]
        if admitted:
            hop_first.append(min(admitted))
            hop_last.append(max(admitted))
        reveals = sorted(seen[task]["reveal sent"][0] for i, seen in enumerate(events)
                         if i != last_node and seen.get(task) and seen[task].get("reveal sent"))
        if reveals:
            next_reveal.append(reveals[0] - last_sent)
    if hop_first:
        print("\nthe last member's commitment, from 'commitment sent' on its node (tasks where every member committed):")
        print(f"  admitted by the first other node  {summary(hop_first)}")
        print(f"  admitted by the last other node   {summary(hop_last)}")
    if next_reveal:
        print(f"  another member's reveal sent      {summary(next_reveal)}")


if __name__ == "__main__":
    main(sys.argv[1:])
