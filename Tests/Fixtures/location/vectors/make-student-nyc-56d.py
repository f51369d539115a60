#!/usr/bin/env python3
"""Writes student-nyc-56d.visits.json: 56 days of a student in New York, 196 visits that make 16 ZOIs.

    python3 Tests/Fixtures/location/vectors/make-student-nyc-56d.py > Tests/Fixtures/location/vectors/student-nyc-56d.visits.json

Seeded, so the file is the same on every run. Weekdays: the dorm overnight, a lecture in the morning, the lab, the
library or a part-time job in the afternoon, and most evenings one errand; Saturdays an outing and a night out;
Sundays an errand and the library. The dorm and the library often report the same Wi-Fi position (no jitter), the
rest scatter within 0.6 × the accuracy; accuracies are 5 to 45 m with one decimal. Times are EDT (UTC−4).

The recorded zones (student-nyc-56d.trajectory.txt and .zois.json) come from a debug build (location-vectors
--record) and reference.py finds the same bits. An optimised build without Sources/LocationCore/ZOI/LibcPow.swift
left them at visit v017: its update has 1 − w = 0.7999841426564946, where glibc's pow(1 − w, 2) is one ulp above
(1 − w)·(1 − w); after 196 visits det and C were 1e-11 and 8e-10 (relative) off.
"""
import datetime
import math
import random

SEED = 82
SNAPPED = {"dorm", "library"}  # Wi-Fi positions: half of their visits report the place's exact coordinates

rng = random.Random(SEED)
PLACES = {
    "dorm": (40.7302, -73.9935), "lecture_a": (40.7290, -73.9965), "lecture_b": (40.7286, -73.9951),
    "lab": (40.6942, -73.9866), "library": (40.7295, -73.9973), "gym": (40.7331, -73.9889),
    "cafe": (40.7265, -73.9900), "grocery": (40.7340, -73.9910), "job": (40.7233, -74.0030),
    "friend": (40.7143, -73.9612), "park": (40.7812, -73.9665), "museum": (40.7614, -73.9776),
    "laundry": (40.7280, -73.9870), "parents": (40.7420, -73.8800), "bar": (40.7225, -73.9880),
    "church": (40.7350, -73.9990), "dining": (40.7310, -73.9945),
}
START = datetime.datetime(2019, 9, 2, tzinfo=datetime.timezone(datetime.timedelta(hours=-4)))  # a Monday
visits = []


def add(day, place, h0, h1):
    lat, lng = PLACES[place]
    arrival = START + datetime.timedelta(days=day, hours=h0 + rng.uniform(-0.25, 0.25))
    departure = START + datetime.timedelta(days=day, hours=h1 + rng.uniform(-0.25, 0.25))
    accuracy = round(rng.uniform(5, 45), 1)
    metres = 0.0 if (place in SNAPPED and rng.random() < 0.5) else rng.uniform(0, 0.6) * accuracy
    angle = rng.uniform(0, 2 * math.pi)
    dlat = metres * math.sin(angle) / 111320.0
    dlng = metres * math.cos(angle) / (111320.0 * math.cos(math.radians(lat)))
    visits.append({"id": f"v{len(visits) + 1:03d}", "arrival": int(arrival.timestamp()),
                   "departure": int(departure.timestamp()), "latitude": round(lat + dlat, 7),
                   "longitude": round(lng + dlng, 7), "horizontal_accuracy": accuracy})


for day in range(56):
    weekday = day % 7
    if weekday < 5:
        add(day, "dorm", -4, 8.5)
        add(day, "lecture_a" if weekday in (0, 2, 4) else "lecture_b", 9, 11.8)
        if weekday in (1, 3):
            add(day, "lab", 13, 16)
        elif weekday == 4:
            add(day, "job", 13, 17.5)
        else:
            add(day, "library", 12.5, 17)
        if rng.random() < 0.9:
            add(day, rng.choice(["gym", "cafe", "grocery", "laundry", "dining"]), 17.8, 19)
    elif weekday == 5:
        add(day, "dorm", -5, 10)
        add(day, rng.choice(["park", "museum", "parents", "friend"]), 12, 17)
        add(day, rng.choice(["bar", "friend", "gym"]), 20, 23.5)
    else:
        add(day, rng.choice(["church", "laundry", "grocery", "cafe"]), 10.5, 12)
        add(day, "library", 14, 18)

assert len(visits) == 196, len(visits)
print('{"visits": [')
print(",\n".join("  " + json_line for json_line in (
    '{"id": "%s", "arrival": %d, "departure": %d, "latitude": %r, "longitude": %r, "horizontal_accuracy": %r}'
    % (v["id"], v["arrival"], v["departure"], v["latitude"], v["longitude"], v["horizontal_accuracy"])
    for v in visits)))
print("]}")
