#!/usr/bin/env python3
"""Peak memory of POST /v1/pois for large and hostile imports (not a test; results in BENCHMARKS.md).

    scripts/import-memory.py .build-release/release/enrichment-server

For each case a fresh server starts on a free port with an empty database (no sample POIs); the script reads the
server's resident-memory high-water mark (VmHWM) before and after the upload and prints the growth as a multiple
of the body size. Cases: realistic CSV and GeoJSON near the 64 MiB default limit, a 60 MB CSV line of commas,
21 million empty GeoJSON features, and three 20 MB CSV uploads at once.
"""
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time

MIB = 1024 * 1024


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def status_kb(pid, field):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def realistic_csv(size, seed):
    rng = random.Random(seed)
    rows = ["store_id,name,lat,lng,city,country_code,types,tags"]
    length = len(rows[0]) + 1
    index = 0
    while True:
        row = "gn-%d,%s %d,%.5f,%.5f,%s,%s,%s,%s" % (
            index, rng.choice(["Saint-Martin", "Springfield", "Villeneuve", "Newport", "Riverside"]), index,
            rng.uniform(-60, 70), rng.uniform(-180, 180), rng.choice(["Lyon", "Paris", "Osaka", "Lima"]),
            rng.choice(["FR", "US", "JP", "PE"]), rng.choice(["cafe", "shop;bakery", "museum"]), rng.choice(["", "open", "wifi;terrace"]))
        if length + len(row) + 1 > size:
            break
        rows.append(row)
        length += len(row) + 1
        index += 1
    return ("\n".join(rows) + "\n").encode(), index


def realistic_geojson(size, seed):
    rng = random.Random(seed)
    parts, length, index = [], 60, 0
    while True:
        feature = json.dumps({"type": "Feature", "properties": {
            "store_id": "s-%d" % index, "name": "Store %d" % index,
            "address": {"lines": ["%d Main Street" % index], "city": "Lyon", "zipcode": "69001", "country_code": "FR"},
            "types": ["cafe"], "tags": ["wifi"], "user_properties": {"rating": rng.randint(1, 5)}},
            "geometry": {"type": "Point", "coordinates": [round(rng.uniform(-180, 180), 5), round(rng.uniform(-60, 70), 5)]}},
            separators=(",", ":"))
        if length + len(feature) + 1 > size:
            break
        parts.append(feature)
        length += len(feature) + 1
        index += 1
    return ('{"type":"FeatureCollection","features":[' + ",".join(parts) + "]}").encode(), index


def post(port, body, content_type, results, slot):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    started = time.time()
    conn.request("POST", "/v1/pois", body=body, headers={"Content-Type": content_type})
    response = conn.getresponse()
    data = response.read()
    results[slot] = (response.status, time.time() - started, data[:160])


def run_case(binary, name, bodies, content_type):
    port = free_port()
    folder = tempfile.mkdtemp(prefix="import-mem-")
    env = dict(os.environ, ENRICH_PORT=str(port), ENRICH_DB=os.path.join(folder, "db.sqlite"),
               ENRICH_SAMPLE_POIS="false", ENRICH_LOG_LEVEL="error")
    server = subprocess.Popen([binary, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        baseline = status_kb(server.pid, "VmHWM")
        results = [None] * len(bodies)
        threads = [threading.Thread(target=post, args=(port, body, content_type, results, slot)) for slot, body in enumerate(bodies)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        peak = status_kb(server.pid, "VmHWM")
        kept = status_kb(server.pid, "VmRSS")
        total = sum(len(body) for body in bodies)
        growth = (peak - baseline) * 1024
        print("%-40s body %6.1f MiB  peak +%6.1f MiB = %5.2fx body; after: +%6.1f MiB  statuses %s  %.1f s" % (
            name, total / MIB, growth / MIB, growth / total, (kept - baseline) * 1024 / MIB,
            [result[0] for result in results], max(result[1] for result in results)))
        for result in results:
            if result[0] != 200:
                print("    %s" % result[2].decode(errors="replace"))
    finally:
        server.terminate()
        server.wait(timeout=30)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    limit = 64 * MIB - 4096
    csv, rows = realistic_csv(limit, 1)
    run_case(binary, "CSV, %d realistic rows" % rows, [csv], "text/csv")
    geojson, features = realistic_geojson(limit, 2)
    run_case(binary, "GeoJSON, %d realistic features" % features, [geojson], "application/json")
    run_case(binary, "CSV, one 60 MB line of commas", [b"store_id,lat,lng\n" + b"," * 60_000_000], "text/csv")
    empty = b'{"type":"FeatureCollection","features":[' + b",".join([b"{}"] * 21_000_000) + b"]}"
    run_case(binary, "GeoJSON, 21,000,000 empty features", [empty], "application/json")
    third, _ = realistic_csv(20 * MIB, 3)
    run_case(binary, "CSV, three 20 MiB uploads at once", [third, third, third], "text/csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
