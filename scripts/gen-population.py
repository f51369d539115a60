#!/usr/bin/env python3
"""A synthetic population for audiences (seeded): devices around a few European cities, each with its last fix's
age (seconds) and accuracy (metres). Used by scripts/bench-audiences.sh.

    scripts/gen-population.py --devices 1000000 --seed 30 > population.csv
    scripts/gen-population.py --devices 1000000 --seed 30 --extras DIR > population.csv

The population on stdout is the same with or without --extras (the extras draw from a random generator of their
own). --extras DIR also writes, for the tags, zoi and visited audiences (numpy):
    DIR/pois.csv     id,lat,lng,type          20,000 POIs around the same cities (cafe, restaurant, gym, ...)
    DIR/tags.csv     id,tags                  each device's tags, space-separated: plan:free|pro, lang:xx,
                                              0 to 3 topic: tags (Zipf-like), beta:tester for 0.2%
    DIR/zois.csv     id,home_lat,home_lng,work_lat,work_lng
                                              a home zone (1.5 km sd from the fix) and, for 75%, a work zone
                                              (4 km sd; empty when none)
    DIR/visits.csv   id,lat,lng,arrival_age_s,departure_age_s
                                              3 to 10 visits per device over the last 30 days, each at the POI
                                              nearest a point 3 km (sd) from the fix, 25 m (sd) off it;
                                              ages count back from the bench's `now`; grouped by device, in order
    DIR/extras.npz   the same numbers as arrays (what the reference in bench-audiences.sh reads; every
                     coordinate is a multiple of 1e-6 and every age of 0.1, so the CSV's text parses to the
                     same doubles)
"""
import argparse, math, os, random, sys

CITIES = [  # name, lat, lng, share, spread (km, one standard deviation)
    ("paris", 48.8566, 2.3522, 0.30, 9.0),
    ("london", 51.5074, -0.1278, 0.25, 11.0),
    ("berlin", 52.5200, 13.4050, 0.20, 9.0),
    ("madrid", 40.4168, -3.7038, 0.15, 8.0),
    ("lyon", 45.7640, 4.8357, 0.10, 5.0),
]
CITY_LANG = {"paris": "fr", "london": "en", "berlin": "de", "madrid": "es", "lyon": "fr"}
LANGS = ["en", "fr", "de", "es", "it", "pt", "nl", "pl"]
TOPICS = ["news", "sports", "music", "tech", "travel", "food", "fashion", "finance", "gaming", "health", "movies",
          "science", "cars", "pets", "books", "art", "politics", "weather", "parenting", "chess"]
POI_TYPES = [  # type, share
    ("restaurant", 0.25), ("cafe", 0.20), ("bar", 0.12), ("bakery", 0.10), ("supermarket", 0.10),
    ("pharmacy", 0.08), ("gym", 0.05), ("bookshop", 0.05), ("museum", 0.03), ("cinema", 0.02),
]
POIS = 20_000
DAY = 86_400.0

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--devices", type=int, required=True)
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--extras", help="a directory: also write POIs, tags, zones and visits there")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    out = sys.stdout
    out.write("id,lat,lng,age_s,accuracy_m\n")
    weights = [c[3] for c in CITIES]
    fixes = [] if args.extras else None
    for i in range(args.devices):
        name, lat, lng, _, spread = rng.choices(CITIES, weights)[0]
        north = rng.gauss(0, spread) * 1000
        east = rng.gauss(0, spread) * 1000
        dlat = north / 111320.0
        dlng = east / (111320.0 * math.cos(math.radians(lat)))
        age = rng.expovariate(1 / 1800.0)  # most fixes recent, a tail of old ones
        accuracy = rng.lognormvariate(math.log(30), 1.0)
        out.write(f"d{i},{lat + dlat:.6f},{lng + dlng:.6f},{age:.1f},{accuracy:.1f}\n")
        if fixes is not None:
            fixes.append((name, lat + dlat, lng + dlng))
    if args.extras:
        out.flush()
        extras(args.extras, args.seed, fixes)

def extras(folder, seed, fixes):
    import numpy as np
    from scipy.spatial import cKDTree
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng([seed, 1])
    n = len(fixes)
    names = [c[0] for c in CITIES]
    city = np.array([names.index(f[0]) for f in fixes], dtype=np.int64)
    lat = np.array([f[1] for f in fixes])
    lng = np.array([f[2] for f in fixes])

    def q6(x):  # a multiple of 1e-6 that "%.6f" writes and a parser reads back as the same double
        return np.rint(x * 1e6) / 1e6

    def offset(lat, lng, sd_m, size):
        north = rng.normal(0, sd_m, size)
        east = rng.normal(0, sd_m, size)
        return lat + north / 111320.0, lng + east / (111320.0 * np.cos(np.radians(lat)))

    def unit(lat, lng):
        lat, lng = np.radians(lat), np.radians(lng)
        return np.column_stack([np.cos(lat) * np.cos(lng), np.cos(lat) * np.sin(lng), np.sin(lat)])

    # POIs around the same cities, a little tighter than the devices.
    share = np.array([c[3] for c in CITIES])
    poi_city = rng.choice(len(CITIES), POIS, p=share / share.sum())
    centre_lat = np.array([c[1] for c in CITIES])[poi_city]
    centre_lng = np.array([c[2] for c in CITIES])[poi_city]
    spread = np.array([c[4] for c in CITIES])[poi_city] * 1000 * 0.7
    poi_lat, poi_lng = offset(centre_lat, centre_lng, spread, POIS)
    poi_lat, poi_lng = q6(poi_lat), q6(poi_lng)
    type_share = np.array([p[1] for p in POI_TYPES])
    poi_type = rng.choice(len(POI_TYPES), POIS, p=type_share / type_share.sum())
    with open(os.path.join(folder, "pois.csv"), "w") as f:
        f.write("id,lat,lng,type\n")
        f.writelines(f"p{i},{a:.6f},{b:.6f},{POI_TYPES[t][0]}\n"
                     for i, (a, b, t) in enumerate(zip(poi_lat.tolist(), poi_lng.tolist(), poi_type.tolist())))

    # Tags: a plan, a language (the city's mostly), 0 to 3 topics (Zipf-like), and a rare beta flag.
    pro = rng.random(n) < 0.10
    other_lang = rng.random(n) < 0.15
    random_lang = rng.integers(0, len(LANGS), n)
    topic_weight = 1 / np.arange(1, len(TOPICS) + 1) ** 1.1
    topic_count = rng.integers(0, 4, n)
    # Weighted sampling without replacement: the top keys of log(weight) + Gumbel noise.
    keys = np.log(topic_weight)[None, :] + rng.gumbel(size=(n, len(TOPICS)))
    order = np.argsort(-keys, axis=1)[:, :3]
    beta = rng.random(n) < 0.002
    tag_names = []
    with open(os.path.join(folder, "tags.csv"), "w") as f:
        f.write("id,tags\n")
        lines = []
        for i in range(n):
            lang = LANGS[random_lang[i]] if other_lang[i] else CITY_LANG[CITIES[city[i]][0]]
            tags = ["plan:pro" if pro[i] else "plan:free", f"lang:{lang}"]
            tags += [f"topic:{TOPICS[t]}" for t in order[i, :topic_count[i]]]
            if beta[i]:
                tags.append("beta:tester")
            tag_names.append(tags)
            lines.append(f"d{i},{' '.join(tags)}\n")
        f.writelines(lines)
    vocabulary = sorted({t for tags in tag_names for t in tags})
    tag_index = {t: k for k, t in enumerate(vocabulary)}
    tag_device = np.array([i for i, tags in enumerate(tag_names) for _ in tags], dtype=np.int64)
    tag_id = np.array([tag_index[t] for tags in tag_names for t in tags], dtype=np.int64)
    del tag_names

    # Zones: home near the fix; work, for 75%, farther.
    home_lat, home_lng = offset(lat, lng, 1500.0, n)
    work_lat, work_lng = offset(lat, lng, 4000.0, n)
    home_lat, home_lng, work_lat, work_lng = q6(home_lat), q6(home_lng), q6(work_lat), q6(work_lng)
    has_work = rng.random(n) < 0.75
    with open(os.path.join(folder, "zois.csv"), "w") as f:
        f.write("id,home_lat,home_lng,work_lat,work_lng\n")
        f.writelines(
            f"d{i},{a:.6f},{b:.6f},{c:.6f},{d:.6f}\n" if w else f"d{i},{a:.6f},{b:.6f},,\n"
            for i, (a, b, c, d, w) in enumerate(zip(home_lat.tolist(), home_lng.tolist(), work_lat.tolist(),
                                                     work_lng.tolist(), has_work.tolist())))

    # Visits: 3 to 10 per device over 30 days, at the POI nearest a point around the fix, a little off it.
    per_device = rng.integers(3, 11, n)
    visit_device = np.repeat(np.arange(n, dtype=np.int64), per_device)
    m = len(visit_device)
    anchor_lat, anchor_lng = offset(lat[visit_device], lng[visit_device], 3000.0, m)
    _, nearest = cKDTree(unit(poi_lat, poi_lng)).query(unit(anchor_lat, anchor_lng), workers=-1)
    visit_lat, visit_lng = offset(poi_lat[nearest], poi_lng[nearest], 25.0, m)
    visit_lat, visit_lng = q6(visit_lat), q6(visit_lng)
    arrival_age = np.rint(rng.uniform(2 * 3600, 30 * DAY, m) * 10) / 10
    stay = np.clip(rng.lognormal(math.log(40 * 60), 0.8, m), 300, 8 * 3600)
    departure_age = np.rint((arrival_age - stay) * 10) / 10
    with open(os.path.join(folder, "visits.csv"), "w") as f:
        f.write("id,lat,lng,arrival_age_s,departure_age_s\n")
        step = 500_000
        for start in range(0, m, step):
            end = min(m, start + step)
            f.writelines(
                f"d{d},{a:.6f},{b:.6f},{c:.1f},{e:.1f}\n"
                for d, a, b, c, e in zip(visit_device[start:end].tolist(), visit_lat[start:end].tolist(),
                                         visit_lng[start:end].tolist(), arrival_age[start:end].tolist(),
                                         departure_age[start:end].tolist()))
    np.savez(os.path.join(folder, "extras.npz"), poi_lat=poi_lat, poi_lng=poi_lng, poi_type=poi_type,
             poi_types=np.array([p[0] for p in POI_TYPES]), tag_device=tag_device, tag_id=tag_id,
             tag_names=np.array(vocabulary), home_lat=home_lat, home_lng=home_lng, work_lat=work_lat,
             work_lng=work_lng, has_work=has_work, visit_device=visit_device, visit_lat=visit_lat,
             visit_lng=visit_lng, arrival_age=arrival_age, departure_age=departure_age)

if __name__ == "__main__":
    main()
