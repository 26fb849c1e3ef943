#!/usr/bin/env python3
"""Totals a torch profiler trace (chrome://tracing JSON, e.g. from `MTX_PROFILE=FILE mtx train ...`)
per op: self time (time not spent in nested ops), calls, share of the total.
  scripts/bench/profile_summary.py FILE [TOP]"""
import collections
import json
import sys


def main():
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30
    events = [e for e in json.load(open(path)) if e.get("ph") == "X"]
    by_thread = collections.defaultdict(list)
    for e in events:
        by_thread[e["tid"]].append(e)
    self_us, calls = collections.Counter(), collections.Counter()
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # [end, event, children time]
        def close(item):
            self_us[item[1]["name"]] += item[1]["dur"] - item[2]
            calls[item[1]["name"]] += 1
        for e in evs:
            while stack and stack[-1][0] <= e["ts"]:
                close(stack.pop())
            if stack:
                stack[-1][2] += e["dur"]
            stack.append([e["ts"] + e["dur"], e, 0.0])
        while stack:
            close(stack.pop())
    total = sum(self_us.values())
    print(f"total self time {total / 1e3:.1f} ms")
    for name, us in self_us.most_common(top):
        print(f"{us / 1e3:10.1f} ms {100 * us / total:6.2f}% {calls[name]:8d}  {name}")


if __name__ == "__main__":
    main()
