#!/usr/bin/env python3
"""Keep what the model's crypto UMR replay test reads from the oracle's
crypto_umr vectors: per configure record, the case, the device (its
AES-XTS engines), whether the mkey is fresh, the configure flags, the
setters (access flags, layout, sig_block_attr, crypto_attr), the QP
number, the mkey's key, the mkey context of its CREATE_MKEY, the PSV
indexes its CREATE_PSVs returned, the starting counter, the WQEBBs
libmlx5 wrote (hex, in ring order) and the result of ibv_wr_complete;
and, from each device's setup record, its DEKs (object id, PD, key size,
keytag).

Usage: extract_crypto_umr.py mlx5/testdata/crypto_umr.jsonl > crypto_umr_wqes.jsonl
"""
import json
import sys

for line in open(sys.argv[1]):
    r = json.loads(line)
    dev = r["input"]["device"]
    if r["case"].endswith("/setup"):
        caps = dev["general_caps"]
        print(json.dumps({
            "case": r["case"],
            "device": dev["name"],
            "multi_block": caps["aes_xts_multi_block_be_tweak"] == 1,
            "deks": r["result"]["deks"],
        }, separators=(",", ":")))
        continue
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
    print(json.dumps({
        "case": r["case"],
        "device": dev,
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
    }, separators=(",", ":")))
