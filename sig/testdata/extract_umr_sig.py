# Derives sig/testdata/umr_sig_attrs.jsonl from the oracle's umr_sig.jsonl:
# one line per record that calls mlx5dv_wr_set_mkey_sig_block.
import json, sys
src = sys.argv[1]
for line in open(src):
    r = json.loads(line)
    setters = r['input'].get('setters', [])
    sb = [s for s in setters if s.get('op') == 'wr_set_mkey_sig_block']
    if not sb:
        continue
    out = {'case': r['case'], 'sig_block_attr': sb[0]['sig_block_attr'],
           'wr_complete': r['result']['wr_complete'], 'errno_name': r['result']['errno_name']}
    sq = r.get('sq') or {}
    wqebbs = sq.get('wqebbs', [])
    wqes = sq.get('wqes', [])
    if r['result']['wr_complete'] == 0 and wqes:
        data = bytes.fromhex(''.join(w['hex'] for w in wqebbs))
        umr = wqes[0]
        assert umr['opcode'] == '0x25'
        klm = int.from_bytes(data[16+4:16+6], 'big')
        bsf_oct = int.from_bytes(data[16+6:16+8], 'big')
        bsf = 16 + 48 + 64 + klm * 16
        if bsf_oct:
            out['bsf_basic'] = data[bsf:bsf+4].hex()
        psv = []
        for w in wqes[1:]:
            if w['opcode'] == '0x20':
                off = w['first_wqebb'] * 64
                psv.append(data[off+24:off+32].hex())
        out['psv_transient_signatures'] = psv
    print(json.dumps(out, separators=(',', ':')))
