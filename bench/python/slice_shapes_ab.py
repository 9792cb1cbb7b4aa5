"""Column against row slices (half of blk.0.ffn_down.weight each) through
the direct, mmap and read sources, for two builds of the Python package in
the same rounds (interleaved), as medians of 5 calls per round:

    python3 tests/fixtures/sample_model.py --out /tmp/cs --preset 7b-4l --formats q4_0
    pip install --no-deps --target /tmp/base BASE.whl; pip install --no-deps --target /tmp/new NEW.whl
    python3 bench/python/slice_shapes_ab.py /tmp/cs/7b-4l-llama-q4_0.gguf /tmp/base /tmp/new [ROUNDS]

Prints each build's median and the speed-up (base / new) with its range
over the rounds."""
import json, os, statistics, subprocess, sys
MODEL, BASE, NEW = sys.argv[1], sys.argv[2], sys.argv[3]
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 5
CHILD = r'''
import json, sys, time, weightstream
ck = weightstream.open(sys.argv[1], source=sys.argv[2])
name = "blk.0.ffn_down.weight"
rows, cols = ck.matrix(name)
ck.get_slice(name, cols=(0, cols // 2)); ck.get_slice(name, rows=(0, rows // 2))
out = {"cols": [], "rows": []}
for _ in range(5):
    t0 = time.perf_counter(); ck.get_slice(name, cols=(0, cols // 2)); t1 = time.perf_counter()
    ck.get_slice(name, rows=(0, rows // 2)); t2 = time.perf_counter()
    out["cols"].append(t1 - t0); out["rows"].append(t2 - t1)
print(json.dumps(out))
'''
res = {}
for r in range(ROUNDS):
    for label, site in (("base", BASE), ("new", NEW)):
        for src in ("direct", "mmap", "read"):
            env = dict(os.environ, PYTHONPATH=site)
            o = json.loads(subprocess.run([sys.executable, "-c", CHILD, MODEL, src], env=env, capture_output=True, text=True, check=True).stdout)
            for k, v in o.items():
                res.setdefault((src, k, label), []).append(statistics.median(v))
for src in ("direct", "mmap", "read"):
    for k in ("cols", "rows"):
        b, n = res[(src, k, "base")], res[(src, k, "new")]
        ratios = sorted(x / y for x, y in zip(b, n))
        print(f"{src:6} {k}: base {statistics.median(b)*1e3:7.1f} ms, new {statistics.median(n)*1e3:7.1f} ms, "
              f"speed-up {statistics.median(ratios):.2f}x (rounds {ratios[0]:.2f}..{ratios[-1]:.2f})")
