#!/usr/bin/env python3
"""CPU per thread of running processes over a window, busiest first (a benchmark's helper, not a test).

    scripts/thread-cpu.py PID [PID...] DELAY WINDOW

Waits DELAY seconds, then prints each process's threads by the share of a core they used during WINDOW seconds
(from /proc/PID/task/*/stat): a thread near 100% is a serial limit.
"""
import os, sys, time, collections
def snap(pid):
    out={}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            s=open(f"/proc/{pid}/task/{t}/stat").read()
            name=s[s.index('(')+1:s.rindex(')')]
            f=s[s.rindex(')')+2:].split()
            out[t]=(name,int(f[11])+int(f[12]))
        except Exception: pass
    return out
pids=sys.argv[1:-2]; delay=float(sys.argv[-2]); window=float(sys.argv[-1])
time.sleep(delay)
a={p:snap(p) for p in pids}; t0=time.time()
time.sleep(window)
b={p:snap(p) for p in pids}; dt=time.time()-t0
hz=os.sysconf('SC_CLK_TCK')
for p in pids:
    rows=[]
    for t,(name,c) in b[p].items():
        c0=a[p].get(t,(name,c))[1]
        if c-c0>0: rows.append(((c-c0)/hz/dt,name,t))
    rows.sort(reverse=True)
    print(p, f"total {sum(r[0] for r in rows):.2f} cores")
    for r in rows[:12]: print(f"   {r[0]*100:5.1f}% {r[1]} {r[2]}")
