#!/usr/bin/env python3
"""Compare `rocedump -json` with `tshark -T json` field by field.

Usage: tshark-check.py ROCEDUMP PCAP...

For every RoCE packet of every capture, each key rocedump prints is checked
against the field tshark (Wireshark's InfiniBand dissector) decodes from the
same frame. tshark does not verify the ICRC, so icrc_ok is not compared;
tshark prints the ICRC as a big-endian number of the trailer bytes, rocedump
the value read least-significant byte first: the check swaps one of them.
Exits 1 on any disagreement.
"""
import json
import subprocess
import sys

HDR_LEN = {"reth": 16, "aeth": 4, "atomiceth": 28, "atomicacketh": 8, "immdt": 4, "ieth": 4, "deth": 8}


def flat(layers):
    out = {}

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if isinstance(v, (dict, list)):
                    walk(v)
                else:
                    out.setdefault(k, v)
        elif isinstance(o, list):
            for x in o:
                walk(x)

    walk(layers)
    return out


def num(v):
    return int(v, 0)


def tshark_view(f):
    """The rocedump JSON object tshark's fields imply for one frame."""
    bth = bytes.fromhex(f["infiniband.bth"].replace(":", ""))
    v = {
        "opcode": num(f["infiniband.bth.opcode"]),
        "se": f["infiniband.bth.se"] == "1",
        "migreq": f["infiniband.bth.m"] == "1",
        "padcnt": num(f["infiniband.bth.padcnt"]),
        "tver": num(f["infiniband.bth.tver"]),
        "pkey": num(f["infiniband.bth.p_key"]),
        "fecn": bool(bth[4] & 0x80),
        "becn": bool(bth[4] & 0x40),
        "dqpn": num(f["infiniband.bth.destqp"]),
        "ackreq": f["infiniband.bth.a"] == "1",
        "psn": num(f["infiniband.bth.psn"]),
    }
    present = []
    if "infiniband.atomiceth" in f:
        present.append("atomiceth")
        v["atomiceth"] = {
            "va": num(f["infiniband.reth.va"]), "rkey": num(f["infiniband.reth.r_key"]),
            "swap": num(f["infiniband.atomiceth.swapdt"]), "cmp": num(f["infiniband.atomiceth.cmpdt"]),
        }
    elif "infiniband.reth" in f:
        present.append("reth")
        v["reth"] = {"va": num(f["infiniband.reth.va"]), "rkey": num(f["infiniband.reth.r_key"]),
                     "len": num(f["infiniband.reth.dmalen"])}
    if "infiniband.aeth" in f:
        present.append("aeth")
        v["aeth"] = {"syndrome": num(f["infiniband.aeth.syndrome"]), "msn": num(f["infiniband.aeth.msn"])}
    if "infiniband.atomicacketh" in f:
        present.append("atomicacketh")
        v["atomicacketh"] = {"orig": num(f["infiniband.atomicacketh.origremdt"])}
    if "infiniband.immdt" in f:
        present.append("immdt")
        v["immdt"] = num(f["infiniband.immdt"])
    if "infiniband.ieth" in f:
        present.append("ieth")
        v["ieth"] = num(f["infiniband.ieth"])
    if "infiniband.deth" in f:
        present.append("deth")
        v["deth"] = {"qkey": num(f["infiniband.deth.q_key"]), "sqpn": num(f["infiniband.deth.srcqp"])}
    if "ip.src" in f:
        v["src"], v["dst"] = f["ip.src"], f["ip.dst"]
        v["ipid"], v["df"], v["ttl"] = num(f["ip.id"]), f["ip.flags.df"] == "1", num(f["ip.ttl"])
    else:
        v["src"], v["dst"] = f["ipv6.src"], f["ipv6.dst"]
        v["flowlabel"], v["ttl"] = num(f["ipv6.flow"]), num(f["ipv6.hlim"])
    v["sport"] = num(f["udp.srcport"])
    udp_len = num(f["udp.length"])
    v["payload_len"] = udp_len - 8 - 12 - sum(HDR_LEN[h] for h in present) - v["padcnt"] - 4
    if "infiniband.invariant.crc" in f:  # absent when a payload heuristic ate the trailer
        crc = num(f["infiniband.invariant.crc"])
        v["icrc"] = int.from_bytes(crc.to_bytes(4, "big"), "little")
    return v


def main():
    rocedump, files = sys.argv[1], sys.argv[2:]
    bad = checked = 0
    for path in files:
        ts = json.loads(subprocess.run(["tshark", "-r", path, "-T", "json"], capture_output=True, check=True).stdout)
        frames = {}
        for i, pkt in enumerate(ts, 1):
            f = flat(pkt["_source"]["layers"])
            if "infiniband.bth" in f:
                frames[i] = f
        ours = {}
        out = subprocess.run([rocedump, "-r", path, "-json"], capture_output=True, check=True, text=True).stdout
        for line in out.splitlines():
            o = json.loads(line)
            if "opcode" in o:
                ours[o["frame"]] = o
        if set(frames) != set(ours):
            print(f"{path}: frames differ: tshark only {sorted(set(frames) - set(ours))}, rocedump only {sorted(set(ours) - set(frames))}")
            bad += 1
        for n in sorted(set(frames) & set(ours)):
            want, got = tshark_view(frames[n]), ours[n]
            for k, w in want.items():
                g = got.get(k)
                if isinstance(w, dict) and isinstance(g, dict):
                    g = {kk: g.get(kk) for kk in w}
                if g != w:
                    print(f"{path} frame {n}: {k}: rocedump {g!r} tshark {w!r}")
                    bad += 1
            extra = set(got) - set(want) - {"frame", "opname", "icrc_ok", "smc", "icrc"}
            for k in extra:
                print(f"{path} frame {n}: rocedump has {k} that tshark does not decode")
                bad += 1
            checked += 1
        print(f"{path}: {len(frames)} RoCE packets compared")
    print(f"{checked} packets, {bad} disagreements")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
