#!/usr/bin/env python3
"""Keep what the model's crypto UMR replay test reads from the oracle's
crypto_umr vectors: per configure record, the case, the device (its
AES-XTS engines), whether the mkey is fresh, the configure flags, the
setters (access flags, layout, sig_block_attr, crypto_attr), the QP
number, the mkey's key, the mkey context of its CREATE_MKEY, the PSV
indexes its CREATE_PSVs returned, the starting counter, the WQEBBs
libmlx5 wrote (hex, in ring order) and the result of ibv_wr_complete;
and, from each device's setup record, its DEKs (object id, PD, key size,
keytag). The batch/* records (several WRs each) are left out.

Usage: extract_crypto_umr.py mlx5/testdata/crypto_umr.jsonl > crypto_umr_wqes.jsonl
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extract_umr_sig import configure  # noqa: E402

for line in open(sys.argv[1]):
    r = json.loads(line)
    dev = r["input"]["device"]
    if r["case"].endswith("/setup"):
        caps = dev["general_caps"]
        out = {
            "case": r["case"],
            "device": dev["name"],
            "multi_block": caps["aes_xts_multi_block_be_tweak"] == 1,
            "deks": r["result"]["deks"],
        }
    elif "mkey" not in r["input"]:
        continue  # batch/*: several WRs a record, replayed by mlx5's tests
    else:
        out = configure(r)
        out["device"] = dev
    print(json.dumps(out, separators=(",", ":")))
