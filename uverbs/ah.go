package uverbs

import (
	"fmt"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// AH is an address handle, the destination of UD sends.
type AH struct{ object }

// CreateAH creates an address handle for attr on the PD. drvOut receives
// the provider's response (mlx5: struct mlx5_ib_create_ah_resp); it may be
// nil.
func (p *PD) CreateAH(attr *AHAttr, drvOut []byte) (*AH, error) {
	return p.CreateAHWithUserHandle(attr, 0, drvOut)
}

// CreateAHWithUserHandle is CreateAH with the user handle the kernel
// records for the AH (libibverbs sends its object's address; nothing
// reports it back).
func (p *PD) CreateAHWithUserHandle(attr *AHAttr, userHandle uint64, drvOut []byte) (*AH, error) {
	if attr.Port == 0 {
		return nil, fmt.Errorf("uverbs: create ah: port 0: ports are numbered from 1")
	}
	d := encodeAH(attr)
	cmd := uverbsabi.IbUverbsCreateAh{UserHandle: userHandle, PdHandle: p.handle, Attr: uverbsabi.IbUverbsAhAttr{
		Grh: uverbsabi.IbUverbsGlobalRoute{Dgid: d.Dgid, FlowLabel: d.FlowLabel, SgidIndex: d.SgidIndex,
			HopLimit: d.HopLimit, TrafficClass: d.TrafficClass},
		Dlid: d.Dlid, Sl: d.Sl, SrcPathBits: d.SrcPathBits, StaticRate: d.StaticRate,
		IsGlobal: d.IsGlobal, PortNum: d.PortNum}}
	var resp uverbsabi.IbUverbsCreateAhResp
	if err := p.ctx.InvokeWrite("create ah", uverbsabi.IB_USER_VERBS_CMD_CREATE_AH, asBytes(&cmd), asBytes(&resp), nil, drvOut); err != nil {
		return nil, err
	}
	ah := &AH{object{ctx: p.ctx, handle: resp.AhHandle}}
	if err := p.ctx.adopt(ah); err != nil {
		return nil, err
	}
	return ah, nil
}

// Close destroys the AH. Closing twice is safe.
func (ah *AH) Close() error {
	cmd := uverbsabi.IbUverbsDestroyAh{AhHandle: ah.handle}
	return ah.destroy(ah, destroyCall{op: "destroy ah", object: uverbsabi.UVERBS_OBJECT_AH, method: uverbsabi.UVERBS_METHOD_AH_DESTROY,
		handleAttr: uverbsabi.UVERBS_ATTR_DESTROY_AH_HANDLE, writeCmd: uverbsabi.IB_USER_VERBS_CMD_DESTROY_AH, cmd: asBytes(&cmd)})
}
