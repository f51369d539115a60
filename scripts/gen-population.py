#!/usr/bin/env python3
"""A synthetic population for audiences (seeded): devices around a few European cities, each with its last fix's
age (seconds) and accuracy (metres). Used by scripts/bench-audiences.sh.

    scripts/gen-population.py --devices 1000000 --seed 30 > population.csv
"""
import argparse, math, random, sys

CITIES = [  # name, lat, lng, share, spread (km, one standard deviation)
    ("paris", 48.8566, 2.3522, 0.30, 9.0),
    ("london", 51.5074, -0.1278, 0.25, 11.0),
    ("berlin", 52.5200, 13.4050, 0.20, 9.0),
    ("madrid", 40.4168, -3.7038, 0.15, 8.0),
    ("lyon", 45.7640, 4.8357, 0.10, 5.0),
]

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--devices", type=int, required=True)
    parser.add_argument("--seed", type=int, default=30)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    out = sys.stdout
    out.write("id,lat,lng,age_s,accuracy_m\n")
    weights = [c[3] for c in CITIES]
    for i in range(args.devices):
        name, lat, lng, _, spread = rng.choices(CITIES, weights)[0]
        north = rng.gauss(0, spread) * 1000
        east = rng.gauss(0, spread) * 1000
        dlat = north / 111320.0
        dlng = east / (111320.0 * math.cos(math.radians(lat)))
        age = rng.expovariate(1 / 1800.0)  # most fixes recent, a tail of old ones
        accuracy = rng.lognormvariate(math.log(30), 1.0)
        out.write(f"d{i},{lat + dlat:.6f},{lng + dlng:.6f},{age:.1f},{accuracy:.1f}\n")

if __name__ == "__main__":
    main()
