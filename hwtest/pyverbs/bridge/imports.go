package main

import (
	"github.com/mlx5go/mlx5go/internal/seam"
	u "github.com/mlx5go/mlx5go/internal/uverbsabi"
	"golang.org/x/sys/unix"
)

// What ib_uverbs and mlx5_ib keep of a PD and an MR and answer the
// queries ibv_import_pd and ibv_import_mr send (a context imported from a
// dup of the command fd shares the objects: rdma-core's test_shared_pd).
// The kernel reads them off its ib_pd and ib_mr; the bridge keeps them
// from the responses it gave.

// Attributes of UVERBS_METHOD_QUERY_MR (enum
// uverbs_attrs_query_mr_cmd_attr_ids) and mlx5's MLX5_IB_METHOD_PD_QUERY
// (enum mlx5_ib_pd_query_attrs), which internal/uverbsabi and
// internal/mlx5abi do not mirror.
const (
	attrQueryMRHandle     = 0
	attrQueryMRRespLKey   = 1
	attrQueryMRRespRKey   = 2
	attrQueryMRRespLength = 3
	attrQueryMRRespIOVA   = 4

	methodPDQuery      = 1 << u.UVERBS_ID_NS_SHIFT
	attrQueryPDHandle  = 1 << u.UVERBS_ID_NS_SHIFT
	attrQueryPDRespPDN = 1<<u.UVERBS_ID_NS_SHIFT + 1
)

// mrFacts are what QUERY_MR answers.
type mrFacts struct {
	lkey, rkey   uint32
	length, iova uint64
}

func (x *context) rememberPD(h seam.Handle, pdn uint32) {
	mu.Lock()
	defer mu.Unlock()
	x.pds[h] = pdn
}

func (x *context) rememberMR(h seam.Handle, f mrFacts) {
	mu.Lock()
	defer mu.Unlock()
	x.mrs[h] = f
}

// forgetObj drops a destroyed PD's or MR's facts once the destroy
// succeeded.
func (x *context) forgetObj(destroy func(seam.Handle) error) func(seam.Handle) error {
	return func(h seam.Handle) error {
		if err := destroy(h); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		delete(x.pds, h)
		delete(x.mrs, h)
		return nil
	}
}

// queryPD is MLX5_IB_METHOD_PD_QUERY: the PD's number.
func (x *context) queryPD(c *call) error {
	h, ok := c.idr(attrQueryPDHandle)
	if !ok {
		return errMissing
	}
	mu.Lock()
	pdn, ok := x.pds[seam.Handle(h)]
	mu.Unlock()
	if !ok {
		return unix.EINVAL // uverbs_attr_get_obj of no such PD
	}
	c.outU32(attrQueryPDRespPDN, pdn)
	return nil
}

// queryMR is UVERBS_METHOD_QUERY_MR: its keys, length and iova.
func (x *context) queryMR(c *call) error {
	h, ok := c.idr(attrQueryMRHandle)
	if !ok {
		return errMissing
	}
	mu.Lock()
	f, ok := x.mrs[seam.Handle(h)]
	mu.Unlock()
	if !ok {
		return unix.EINVAL
	}
	c.outU32(attrQueryMRRespLKey, f.lkey)
	c.outU32(attrQueryMRRespRKey, f.rkey)
	c.outU64(attrQueryMRRespLength, f.length)
	c.outU64(attrQueryMRRespIOVA, f.iova)
	return nil
}
