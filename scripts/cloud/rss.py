#!/usr/bin/python3
"""Prints the total resident memory (MB) of the given pids and all their descendants, each counted once."""

import os
import sys


def children_map():
    kids = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main(argv):
    kids = children_map()
    seen, todo = set(), [int(p) for p in argv[1:] if p.isdigit()]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo.extend(kids.get(pid, []))
    print(sum(rss_kb(p) for p in seen) // 1024)


if __name__ == "__main__":
    main(sys.argv)
