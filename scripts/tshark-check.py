#!/usr/bin/env python3
"""Compare `rocedump -json` with `tshark -T json` field by field.

Usage: tshark-check.py ROCEDUMP PCAP...

For every RoCE packet of every capture, each key rocedump prints is checked
against the field tshark (Wireshark's InfiniBand dissector) decodes from the
same frame. tshark does not verify the ICRC, so icrc_ok is not compared;
tshark prints the ICRC as a big-endian number of the trailer bytes, rocedump
the value read least-significant byte first: the check swaps one of them.
A MAD (a UD SEND to QP 1) is compared too: its common header, and the CM
message's fields Wireshark decodes (REQ with the rdma_cm header of its
private data, REP, RTU, REJ, DREQ, DREP; Wireshark 4.0 has no fields for
MRA and SIDR). Wireshark 4.0 reads a REQ path's flow label as 24 bits, so
that it shows the label shifted right by 8, and its packet rate from the
first byte of the flow label: those two are compared as Wireshark computes
them from the bytes, and rocedump's packet rate is not compared.
Exits 1 on any disagreement.
"""
import ipaddress
import re
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
    if ":" in v:  # bytes, as Wireshark shows ImmDt: big-endian
        return int(v.replace(":", ""), 16)
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


MAD_HEADER = {"baseversion": "base_version", "mgmtclass": "mgmt_class", "classversion": "class_version",
              "method": "method", "status": "status", "classspecific": "class_specific",
              "transactionid": "tid", "attributeid": "attr_id", "attributemodifier": "attr_mod"}

# tshark field (after "infiniband.cm.") -> rocedump key under mad.cm ("" for
# the message's first field, whose name is the message's).
CM_FIELDS = {
    0x10: {"req": "local_comm_id", "req.serviceid": "service_id", "req.localcaguid": "local_ca_guid",
           "req.localqkey": "local_qkey", "req.localqpn": "local_qpn", "req.responderres": "responder_resources",
           "req.localeecn": "local_eecn", "req.initdepth": "initiator_depth", "req.remoteeecn": "remote_eecn",
           "req.remoteresptout": "remote_cm_response_timeout", "req.transpsvctype": "transport_type",
           "req.e2eflowctrl": "flow_control", "req.startpsn": "starting_psn",
           "req.localresptout": "local_cm_response_timeout", "req.retrcount": "retry_count", "req.pkey": "pkey",
           "req.pppmtu": "path_mtu", "req.rdcexist": "rdc_exists", "req.rnrretrcount": "rnr_retry_count",
           "req.maxcmretr": "max_cm_retries", "req.srq": "srq", "req.ext_transport": "ext_transport_type",
           "req.prim_locallid": "primary_path.local_lid", "req.prim_remotelid": "primary_path.remote_lid",
           "req.prim_localgid": "primary_path.local_gid", "req.prim_localgid_ipv4": "primary_path.local_gid",
           "req.prim_remotegid": "primary_path.remote_gid", "req.prim_remotegid_ipv4": "primary_path.remote_gid",
           "req.prim_tfcclass": "primary_path.traffic_class", "req.prim_hoplim": "primary_path.hop_limit",
           "req.prim_sl": "primary_path.sl", "req.prim_subnetlocal": "primary_path.subnet_local",
           "req.prim_localacktout": "primary_path.local_ack_timeout",
           "req.alt_locallid": "alternate_path.local_lid", "req.alt_remotelid": "alternate_path.remote_lid",
           "req.alt_localgid": "alternate_path.local_gid", "req.alt_remotegid": "alternate_path.remote_gid",
           "req.alt_tfcclass": "alternate_path.traffic_class", "req.alt_hoplim": "alternate_path.hop_limit",
           "req.alt_sl": "alternate_path.sl", "req.alt_subnetlocal": "alternate_path.subnet_local",
           "req.alt_localacktout": "alternate_path.local_ack_timeout"},
    0x12: {"rej.localcommid": "local_comm_id", "rej.remotecommid": "remote_comm_id", "rej.msgrej": "message_rejected",
           "rej.rejinfolen": "ari_length", "rej.reason": "reason", "rej.ari": "ari", "rej.private": "private_data"},
    0x13: {"rep": "local_comm_id", "rep.remotecommid": "remote_comm_id", "rep.localqkey": "local_qkey",
           "rep.localqpn": "local_qpn", "rep.localeecn": "local_eecn", "rep.startpsn": "starting_psn",
           "rep.respres": "responder_resources", "rep.initdepth": "initiator_depth",
           "rep.tgtackdelay": "target_ack_delay", "rep.failoveracc": "failover", "rep.e2eflowctrl": "flow_control",
           "rep.rnrretrcount": "rnr_retry_count", "rep.srq": "srq", "rep.localcaguid": "local_ca_guid",
           "rep.private": "private_data"},
    0x14: {"rtu.localcommid": "local_comm_id", "rtu.remotecommid": "remote_comm_id", "rtu.private": "private_data"},
    0x15: {"dreq.localcommid": "local_comm_id", "dreq.remotecommid": "remote_comm_id",
           "req.remoteqpneecn": "remote_qpn_eecn", "dreq.private": "private_data"},
    0x16: {"drsp.localcommid": "local_comm_id", "drsp.remotecommid": "remote_comm_id", "drsp.private": "private_data"},
}

CMA_FIELDS = {"ipv": "ip_version", "sport": "port", "sip4": "src", "dip4": "dst", "sip6": "src", "dip6": "dst"}


def norm(v):
    """A value of either side in one form: ints, addresses, bytes as hex."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        if re.fullmatch(r"0x[0-9a-fA-F]+|[0-9]{1,20}", v):
            return int(v, 0) if v.startswith("0x") else int(v)
        try:
            a = ipaddress.ip_address(v)
            if a.version == 6 and a.ipv4_mapped:
                a = a.ipv4_mapped
            return str(a)
        except ValueError:
            pass
        h = v.replace(":", "")
        try:
            b = bytes.fromhex(h)
            if len(b) == 16:  # a GID as bytes: an address
                return norm(str(ipaddress.ip_address(b)))
            return h.lower()
        except ValueError:
            return v
    return v


def dig(o, path):
    for k in path.split("."):
        if not isinstance(o, dict) or k not in o:
            return None
        o = o[k]
    return o


def compare_mad(where, f, mad):
    """Disagreements between tshark's MAD fields in frame f and rocedump's mad object."""
    bad = []
    if mad is None:
        return [f"{where}: tshark decodes a MAD, rocedump does not"]
    for tk, rk in MAD_HEADER.items():
        w, g = norm(f["infiniband.mad." + tk]), norm(mad.get(rk))
        if w != g:
            bad.append(f"{where}: mad {rk}: rocedump {g!r} tshark {w!r}")
    attr = norm(f["infiniband.mad.attributeid"])
    cm = mad.get("cm") or {}
    for tk, rk in CM_FIELDS.get(attr, {}).items():
        if "infiniband.cm." + tk not in f:
            continue
        w, g = norm(f["infiniband.cm." + tk]), norm(dig(cm, rk))
        if w != g:
            bad.append(f"{where}: mad.cm {rk}: rocedump {g!r} tshark {w!r}")
    if attr == 0x10:
        for path in ("prim", "alt"):
            key = "primary_path" if path == "prim" else "alternate_path"
            fl = dig(cm, key + ".flow_label")
            t_fl, t_rate = f.get(f"infiniband.cm.req.{path}_flowlabel"), f.get(f"infiniband.cm.req.{path}_pktrate")
            if t_fl is None or fl is None:
                continue
            # Wireshark 4.0's reading: 24 bits from the label's first byte.
            if norm(t_fl) != fl >> 8 or norm(t_rate) != (fl >> 12) & 0x3F:
                bad.append(f"{where}: mad.cm {key}.flow_label {fl:#x}: tshark shows {t_fl}/{t_rate}")
        cma = mad.get("rdma_cm")
        if "infiniband.cm.req.ip_cm" in f:
            if cma is None:
                bad.append(f"{where}: tshark decodes the rdma_cm header, rocedump does not")
            else:
                ver = (norm(f["infiniband.cm.req.ip_cm.majv"]) << 4) | norm(f["infiniband.cm.req.ip_cm.minv"])
                if ver != cma.get("cma_version"):
                    bad.append(f"{where}: rdma_cm version: rocedump {cma.get('cma_version')} tshark {ver}")
                for tk, rk in CMA_FIELDS.items():
                    if "infiniband.cm.req.ip_cm." + tk in f:
                        w, g = norm(f["infiniband.cm.req.ip_cm." + tk]), norm(cma.get(rk))
                        if w != g:
                            bad.append(f"{where}: rdma_cm {rk}: rocedump {g!r} tshark {w!r}")
    return bad


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
            if "infiniband.mad" in frames[n]:
                for m in compare_mad(f"{path} frame {n}", frames[n], got.get("mad")):
                    print(m)
                    bad += 1
            elif "mad" in got:
                print(f"{path} frame {n}: rocedump decodes a MAD that tshark does not")
                bad += 1
            extra = set(got) - set(want) - {"frame", "opname", "icrc_ok", "smc", "icrc", "mad"}
            for k in extra:
                print(f"{path} frame {n}: rocedump has {k} that tshark does not decode")
                bad += 1
            checked += 1
        print(f"{path}: {len(frames)} RoCE packets compared")
    print(f"{checked} packets, {bad} disagreements")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
