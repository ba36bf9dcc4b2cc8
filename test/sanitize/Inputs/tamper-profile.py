"""Hardware profiles (--gpu FILE.json, docs/simulate.md) edited as a person
or a damaged file could: numbers out of every range, curves that are empty,
unordered or not numbers, fields of the wrong type, and files that are not
JSON objects. test/sanitize/profiles.test runs `mtc simulate` and `mtc plan`
on them: each is refused or simulated, never a crash, and under the
sanitizers (make check-sanitize) without a report.

usage: tamper-profile.py EDIT IN.json OUT.json
Standard library only.
"""
import json
import sys


def device(p):
    return p["device"]


def curve(p):
    return p["device"]["gemm_efficiency"]


def set_all_numbers(value):
    """Every number of the profile replaced by `value`."""
    def walk(x):
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            return value
        return x
    return lambda p: p.update(walk(p))


# Edits of the parsed profile (a dict, changed in place).
EDITS = {
    "memory-zero": lambda p: device(p).update(memory_bytes=0),
    "memory-negative": lambda p: device(p).update(memory_bytes=-1),
    "memory-huge": lambda p: device(p).update(memory_bytes=1e30),
    "memory-fraction": lambda p: device(p).update(memory_bytes=0.5),
    "memory-string": lambda p: device(p).update(memory_bytes="80GiB"),
    "bandwidth-tiny": lambda p: device(p).update(memory_bandwidth=1e-300),
    "flops-zero": lambda p: device(p)["peak_flops"].update(bf16=0, fp32=0),
    "flops-missing": lambda p: device(p).pop("peak_flops"),
    "latency-negative": lambda p: device(p).update(launch_latency_s=-1),
    "curve-empty": lambda p: device(p).update(gemm_efficiency=[]),
    "curve-one-point": lambda p: device(p).update(gemm_efficiency=curve(p)[:1]),
    "curve-reversed": lambda p: curve(p).reverse(),
    "curve-duplicate": lambda p: device(p).update(
        gemm_efficiency=[curve(p)[0], curve(p)[0]]),
    "curve-above-one": lambda p: curve(p)[-1].update(efficiency=7),
    "curve-negative": lambda p: curve(p)[0].update(efficiency=-0.5),
    "curve-not-objects": lambda p: device(p).update(gemm_efficiency=[1, 2, 3]),
    "curve-long": lambda p: device(p).update(gemm_efficiency=[
        {"flops": 10.0 ** (k / 1000), "efficiency": 0.5}
        for k in range(1, 20001)]),
    "device-not-object": lambda p: p.update(device=[]),
    "link-missing": lambda p: p.pop("link"),
    "all-zero": set_all_numbers(0),
    "all-tiny": set_all_numbers(5e-324),
    "all-huge": set_all_numbers(1.7e308),
    "all-max-int": set_all_numbers(9223372036854775807),
}

# Files that are not a profile's JSON at all (written as text).
TEXTS = {
    "overflow": lambda t: t.replace("4080000000000.0", "1e999", 1),
    "underflow": lambda t: t.replace("5e-06", "1e-999", 1),
    "nan-literal": lambda t: t.replace("4080000000000.0", "NaN", 1),
    "truncated": lambda t: t[: len(t) // 2],
    "empty": lambda t: "",
    "not-object": lambda t: "[" + t + "]",
    "deep-nesting": lambda t: "[" * 100000 + "]" * 100000,
    "deep-field": lambda t: t.replace('"name"', '"x": ' + "[" * 5000 +
                                      "]" * 5000 + ', "name"', 1),
    "nul-bytes": lambda t: t[:40] + "\0" * 64 + t[40:],
    "long-string": lambda t: t.replace('"h200"', '"' + "h" * 10000000 + '"', 1),
    "duplicate-keys": lambda t: t.replace(
        '"device": {', '"device": {"memory_bytes": -5, ', 1),
}


def main():
    names = sorted(EDITS) + sorted(TEXTS)
    if len(sys.argv) != 4 or sys.argv[1] not in names:
        raise SystemExit("usage: tamper-profile.py {%s} IN.json OUT.json"
                         % ",".join(names))
    with open(sys.argv[2]) as f:
        text = f.read()
    if sys.argv[1] in TEXTS:
        out = TEXTS[sys.argv[1]](text)
    else:
        p = json.loads(text)
        EDITS[sys.argv[1]](p)
        out = json.dumps(p, indent=1)
    with open(sys.argv[3], "w") as f:
        f.write(out)


if __name__ == "__main__":
    main()
