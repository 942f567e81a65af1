# safetensors_compare.py: for tests/cli/mp_checkpoint.sh: compares two safetensors files tensor by tensor (bit for bit or within a tolerance), and makes hostile copies of one.
"""Usage:
  safetensors_compare.py A B --prefix P [--rtol R]   tensors of A whose names start with P (and have no other
                                                    prefix when P is ""), each against B's of the same name
  safetensors_compare.py --make-hostile FILE OUT     writes OUT-truncated, OUT-header-length, OUT-overlap and
                                                    OUT-dtype .safetensors from FILE

Python's standard library only: the format is 8 bytes of little-endian header length, the JSON header, the
data; F32 values are compared as their bytes (bit for bit) or as floats (array 'f').
"""
import array
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    return header, blob[8 + n:], blob


def tensors(header, prefix):
    names = [k for k in header if k != "__metadata__"]
    if prefix:
        return [k for k in names if k.startswith(prefix)]
    return [k for k in names if not k.startswith("optim.") and not k.startswith("master.")]


def compare(a_path, b_path, prefix, rtol):
    ha, da, _ = read(a_path)
    hb, db, _ = read(b_path)
    names = tensors(ha, prefix)
    if not names:
        print("no tensors with prefix %r in %s" % (prefix, a_path))
        return 1
    worst = 0.0
    for name in names:
        if name not in hb:
            print("%s: not in %s" % (name, b_path))
            return 1
        ea, eb = ha[name], hb[name]
        if ea["dtype"] != eb["dtype"] or ea["shape"] != eb["shape"]:
            print("%s: %s %s vs %s %s" % (name, ea["dtype"], ea["shape"], eb["dtype"], eb["shape"]))
            return 1
        ba = da[ea["data_offsets"][0]:ea["data_offsets"][1]]
        bb = db[eb["data_offsets"][0]:eb["data_offsets"][1]]
        if rtol is None:
            if ba != bb:
                xa, xb = array.array("f", ba), array.array("f", bb)
                i = next(i for i in range(len(xa)) if xa[i] != xb[i] or ba[4 * i:4 * i + 4] != bb[4 * i:4 * i + 4])
                print("%s: element %d differs: %r vs %r (a misplaced slice?)" % (name, i, xa[i], xb[i]))
                return 1
            continue
        xa, xb = array.array("f", ba), array.array("f", bb)
        scale = max(max((abs(x) for x in xa), default=0.0), 1e-30)
        for i in range(len(xa)):
            d = abs(xa[i] - xb[i]) / scale  # relative to the tensor's largest value
            worst = max(worst, d)
            if d > rtol:
                print("%s: element %d: %r vs %r, relative %.3g > %g" % (name, i, xa[i], xb[i], d, rtol))
                return 1
    if rtol is None:
        print("%d tensors, all equal bit for bit" % len(names))
    else:
        print("%d tensors, all within %g (worst %.3g)" % (len(names), rtol, worst))
    return 0


def make_hostile(path, out):
    header, data, blob = read(path)
    (n,) = struct.unpack("<Q", blob[:8])

    def write(name, header_obj=None, raw=None):
        if raw is None:
            text = json.dumps(header_obj).encode()
            text += b" " * (-len(text) % 8)
            raw = struct.pack("<Q", len(text)) + text + data
        with open("%s-%s.safetensors" % (out, name), "wb") as f:
            f.write(raw)

    write("truncated", raw=blob[:len(blob) // 2])
    write("header-length", raw=struct.pack("<Q", len(blob) * 2) + blob[8:])
    names = [k for k in header if k != "__metadata__"]
    overlap = json.loads(json.dumps(header))
    a, b = overlap[names[0]]["data_offsets"]
    overlap[names[1]]["data_offsets"] = [a, a + (overlap[names[1]]["data_offsets"][1] - overlap[names[1]]["data_offsets"][0])]
    write("overlap", overlap)
    dtype = json.loads(json.dumps(header))
    dtype[names[0]]["dtype"] = "F33"
    write("dtype", dtype)
    return 0


def main(argv):
    if len(argv) == 3 and argv[0] == "--make-hostile":
        return make_hostile(argv[1], argv[2])
    if len(argv) >= 4 and argv[2] == "--prefix":
        rtol = float(argv[5]) if len(argv) == 6 and argv[4] == "--rtol" else None
        return compare(argv[0], argv[1], argv[3], rtol)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
