#!/usr/bin/python3
"""Summarises a pytest JUnit XML report: one `RESULT <test> PASS|FAIL|SKIP <reason>` line per test, then counts.

Usage: junit_summary.py REPORT.xml [REPORT.xml ...] [--markdown OUT.md --title TITLE]
Several reports (one per module run in parallel) are read in the order given.
The reason is the first meaningful line of the failure (for HTTP errors, the client's message with the
status), so failures can be grouped by cause.
"""

import argparse
import re
import sys
import xml.etree.ElementTree as ET


def reason_of(element):
    """The exception a test ended with (its last line), without the conductor's port, which changes."""
    text = ((element.text or "") + "\n" + (element.get("message") or "")).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = next((line for line in reversed(lines) if re.match(r"^[\w.]+(Error|Exception|Failure|NotFound|Mismatch)", line)), "")
    return re.sub(r"http://127\.0\.0\.1:\d+", "", last or (lines[-1] if lines else ""))[:400]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("reports", nargs="+")
    parser.add_argument("--markdown")
    parser.add_argument("--title", default="results")
    args = parser.parse_args()
    rows = []
    cases = [case for report in args.reports for case in ET.parse(report).getroot().iter("testcase")]
    cases.sort(key=lambda case: f"{case.get('classname', '')}.{case.get('name', '')}")
    for case in cases:
        name = f"{case.get('classname', '')}.{case.get('name', '')}".split("functional.", 1)[-1]
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            rows.append((name, "FAIL", reason_of(failure)))
        elif skipped is not None:
            rows.append((name, "SKIP", (skipped.get("message") or "")[:200]))
        else:
            rows.append((name, "PASS", ""))
    for name, verdict, reason in rows:
        print(f"RESULT {name} {verdict} {reason}".rstrip())
    counts = {v: sum(1 for _, verdict, _ in rows if verdict == v) for v in ("PASS", "FAIL", "SKIP")}
    print(f"TOTAL passed={counts['PASS']} failed={counts['FAIL']} skipped={counts['SKIP']} of {len(rows)}")
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as out:
            out.write(f"# {args.title}\n\n")
            out.write(f"passed {counts['PASS']}, failed {counts['FAIL']}, skipped {counts['SKIP']} of {len(rows)}\n\n")
            out.write("| test | result | reason |\n|---|---|---|\n")
            for name, verdict, reason in rows:
                cell = reason.replace("|", "\\|")
                out.write(f"| `{name}` | {verdict} | {cell} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
