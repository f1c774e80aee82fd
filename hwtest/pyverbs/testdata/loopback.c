/*
 * loopback: two RC QPs on mlx5_0 connected to each other through
 * libibverbs and libmlx5, an RDMA WRITE from one buffer to the other, a
 * SEND into a posted RECV, and the completions polled with ibv_poll_cq
 * and through a completion channel. Public verbs API only; prints "ok"
 * and exits 0 when the data arrived.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#define N 4096
#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)

static struct ibv_wc poll_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	struct timespec t0, t;
	int n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			FAIL("poll cq: %d", n);
		if (n == 1)
			return wc;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			FAIL("no completion in 20 s");
	}
}

static void to_rts(struct ibv_qp *qp, uint32_t dqpn, union ibv_gid *gid, int gidx)
{
	struct ibv_qp_attr a = {0};

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		FAIL("modify INIT: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = gidx;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		FAIL("modify RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("modify RTS: %s", strerror(errno));
}

int main(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *scq, *rcq, *evcq;
	struct ibv_qp *qa, *qb;
	struct ibv_mr *ma, *mb;
	union ibv_gid gid;
	char *a, *b;
	int i, gidx = 1;

	if (!l || !l[0])
		FAIL("no device");
	ctx = ibv_open_device(l[0]);
	if (!ctx)
		FAIL("open device: %s", strerror(errno));
	if (ibv_query_gid(ctx, 1, gidx, &gid))
		FAIL("query gid: %s", strerror(errno));
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		FAIL("alloc pd: %s", strerror(errno));
	a = aligned_alloc(4096, N);
	b = aligned_alloc(4096, N);
	for (i = 0; i < N; i++) {
		a[i] = (char)(i * 7 + 1);
		b[i] = 0;
	}
	ma = ibv_reg_mr(pd, a, N, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	mb = ibv_reg_mr(pd, b, N, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!ma || !mb)
		FAIL("reg mr: %s", strerror(errno));
	ch = ibv_create_comp_channel(ctx);
	if (!ch)
		FAIL("comp channel: %s", strerror(errno));
	scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	rcq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	evcq = ibv_create_cq(ctx, 64, NULL, ch, 0);
	if (!scq || !rcq || !evcq)
		FAIL("create cq: %s", strerror(errno));
	struct ibv_qp_init_attr ia = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	qa = ibv_create_qp(pd, &ia);
	ia.recv_cq = evcq;
	qb = ibv_create_qp(pd, &ia);
	if (!qa || !qb)
		FAIL("create qp: %s", strerror(errno));
	to_rts(qa, qb->qp_num, &gid, gidx);
	to_rts(qb, qa->qp_num, &gid, gidx);

	/* RDMA WRITE a -> b */
	struct ibv_sge sge = { .addr = (uintptr_t)a, .length = N, .lkey = ma->lkey };
	struct ibv_send_wr wr = { .wr_id = 0x77, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.rdma.remote_addr = (uintptr_t)b;
	wr.wr.rdma.rkey = mb->rkey;
	if (ibv_post_send(qa, &wr, &bad))
		FAIL("post send: %s", strerror(errno));
	struct ibv_wc wc = poll_one(scq);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 0x77 || wc.opcode != IBV_WC_RDMA_WRITE)
		FAIL("write completion: status %s wr_id %#lx opcode %d", ibv_wc_status_str(wc.status),
		     (unsigned long)wc.wr_id, wc.opcode);
	if (memcmp(a, b, N))
		FAIL("RDMA WRITE: data differ");
	printf("rdma write %d bytes: ok\n", N);

	/* SEND a -> RECV into b, completion through the channel */
	memset(b, 0, N);
	if (ibv_req_notify_cq(evcq, 0))
		FAIL("req notify: %s", strerror(errno));
	struct ibv_sge rsge = { .addr = (uintptr_t)b, .length = N, .lkey = mb->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 0x99, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	if (ibv_post_recv(qb, &rwr, &rbad))
		FAIL("post recv: %s", strerror(errno));
	sge.length = 100;
	wr.opcode = IBV_WR_SEND;
	wr.wr_id = 0x78;
	if (ibv_post_send(qa, &wr, &bad))
		FAIL("post send: %s", strerror(errno));
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	if (poll(&pfd, 1, 20000) != 1)
		FAIL("no completion event in 20 s");
	struct ibv_cq *ecq;
	void *ectx;
	if (ibv_get_cq_event(ch, &ecq, &ectx) || ecq != evcq)
		FAIL("get cq event");
	ibv_ack_cq_events(ecq, 1);
	wc = poll_one(evcq);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 0x99 || wc.opcode != IBV_WC_RECV || wc.byte_len != 100)
		FAIL("recv completion: status %s wr_id %#lx opcode %d len %u", ibv_wc_status_str(wc.status),
		     (unsigned long)wc.wr_id, wc.opcode, wc.byte_len);
	if (memcmp(a, b, 100))
		FAIL("SEND: data differ");
	wc = poll_one(scq);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 0x78)
		FAIL("send completion: %s", ibv_wc_status_str(wc.status));
	printf("send/recv 100 bytes with a completion event: ok\n");

	if (ibv_destroy_qp(qa) || ibv_destroy_qp(qb) || ibv_destroy_cq(scq) || ibv_destroy_cq(rcq) ||
	    ibv_destroy_cq(evcq) || ibv_destroy_comp_channel(ch) || ibv_dereg_mr(ma) || ibv_dereg_mr(mb) ||
	    ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		FAIL("teardown: %s", strerror(errno));
	ibv_free_device_list(l);
	printf("ok\n");
	return 0;
}
