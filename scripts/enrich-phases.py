#!/usr/bin/env python3
"""Sorts a profile of the enrichment server into the phases of one request (not a test; used by benchmarks).

    scripts/enrich-phases.py perf.data REQUESTS [PHASE]

Each sample (a call stack) goes to the phase of its innermost frame that belongs to one (a `swift_retain` inside
the places search counts as the places search). Phases are told by the function's own type, read from the
mangled name's start, so a function that only takes a type as an argument does not count as that type's. Prints
microseconds of CPU per request (REQUESTS is the number of requests the profile covers); with PHASE, also the
leaf functions and the matched frames of that phase.

Async functions lose their callers at a suspension point: a sample whose stack holds no frame of any phase is
counted as "task switches and scheduling" when it runs under `swift_job_run`, else as "other".
"""
import collections
import re
import subprocess
import sys

M = r"^\$s"  # a Swift symbol
CORE, SERVICE, ESS = r"14EnrichmentCore", r"17EnrichmentService", r"10Essentials"
PHASES = [
    ("places search", [CORE + r"\d+(SpatialIndex|PlacesIndex|PackedPOIs|LocalPlacesProvider|BoundedMaxHeap)",
                       CORE + r"10PlaceMatchV", CORE + r"3POIV", CORE + r"0A6ResultV7POIUsed"]),
    ("templates (body text)", [CORE + r"\d+(TextTemplate|BodyTemplate|CFormat|WoosmapBody)"]),
    ("map URL", [CORE + r"16StaticMapBuilder"]),
    ("answer writing (result JSON, payload)", [CORE + r"0A6Result", CORE + r"5DraftV", CORE + r"\d+(PayloadFitter|PayloadStencil)",
                                               ESS + r"\d+(JSONWriter|JSONObjectWriter)"]),
    ("fix report parse", [CORE + r"15OpenLocateBatch"]),
    ("location evaluation (regions, visits)", [r"17EnrichmentRuntime\d+(LocationEngine|RegionEvaluator|Visit)", r"12LocationCore"]),
    ("fix intake (batching)", [SERVICE + r"9FixIntake"]),
    ("fixes read or stored (cache, SQLite)", [CORE + r"15CachingFixStore", r"\d+SQLite\w*FixStore", r"4GRDB", r"^sqlite3"]),
    ("staleness", [CORE + r"\d+(StalenessPolicy|StalenessVerdict|TimestampReading)"]),
    ("request validation (members, payload)", [SERVICE + r"\d+(EnrichRequest|BodyMembers)", CORE + r"19NotificationPayload",
                                               SERVICE + r"8AppScope", CORE + r"8DeviceID"]),
    ("body read and JSON parse", [SERVICE + r"6JSONIO", ESS + r"\d+(JSONParser|JSONValue)"]),
    ("enricher (the rest of the flow)", [CORE + r"8Enricher", SERVICE + r"\d+(EnrichRoutes|EnrichAnswerer)", CORE + r"\d+(DeviceContexts?|SpanRecorder)"]),
    ("metrics", [SERVICE + r"14ServiceMetrics", r"\d+(CoreMetrics|Prometheus)"]),
    ("middlewares and router", [SERVICE + r"\d+\w*Middleware", SERVICE + r"\d+(RouteTable|RouteRecorder|RequestDeadlines|APIKeyRing)",
                                r"11Hummingbird"]),
    ("HTTP parse (llhttp)", [r"^c_nio_llhttp", r"7NIOHTTP1\d+(HTTPDecoder|BetterHTTPParser|HTTPServerPipelineHandler)", r"7NIOCore20ByteToMessage"]),
    ("response encode", [r"7NIOHTTP1\d+HTTPResponseEncoder", r"7NIOHTTP1\d+HTTPRequestEncoder"]),
    ("connection handlers (Hummingbird, ours)", [r"15HummingbirdCore", r"17NIOHTTPTypesHTTP1", SERVICE + r"\d+(ConnectionDeadlineHandler|RequestPartObserver|ConnectionRegistry|GuardedHTTP1Channel|EnrichOnEventLoop|HTTPDateCache)",
                                                 r"7NIOCore\d+NIOAsync"]),
    ("socket write (kernel)", [r"^do_writev$", r"^tcp_sendmsg", r"^sock_write_iter"]),
    ("socket read (kernel)", [r"^tcp_recvmsg", r"^sock_read_iter", r"^ksys_read$"]),
    ("task switches and scheduling", [r"^swift_task", r"AsyncTask", r"^finish_task_switch", r"^_dispatch", r"^swift::runJob",
                                      r"^futex", r"continuation"]),
    ("event loop (NIO, other)", [r"8NIOPosix", r"7NIOCore", r"epoll"]),
]
COMPILED = [(name, [re.compile(p if p.startswith("^") else M + p) for p in pats]) for name, pats in PHASES]


def phase_of(frame: str) -> str | None:
    for name, pats in COMPILED:
        if any(p.search(frame) for p in pats):
            return name
    return None


def samples(path: str):
    out = subprocess.run(["perf", "script", "-i", path, "-F", "ip,sym"], capture_output=True, text=True).stdout
    frames: list[str] = []
    for line in out.splitlines() + [""]:
        if not line.strip():
            if frames:
                yield frames
            frames = []
        else:
            frames.append(line.strip().split(" ", 1)[-1])


def classify(frames: list[str]) -> tuple[str, str]:
    for frame in frames:
        hit = phase_of(frame)
        if hit:
            return hit, frame
    if any("swift_job_run" in f for f in frames):
        return "task switches and scheduling", "(async resumption, callers lost)"
    return "other (runtime, allocation, kernel)", frames[0]


def main() -> None:
    path, requests = sys.argv[1], int(sys.argv[2])
    want = sys.argv[3] if len(sys.argv) > 3 else None
    rate = int(sys.argv[4]) if len(sys.argv) > 4 else 1999
    us = 1e6 / rate / requests
    counts: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    matched: collections.Counter[str] = collections.Counter()
    total = 0
    for frames in samples(path):
        total += 1
        name, frame = classify(frames)
        counts[name] += 1
        if name == want:
            leaves[frames[0][:120]] += 1
            matched[frame[:140]] += 1
    print(f"{requests} requests, {total * us:.1f} us of CPU per request (samples at {rate} Hz)")
    for name, n in counts.most_common():
        print(f"  {n * us:7.1f} us  {100 * n / total:5.1f}%  {name}")
    if want:
        print(f"-- {want}: leaf functions")
        for k, n in leaves.most_common(20):
            print(f"  {n * us:6.2f}  {k}")
        print(f"-- {want}: the frame that placed it")
        for k, n in matched.most_common(20):
            print(f"  {n * us:6.2f}  {k}")


if __name__ == "__main__":
    main()
