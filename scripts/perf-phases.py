#!/usr/bin/env python3
"""Sorts a profile's samples into the service's phases of enrich-and-send (not a test; used by benchmarks).

    perf script -i perf.data | python3 scripts/perf-phases.py delivery

Each sample (a call stack) goes to the first phase, in the order below, whose pattern matches one of its frames.
SQLite has no frame pointers, so its samples lose their callers: they count as "sqlite (caller lost)", and the
phases' own figures hold only what they spend outside SQLite.
"""
import collections
import re
import sys

PHASES = {
    "delivery": [
        ("GET /v1/push/{id} (the client's polling)", r"SQLiteOutbox.*report|ReportView|ProgressView|PushSummary|confirmedCount|callbackStatus|SQLiteOutboxV6counts"),
        ("submit: registrations", r"activeRegistrations"),
        ("submit: outbox insert", r"SQLiteOutboxV7enqueue|SQLiteOutboxV6insert"),
        ("submit: request and the rest", r"DeliveryEngineC6submit|PushRoutes"),
        ("record: outbox update", r"SQLiteOutboxV8complete"),
        ("record: the rest", r"DeliveryEngineC6record"),
        ("claim", r"SQLiteOutboxV5claim"),
        ("last fixes", r"latestFixes"),
        ("push definitions", r"SQLiteOutboxV4push"),
        ("enrichment", r"Enricher|DeliveryEngineC7prepare|PayloadFitter|TextTemplate|StaticMap|PlacesIndex|LocalPlaces"),
        ("lane: planning and hand-off", r"DeliveryEngineC7process|DeliveryPlanner|APNsSender"),
        ("APNs client (HTTP/2, HPACK, TLS)", r"APNsConnection|APNsClient|HTTP2Wire|HPACK|NIOSSL|BoringSSL"),
        ("HTTP server", r"Hummingbird|HTTP1|NIOHTTP1|JSONParser"),
        ("sqlite (caller lost)", r"GRDB|sqlite3|libsqlite3"),
        ("event loops (other)", r"NIOPosix|NIOCore"),
        ("task scheduling", r"swift_task|swift_job|_dispatch"),
    ],
}


def main() -> None:
    phases = [(name, re.compile(pattern)) for name, pattern in PHASES[sys.argv[1] if len(sys.argv) > 1 else "delivery"]]
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    stack: list[str] = []

    def flush() -> None:
        nonlocal total
        if not stack:
            return
        total += 1
        text = "\n".join(stack)
        for name, pattern in phases:
            if pattern.search(text):
                counts[name] += 1
                return
        counts["other (allocation, locks, kernel)"] += 1

    for line in sys.stdin:
        if not line.strip():
            flush()
            stack.clear()
        elif line[0] in " \t":
            stack.append(line.strip())
    flush()
    for name, count in counts.most_common():
        print(f"{count / max(total, 1) * 100:6.1f}%  {name}")
    print(f"{total} samples")


if __name__ == "__main__":
    main()
