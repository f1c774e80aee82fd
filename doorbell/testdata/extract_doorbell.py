# Derives doorbell/testdata/doorbells.jsonl from the oracle's umr_sig.jsonl,
# datapath.jsonl and wrap.jsonl: one line per post (a umr_sig or wrap record
# is one post; a datapath record lists its posts), with the WQEs that post
# wrote (each with its ring slots and WQEBB bytes, in posting order), the
# producer counters before and after, and the doorbell record and BlueFlame
# area libmlx5 left behind.
#
#   python3 doorbell/testdata/extract_doorbell.py /work/shared/oracle/vectors > doorbell/testdata/doorbells.jsonl
import json, os, sys

vec = sys.argv[1]


def wqes_of(r, before, after):
    sq = r.get('sq') or {}
    slots = {w['index']: w['hex'] for w in sq.get('wqebbs', [])}
    cnt = r['qp']['sq_wqe_cnt']
    n = (after - before) & 0xffff
    out = []
    for w in sq.get('wqes', []):
        # wqe_index is the 16-bit producer counter of the WQE's first WQEBB
        if (w['wqe_index'] - before) & 0xffff >= n:
            continue
        first = w['wqe_index'] % cnt
        idx = [(first + i) % cnt for i in range(w['num_wqebbs'])]
        out.append({'counter': w['wqe_index'], 'ds': w['ds'], 'opcode': w['opcode'],
                    'slots': idx, 'wqebbs': [slots[i] for i in idx]})
    out.sort(key=lambda w: (w['counter'] - before) & 0xffff)
    return out


def emit(fam, r, post, api, ret, sb, sa, rb, ra, dbrec, bf):
    q = r['qp']
    print(json.dumps({
        'source': fam, 'case': r['case'], 'post': post, 'api': api, 'ret': ret,
        'qp': {'name': q.get('name'), 'qpn': q['qpn'], 'sq_wqe_cnt': q['sq_wqe_cnt'],
               'bf_size': bf['size']},
        'sq_pi_before': sb, 'sq_pi_after': sa, 'rq_pi_before': rb, 'rq_pi_after': ra,
        'wqes': wqes_of(r, sb, sa) if sb is not None else [],
        'dbrec': {'recv_counter_be32': dbrec['recv_counter_be32'],
                  'send_counter_be32': dbrec['send_counter_be32']},
        'bf': bf}, separators=(',', ':')))


for fam in ('umr_sig', 'datapath', 'wrap'):
    for line in open(os.path.join(vec, fam + '.jsonl')):
        r = json.loads(line)
        posts = r['result'].get('posts')
        if posts is None:  # umr_sig schema: one ibv_wr_start .. ibv_wr_complete
            emit(fam, r, 0, 'ibv_wr', r['result']['wr_complete'], r['sq_pi_before'],
                 r['sq_pi_after'], 0, 0, r['dbrec'], r['bf'])
            continue
        for i, p in enumerate(posts):
            emit(fam, r, i, p['api'], p['ret'], p['sq_pi_before'], p['sq_pi_after'],
                 p.get('rq_pi_before', 0), p.get('rq_pi_after', 0), p['dbrec'], p['bf'])
