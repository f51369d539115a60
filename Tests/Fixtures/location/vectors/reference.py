#!/usr/bin/env python3
"""Checks that the recorded ZOI vectors are the spec's bits, independently of Swift and of any optimiser.

    python3 Tests/Fixtures/location/vectors/reference.py [NAME ...]     (default: every NAME.visits.json here)

A port of docs/LOCATION-RULES.md §2 (projection, density and gate, update, new component, priors, assignment,
removal) in Python, which evaluates every double operation as written (no FMA, no reassociation) and calls the C
library's pow, exp, log, sqrt and tan through math.* (§0 measured the same bits for Swift and Python on Linux). It
replays each NAME.visits.json and compares the numbers of NAME.zois.json bit for bit: mean, C, det, prior,
accumulator, age and visit ids. The time features and polygons (§3, §2.11) are left out: nothing in them feeds back
into these numbers. scripts/check-release-vectors.sh runs it before the release build's check.
"""
import json
import math
import os
import sys

R = 6378137.0
def lon2x(lon): return ((lon * math.pi) / 180) * R
def lat2y(lat): return math.log(math.tan(math.pi / 4 + ((lat * math.pi) / 180) / 2)) * R
GATE = -2 * math.log(1 - 0.95)

def quad(x0, x1, c):
    r0 = (0.0 + x0 * c[0]) + x1 * c[2]
    r1 = (0.0 + x0 * c[1]) + x1 * c[3]
    return (0.0 + r0 * x0) + r1 * x1

def outer(x0, x1, m):
    mx0 = (0.0 + m[0] * x0) + m[1] * x1
    mx1 = (0.0 + m[2] * x0) + m[3] * x1
    o00, o01, o10, o11 = 0.0 + mx0 * x0, 0.0 + mx0 * x1, 0.0 + mx1 * x0, 0.0 + mx1 * x1
    return [(0.0 + o00 * m[0]) + o01 * m[2], (0.0 + o00 * m[1]) + o01 * m[3],
            (0.0 + o10 * m[0]) + o11 * m[2], (0.0 + o10 * m[1]) + o11 * m[3]]

def density(px, py, z):
    s = quad(px - z["mx"], py - z["my"], z["C"])
    q = math.pow(math.sqrt(s), 2)
    return q, math.exp(-q / 2) / ((math.sqrt(z["det"]) * 2) * math.pi)

def update(z, px, py, f, total):
    c = z["C"]
    h = f * (z["prior"] / total)
    z["age"] += 1
    z["A"] += h
    w = h / z["A"]
    e0, e1 = px - z["mx"], py - z["my"]
    d0, d1 = w * e0, w * e1
    m0, m1 = d0 + z["mx"], d1 + z["my"]
    f0, f1 = px - m0, py - m1
    k1 = w / math.pow(1 - w, 2)
    n1 = [k1 * v for v in outer(f0, f1, c)]
    k2 = w / (1 - w)
    n2 = (k2 * quad(f0, f1, c)) + 1
    cd = [c[i] / (1 - w) - n1[i] / n2 for i in range(4)]
    n3 = outer(d0, d1, cd)
    t4 = 1 - quad(d0, d1, cd)
    new = [cd[i] + n3[i] / t4 for i in range(4)]
    dd1 = math.pow(1 - w, 2) * z["det"]
    dd3 = (k2 * quad(f0, f1, cd)) + 1
    det = (1 - quad(d0, d1, cd)) * (dd1 * dd3)
    z["mx"], z["my"] = m0, m1
    if det > 0:
        z["C"], z["det"] = new, det

def replay(visits):
    zois = []
    for v in visits:
        px, py = lon2x(v["longitude"]), lat2y(v["latitude"])
        dens = [density(px, py, z) for z in zois]
        total = 0.0
        for (q, f), z in zip(dens, zois): total += f * z["prior"]
        updated = False
        for (q, f), z in zip(dens, zois):
            if q <= GATE:
                update(z, px, py, f, total); updated = True
        if not updated:
            sigma = 2.0 * v["horizontal_accuracy"]
            inv = math.pow(sigma, -2)
            zois.append({"id": "zoi-" + v["id"], "mx": px, "my": py, "C": [inv * 1.0, inv * 0.0, inv * 0.0, inv * 1.0],
                         "det": math.pow(math.pow(sigma, 2), 2), "prior": 1.0, "A": 1.0, "age": 1.0, "ids": []})
        s = 0.0
        for z in zois: s += z["A"]
        for z in zois: z["prior"] = z["A"] / s
        winner, best = 0, -math.inf
        for j, z in enumerate(zois):
            u = density(px, py, z)[1] * z["prior"]
            if j == 0 or u > best: best, winner = u, j
        zois[winner]["ids"].append(v["id"])
        zois = [z for z in zois if z["ids"]]
    return zois

def check(folder, name):
    visits = json.load(open(f"{folder}/{name}.visits.json"))["visits"]
    got = replay(visits)
    lines = open(f"{folder}/{name}.zois.json").read().split("\n")[1:-2]
    want = [json.loads(l.rstrip(",")) for l in lines]
    bad = 0
    if len(got) != len(want): print(f"{name}: {len(got)} zones, file has {len(want)}"); return 1
    for g, w in zip(got, want):
        pairs = [("id", g["id"], w["id"]), ("mean_x", g["mx"], w["mean_x"]), ("mean_y", g["my"], w["mean_y"]),
                 ("covariance_det", g["det"], w["covariance_det"]), ("prior_probability", g["prior"], w["prior_probability"]),
                 ("accumulator", g["A"], w["accumulator"]), ("age", g["age"], w["age"]), ("visit_ids", g["ids"], w["visit_ids"])]
        pairs += [(f"covariance_inverse[{i}]", g["C"][i], w["covariance_inverse"][i]) for i in range(4)]
        for key, a, b in pairs:
            if a != b or (isinstance(a, float) and a.hex() != float(b).hex()):
                print(f"{name} {g['id']} {key}: reference {a!r}, file {b!r}"); bad += 1
    print(f"{name}: {len(got)} zones; {'the file matches the reference bit for bit' if not bad else f'{bad} differences'}")
    return 1 if bad else 0

FOLDER = os.path.dirname(os.path.abspath(__file__))
NAMES = sys.argv[1:] or sorted(f[:-len(".visits.json")] for f in os.listdir(FOLDER) if f.endswith(".visits.json"))
sys.exit(max(check(FOLDER, name) for name in NAMES))
