#!/usr/bin/env python3
"""Keep what the model's crypto replay test reads from the oracle's
crypto_caps and crypto_objs vectors (issue 25):

- per crypto_caps record (one fake-device profile), the profile's caps as
  the harness set them, and the 256-byte cmd_hca_cap and crypto_caps pages
  the fake kernel answered libmlx5's QUERY_HCA_CAPs with;
- per crypto_objs record that sent a CREATE_GENERAL_OBJECT (DEK or
  CRYPTO_LOGIN) or a QUERY_GENERAL_OBJECT, the case, the call's input
  attributes, whether libmlx5 reported success, the input mailbox libmlx5
  wrote and the output the fake firmware answered.

Usage: extract_crypto.py crypto_caps.jsonl crypto_objs.jsonl > crypto_cmds.jsonl
"""
import json
import sys

OBJ = 16  # the object follows the 16-byte general object header


def cmds(r, key):
    for cmd in r.get(key, []):
        attrs = {a["name"]: a for a in cmd.get("attrs", [])}
        if "CMD_IN" in attrs:
            yield (bytes.fromhex(attrs["CMD_IN"].get("hex", "")),
                   bytes.fromhex(attrs.get("CMD_OUT", {}).get("out_hex", "")),
                   cmd["ret"])


for line in open(sys.argv[1]):
    r = json.loads(line)
    pages = {}
    for cin, out, ret in cmds(r, "open_cmds"):
        if cin[0:2] == b"\x01\x00" and ret == 0:  # QUERY_HCA_CAP
            pages[int.from_bytes(cin[6:8], "big")] = out[16:16 + 256].hex()
    print(json.dumps({
        "kind": "caps",
        "case": r["case"],
        "device": r["input"]["device"],
        "general": pages.get(0x0001, ""),
        "crypto": pages.get(0x0035, ""),
    }))

for line in open(sys.argv[2]):
    r = json.loads(line)
    for cin, out, ret in cmds(r, "kernel_cmds"):
        if cin[0:2] not in (b"\x0a\x00", b"\x0a\x02"):
            continue
        print(json.dumps({
            "kind": "obj",
            "case": r["case"],
            "input": r["input"],
            "result": r["result"],
            "ret": ret,
            "cmd_in": cin.hex(),
            "cmd_out": out.hex(),
        }))
