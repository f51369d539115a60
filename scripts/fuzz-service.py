#!/usr/bin/env python3
"""Throws malformed and adversarial requests at a running enrichment-server and reports what broke.

Not a test (it runs for minutes); see BENCHMARKS.md, section "Reliability", for a recorded run.

    scripts/fuzz-service.py --server .build-release/release/enrichment-server      # starts its own server
    scripts/fuzz-service.py --url http://127.0.0.1:8080 --pid 1234         # a server you started

Every endpoint gets requests built from valid ones and then broken: type confusion in every field, extreme
numbers (1e300, -1e300, 1e19, Int64 bounds, -0, subnormals), deep nesting, invalid UTF-8, lone surrogates,
truncation, byte flips, duplicate keys, odd methods and content types, hostile device ids and query strings.
Reported: crashes (the process is gone or stops accepting), 5xx answers, hangs (no answer within --timeout),
answers that are not the JSON error shape, and memory growth (RSS of the server before, at its peak, after).
Exit status 1 when anything but memory growth was found.
"""
import argparse
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
import urllib.parse

INT64_MAX = 9223372036854775807
INT64_MIN = -9223372036854775808
NUMBERS = [0, -0.0, 1, -1, 299, 300, 301, 1e300, -1e300, 1e19, -1e19, INT64_MAX, INT64_MIN, INT64_MAX + 1,
           INT64_MIN - 1, 2 ** 53, 2 ** 53 + 1, 1.5, -1.5, 1e-320, 5e-324, 1700000000, 1700000000000, 253402300799,
           253402300800, 90, 90.0000001, -90.0000001, 180.0000001, 1e15, 9e15, 9.1e15]
RAW_NUMBERS = ["1e400", "-1e400", "1E+2", "-0", "0.0e0", "123456789012345678901234567890", "1.7976931348623157e309",
               "4.9e-325", "00", "01", "1.", ".5", "+1", "0x10", "NaN", "Infinity", "-Infinity"]
STRINGS = ["", " ", "x" * 5000, "\u0000", "\ud800", "é", "😀", "1700000000", "1e300", "-1", "null", "location",
           "%00", "../../etc/passwd", "a:b", "{{name}}", "' OR 1=1 --", "\\", "\"", "\n"]


def random_scalar(rng):
    kind = rng.randrange(6)
    if kind == 0:
        return rng.choice(NUMBERS)
    if kind == 1:
        return rng.choice(STRINGS)
    if kind == 2:
        return rng.choice([True, False, None])
    if kind == 3:
        return [rng.choice(NUMBERS) for _ in range(rng.randrange(4))]
    if kind == 4:
        return {rng.choice(STRINGS)[:20]: rng.choice(NUMBERS)}
    return rng.uniform(-1e6, 1e6)


def confuse(rng, value, depth=0):
    """Replaces some members of a JSON tree by values of other types."""
    if depth > 6:
        return value
    if isinstance(value, dict):
        out = {}
        for key, member in value.items():
            if rng.random() < 0.08:
                continue
            out[key] = random_scalar(rng) if rng.random() < 0.25 else confuse(rng, member, depth + 1)
        if rng.random() < 0.1:
            out[rng.choice(STRINGS)[:30]] = random_scalar(rng)
        return out
    if isinstance(value, list):
        return [random_scalar(rng) if rng.random() < 0.25 else confuse(rng, member, depth + 1) for member in value]
    return random_scalar(rng) if rng.random() < 0.3 else value


def payload(rng):
    aps = {"alert": {"title": "Hi", "body": "Nearby"}, "mutable-content": 1, "category": "location",
           "timestamp": int(time.time()) - rng.randrange(-100, 600)}
    doc = {"aps": aps}
    if rng.random() < 0.2:
        doc["timestamp"] = str(int(time.time()))
        doc["location"] = "1"
    return doc


def enrich_body(rng):
    doc = {"device_id": rng.choice(["dev-1", "dev-2", "fuzz-%d" % rng.randrange(1000)]), "payload": payload(rng)}
    if rng.random() < 0.5:
        doc["at"] = rng.choice(NUMBERS + [time.time()])
    if rng.random() < 0.3:
        doc["mode"] = rng.choice(["default", "woosmap", "other", 1])
    return doc


def locations_body(rng):
    items = []
    for _ in range(rng.randrange(1, 6)):
        items.append({"latitude": rng.uniform(-90, 90), "longitude": rng.uniform(-180, 180),
                      "utc_timestamp": time.time() - rng.randrange(1000),
                      "horizontal_accuracy": rng.uniform(0, 100), "location_context": "bg"})
    return {"locations": items}


def geojson_body(rng):
    features = []
    for index in range(rng.randrange(1, 4)):
        features.append({"type": "Feature", "properties": {
            "store_id": "fz-%d" % rng.randrange(50), "name": "Fuzz %d" % index,
            "address": {"lines": ["1 rue"], "city": "Lyon", "zipcode": "69000", "country_code": "FR"},
            "types": ["cafe"], "tags": ["t"], "user_properties": {"rating": 4}},
            "geometry": {"type": "Point", "coordinates": [rng.uniform(-180, 180), rng.uniform(-90, 90)]}})
    return {"type": "FeatureCollection", "features": features}


def csv_body(rng):
    rows = ["store_id,name,lat,lng,city"]
    for index in range(rng.randrange(1, 5)):
        cells = ["fz-c%d" % rng.randrange(50), "Fuzz", str(rng.uniform(-90, 90)), str(rng.uniform(-180, 180)), "Lyon"]
        if rng.random() < 0.3:
            cells[rng.randrange(len(cells))] = rng.choice(STRINGS + ["\"", ",,,,", "1e300", "nan"])
        if rng.random() < 0.1:
            cells += [""] * rng.randrange(1, 50)
        rows.append(",".join(cells))
    return ("\n".join(rows)).encode("utf-8", "surrogatepass")


def dumps(rng, value):
    text = json.dumps(value, ensure_ascii=rng.random() < 0.5)
    data = text.encode("utf-8", "surrogatepass")
    return data


def break_bytes(rng, data):
    """Byte-level damage: truncation, flips, invalid UTF-8, deep nesting, duplicate keys, raw numbers."""
    choice = rng.randrange(9)
    if choice == 0 and data:
        return data[:rng.randrange(len(data))]
    if choice == 1 and data:
        buf = bytearray(data)
        for _ in range(rng.randrange(1, 5)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        return bytes(buf)
    if choice == 2:
        bad = rng.choice([b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80"])
        return data.replace(b'"Hi"', b'"H' + bad + b'"', 1) if b'"Hi"' in data else b'{"device_id":"' + bad + b'"}'
    if choice == 3:
        depth = rng.choice([100, 129, 1000, 100000])
        return b"[" * depth + b"]" * depth
    if choice == 4:
        return data.replace(b"{", b'{"aps":1,', 1)
    if choice == 5:
        raw = rng.choice(RAW_NUMBERS).encode()
        return data.replace(b"1", raw, 1)
    if choice == 6:
        return rng.choice([b"", b"null", b"[]", b"\"text\"", b"0", b"{", b"}", b"\xef\xbb\xbf{}", b"{}{}"])
    if choice == 7:
        return data.replace(b'"', b'"\\ud800', 1)
    return data + rng.choice([b" ", b"x", b"\x00", b",", b"]"])


def device_id(rng):
    return rng.choice(["dev-1", "a%3Ab", "%ff", "%", "x" * 200, "..", "a/b", "%2F", "%C3%BC", "a%20b", "dev-%d" % rng.randrange(100),
                       "%00", "-", "_", "a" * 128, "a" * 129])


def search_query(rng):
    params = {"lat": rng.choice(NUMBERS + STRINGS[:5]), "lng": rng.choice(NUMBERS + STRINGS[:5])}
    for name in ["radius", "stores_by_page", "page", "query", "types", "tags"]:
        if rng.random() < 0.4:
            params[name] = rng.choice(NUMBERS + STRINGS + ['type:"cafe"', '(((((', 'user.x:>1e300', 'NOT NOT',
                                                            'tag:"a" AND (city:"b" OR', '"' * 50, 'name:' + "x" * 3000])
    query = urllib.parse.urlencode(params, encoding="utf-8", errors="surrogatepass")
    if rng.random() < 0.1:
        query += rng.choice(["&%", "&lat=%zz", "&=&&", "&lat"])
    return query


def build_request(rng):
    """One request: (method, path, body bytes or None, headers)."""
    kind = rng.randrange(10)
    headers = {}
    ctype = "application/json"
    if kind <= 3:
        method, path = "POST", "/v1/enrich"
        body = dumps(rng, confuse(rng, enrich_body(rng)) if rng.random() < 0.7 else enrich_body(rng))
    elif kind <= 5:
        method, path = "POST", "/v1/devices/%s/locations" % device_id(rng)
        body = dumps(rng, confuse(rng, locations_body(rng)))
    elif kind == 6:
        method, path, body = rng.choice(["GET", "DELETE"]), rng.choice(["/v1/devices/%s/location", "/v1/devices/%s"]) % device_id(rng), None
    elif kind == 7:
        method, path = "POST", "/v1/pois"
        if rng.random() < 0.5:
            body = dumps(rng, confuse(rng, geojson_body(rng)))
        else:
            body, ctype = csv_body(rng), "text/csv"
            if rng.random() < 0.3:
                path += "?" + rng.choice(["map=geonames", "map=store_id%3D%40row", "map=bogus", "id_prefix=x", "map="])
    elif kind == 8:
        method, path, body = "GET", "/stores/search/?" + search_query(rng), None
    else:
        method = rng.choice(["TRACE", "PUT", "PATCH", "OPTIONS", "HEAD", "DELETE", "GET", "POST"])
        path = rng.choice(["/health", "/health/", "//health", "/metrics", "/v1/enrich", "/v1/pois", "/nope", "/v1/devices/x",
                           "/stores/search/", "/" + "a" * 5000])
        body = None if rng.random() < 0.5 else b"{}"
    if body is not None and rng.random() < 0.35:
        body = break_bytes(rng, body)
    if rng.random() < 0.05:
        ctype = rng.choice(["text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1",
                            "multipart/form-data", "", "application/geo+json"])
    if body is not None and ctype:
        headers["Content-Type"] = ctype
    return method, path, body, headers


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.sent = 0
        self.by_status = {}
        self.server_errors = []
        self.hangs = []
        self.bad_shape = []
        self.connection_failures = 0
        self.peak_rss = 0

    def note(self, status):
        with self.lock:
            self.sent += 1
            self.by_status[status] = self.by_status.get(status, 0) + 1


def worker(args, seed, count, tally, stop):
    rng = random.Random(seed)
    host, port = args.host, args.port
    conn = http.client.HTTPConnection(host, port, timeout=args.timeout)
    for _ in range(count):
        if stop.is_set():
            return
        method, path, body, headers = build_request(rng)
        # A request line that is not ASCII is sent as raw UTF-8 bytes (http.client refuses to).
        path = path.encode("utf-8", "surrogatepass").decode("latin-1")
        if args.api_key:
            headers["Authorization"] = "Bearer " + args.api_key
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            status = response.status
        except socket.timeout:
            with tally.lock:
                tally.hangs.append((method, path[:120], (body or b"")[:200]))
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=args.timeout)
            continue
        except (ConnectionError, http.client.HTTPException, OSError):
            # The server may close a connection on purpose (malformed HTTP); a dead server is seen below.
            with tally.lock:
                tally.connection_failures += 1
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=args.timeout)
            if not server_alive(args):
                stop.set()
                with tally.lock:
                    tally.server_errors.append(("CRASH", method, path[:120], (body or b"")[:300]))
            continue
        tally.note(status)
        if status >= 500:
            with tally.lock:
                tally.server_errors.append((status, method, path[:120], (body or b"")[:300], data[:300]))
        elif status >= 400 and method != "HEAD":
            try:
                document = json.loads(data)
                if status == 422 and "rejected" in document:
                    pass  # an all-rejected location batch: the documented ingest result
                else:
                    error = document["error"]
                    assert isinstance(error["reason"], str) and isinstance(error["message"], str)
            except Exception:
                with tally.lock:
                    tally.bad_shape.append((status, method, path[:120], data[:200]))
        if response.getheader("Connection", "").lower() == "close":
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=args.timeout)


def server_alive(args):
    if args.pid and not os.path.exists("/proc/%d" % args.pid):
        return False
    for _ in range(20):
        try:
            with socket.create_connection((args.host, args.port), timeout=2) as sock:
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if sock.recv(12).startswith(b"HTTP/1.1 200"):
                    return True
        except OSError:
            pass
        time.sleep(0.25)
    return False


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="base URL of a running server (with --pid for crash and memory checks)")
    parser.add_argument("--pid", type=int, help="process id of that server")
    parser.add_argument("--server", help="enrichment-server binary to start on a free port with a throwaway database")
    parser.add_argument("--count", type=int, default=100_000, help="requests to send (default 100000)")
    parser.add_argument("--workers", type=int, default=8, help="concurrent connections (default 8)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds before a request counts as a hang")
    parser.add_argument("--api-key", help="bearer key, when the server requires one (else read from ENRICH_API_KEY)")
    args = parser.parse_args()
    args.api_key = args.api_key or os.environ.get("ENRICH_API_KEY")

    process = None
    if args.server:
        args.host, args.port = "127.0.0.1", free_port()
        folder = tempfile.mkdtemp(prefix="fuzz-")
        env = dict(os.environ, ENRICH_PORT=str(args.port), ENRICH_DB=os.path.join(folder, "fuzz.sqlite"),
                   ENRICH_LOG_LEVEL="error")
        process = subprocess.Popen([args.server, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(folder, "server.log"), "w"))
        args.pid = process.pid
        print("server pid %d on port %d, log in %s" % (process.pid, args.port, folder), file=sys.stderr)
    elif args.url:
        parts = urllib.parse.urlsplit(args.url)
        args.host, args.port = parts.hostname, parts.port or 80
    else:
        parser.error("give --server or --url")
    if not server_alive(args):
        print("the server does not answer /health", file=sys.stderr)
        return 2

    tally = Tally()
    stop = threading.Event()
    rss_start = rss_kb(args.pid) if args.pid else None
    started = time.time()
    per_worker = [args.count // args.workers + (1 if index < args.count % args.workers else 0) for index in range(args.workers)]
    threads = [threading.Thread(target=worker, args=(args, args.seed * 1000 + index, per_worker[index], tally, stop))
               for index in range(args.workers)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        time.sleep(1)
        if args.pid:
            tally.peak_rss = max(tally.peak_rss, rss_kb(args.pid) or 0)
        sys.stderr.write("\r%d/%d sent, %d 5xx, %d hangs" % (tally.sent, args.count, len(tally.server_errors), len(tally.hangs)))
        sys.stderr.flush()
    elapsed = time.time() - started
    sys.stderr.write("\n")
    alive = server_alive(args)
    rss_end = rss_kb(args.pid) if args.pid else None

    crashes = [error for error in tally.server_errors if error[0] == "CRASH"] + ([] if alive else [("CRASH", "at end")])
    five_xx = [error for error in tally.server_errors if error[0] != "CRASH"]
    print("requests answered: %d in %.1f s (%.0f/s), seed %d" % (tally.sent, elapsed, tally.sent / max(elapsed, 1e-9), args.seed))
    print("by status: " + ", ".join("%d: %d" % item for item in sorted(tally.by_status.items())))
    print("connections closed by the server: %d" % tally.connection_failures)
    print("crashes: %d" % len(crashes))
    print("5xx: %d" % len(five_xx))
    print("hangs (> %.0f s): %d" % (args.timeout, len(tally.hangs)))
    print("4xx not in the JSON error shape: %d" % len(tally.bad_shape))
    if rss_start:
        print("server RSS: start %.1f MiB, peak %.1f MiB, end %.1f MiB" % (rss_start / 1024, tally.peak_rss / 1024, (rss_end or 0) / 1024))
    for title, items in [("crash", crashes), ("5xx", five_xx), ("hang", tally.hangs), ("bad shape", tally.bad_shape)]:
        for item in items[:5]:
            print("  %s: %r" % (title, item))
    if process:
        process.terminate()
        process.wait(timeout=10)
    return 1 if crashes or five_xx or tally.hangs or tally.bad_shape else 0


if __name__ == "__main__":
    sys.exit(main())
