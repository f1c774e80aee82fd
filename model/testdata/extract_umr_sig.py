#!/usr/bin/env python3
"""Keep what the model's UMR replay test reads from the oracle's umr_sig
vectors: per record, the case, whether the mkey is fresh, the configure
flags, the setters, the QP number, the mkey's key, the mkey context of its
CREATE_MKEY, the PSV indexes its CREATE_PSVs returned, the WQEBBs libmlx5
wrote (hex, in ring order from the record's starting counter) and the
result of ibv_wr_complete.

Usage: extract_umr_sig.py /work/shared/oracle/vectors/umr_sig.jsonl > umr_sig_wqes.jsonl
"""
import json
import sys


def mkey_cmds(r):
    """The mkey context of a record's CREATE_MKEY (hex, "" if none) and
    the PSV indexes its CREATE_PSVs returned."""
    mkc, psvs = "", []
    for cmd in r.get("mkey_create_cmds", []):
        attrs = {a["name"]: a for a in cmd["attrs"]}
        cin = bytes.fromhex(attrs["CMD_IN"]["hex"])
        out = bytes.fromhex(attrs["CMD_OUT"]["out_hex"])
        opcode = int.from_bytes(cin[0:2], "big")
        if opcode == 0x200:  # CREATE_MKEY: the mkc is at byte 16
            mkc = cin[16:80].hex()
        elif opcode == 0x600:  # CREATE_PSV: psv0_index in bits 136..159
            psvs.append(int.from_bytes(out[17:20], "big"))
    return mkc, psvs


def configure(r):
    """What the replay tests read of one configure record."""
    mkc, psvs = mkey_cmds(r)
    return {
        "case": r["case"],
        "fresh": r["input"]["mkey"]["fresh"],
        "conf_flags": r["input"]["mkey_conf_attr"]["conf_flags"],
        "setters": r["input"]["setters"],
        "qpn": r["qp"]["qpn"],
        "lkey": r["input"]["mkey"]["lkey"],
        "mkc": mkc,
        "psvs": psvs,
        "sq_pi_before": r["sq_pi_before"],
        "wqebbs": [w["hex"] for w in r["sq"]["wqebbs"]],
        "wr_complete": r["result"]["wr_complete"],
    }


if __name__ == "__main__":
    for line in open(sys.argv[1]):
        print(json.dumps(configure(json.loads(line)), separators=(",", ":")))
