package model

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mlx5go/mlx5go/prm"
)

// Doorbells: the HCA learns of new send WQEs from the driver's write into
// its UAR page: the first 8 bytes of the last WQE's control segment
// (opmod_idx_opcode, qpn_ds), at the start of one of the page's 256-byte
// BlueFlame halves (the driver alternates them), or the whole WQE there
// (BlueFlame); and of CQ arms from the 8-byte write at 0x20 (arm.go). The model's UAR pages are plain memory, so a goroutine per
// context watches them: it takes each new value with a compare-and-swap
// to zero, so that a write that lands meanwhile is not lost.

// The BlueFlame halves of a 4 KiB UAR page: 0x800 to 0xF00, every 0x100.
const (
	bfFirst = 0x800
	bfLast  = 0xf00
	bfStep  = 0x100
)

// Polling: after a doorbell the poller spins (yielding) for spinPolls
// scans, then sleeps, from minSleep doubling up to maxSleep.
const (
	spinPolls = 256
	minSleep  = 5 * time.Microsecond
	maxSleep  = time.Millisecond
)

// poller watches the mapped UAR pages of one context.
type poller struct {
	d *Device

	mu    sync.Mutex // guards pages; held while they are read
	pages []uarPage

	quit chan struct{}
	done chan struct{}
}

type uarPage struct {
	mem []byte
	id  uint32 // the UAR page number (uar_page in a qpc)
}

// ring is one doorbell value taken from a page.
type ring struct {
	page uint32
	val  [8]byte // the bytes as written: opmod_idx_opcode, qpn_ds (big-endian); for a CQ, the arm word and the CQN
	cq   bool    // a CQ arm (offset 0x20), not a send doorbell
}

// watch adds a mapped page to the context's poller, starting it. Called
// under the HCA's lock.
func (d *Device) watch(mem []byte, id uint32) {
	if d.pl == nil {
		d.pl = &poller{d: d, quit: make(chan struct{}), done: make(chan struct{})}
		go d.pl.run()
	}
	d.pl.mu.Lock()
	d.pl.pages = append(d.pl.pages, uarPage{mem, id})
	d.pl.mu.Unlock()
}

// unwatch removes a page from the poller; once it has returned, the poller
// no longer reads the page. When it was the last page the poller is
// stopped and returned, for the caller to wait for without the HCA's lock.
func (d *Device) unwatch(mem []byte) *poller {
	pl := d.pl
	if pl == nil {
		return nil
	}
	pl.mu.Lock()
	for i, p := range pl.pages {
		if unsafe.SliceData(p.mem) == unsafe.SliceData(mem) {
			pl.pages = append(pl.pages[:i], pl.pages[i+1:]...)
			break
		}
	}
	n := len(pl.pages)
	pl.mu.Unlock()
	if n > 0 {
		return nil
	}
	d.pl = nil
	pl.stop()
	d.finishDrains() // the goroutine that owed them is gone
	return pl
}

func (pl *poller) stop() { close(pl.quit) }

// wait waits until the stopped poller's goroutine has returned.
func (pl *poller) wait() { <-pl.done }

func (pl *poller) run() {
	defer close(pl.done)
	var rings []ring
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	idle, sleep := 0, minSleep
	for {
		select {
		case <-pl.quit:
			return
		default:
		}
		if pl.d.pendingDrains.Load() > 0 {
			pl.d.endDrains()
		}
		var n int
		rings, n = pl.poll(rings)
		// RNR retries are due by the clock, busy or not: a QP waiting
		// out an RNR NAK must not starve while others keep ringing.
		if pl.d.h.rnrWaiting.Load() > 0 {
			pl.d.retryRNR()
		}
		if n > 0 {
			idle, sleep = 0, minSleep
			continue
		}
		if idle < spinPolls {
			idle++
			runtime.Gosched()
			continue
		}
		timer.Reset(sleep)
		select {
		case <-pl.quit:
			timer.Stop()
			return
		case <-timer.C:
		}
		sleep = min(2*sleep, maxSleep)
	}
}

// scan takes the doorbell values written since the last scan.
func (pl *poller) scan(rings []ring) []ring {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, p := range pl.pages {
		rings = take(rings, p, cqDoorbell, true)
		for off := bfFirst; off <= bfLast; off += bfStep {
			rings = take(rings, p, off, false)
		}
	}
	return rings
}

// take takes the 8-byte value at off of a page, if one was written,
// leaving 0 in its place.
func take(rings []ring, p uarPage, off int, cq bool) []ring {
	w := (*uint64)(unsafe.Pointer(&p.mem[off]))
	for {
		v := atomic.LoadUint64(w)
		if v == 0 {
			return rings
		}
		if atomic.CompareAndSwapUint64(w, v, 0) {
			r := ring{page: p.id, cq: cq}
			binary.NativeEndian.PutUint64(r.val[:], v)
			return append(rings, r)
		}
	}
}

// poll takes the doorbell values written since the last pass and runs
// them, and returns how many it took. It takes them under the HCA's lock,
// so a command of the context comes either before the take (and a destroy
// runs them itself, runPending) or after they ran: never between.
func (pl *poller) poll(rings []ring) ([]ring, int) {
	d := pl.d
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if d.closed {
		return rings, 0
	}
	rings = pl.scan(rings[:0])
	d.doorbells(rings)
	return rings, len(rings)
}

// runPending runs the doorbells written to the context's UAR pages that
// its poller has not taken yet; the caller holds the HCA's lock. A destroy
// runs them first: the driver rang before it destroyed, and a device
// sees a doorbell when it is written, so the QP or CQ it names is still
// there for it (not a doorbell for no QP of the context).
func (d *Device) runPending() {
	if d.pl != nil && !d.closed {
		d.doorbells(d.pl.scan(nil))
	}
}

// doorbells runs what the doorbells ask for, under the HCA's lock.
func (d *Device) doorbells(rings []ring) {
	for _, r := range rings {
		if r.cq {
			d.h.cqDoorbell(d.id, r.page, r.val)
			continue
		}
		d.h.doorbell(d.id, r.page, r.val)
	}
}

// endDrains ends the send queue drains the context owes (see drainStop).
func (d *Device) endDrains() {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	d.finishDrains()
}

func (d *Device) retryRNR() {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if !d.closed {
		d.h.retryRNR(d.id, time.Now())
	}
}

// doorbell is one doorbell of context ctx on UAR page page: the QP the
// value names must be the context's and use that page (qpc.uar_page);
// then its send queue runs. So do the other QPs of the context on the
// page whose doorbell record is ahead of the hardware: two rings on one
// BlueFlame half between two scans leave only the second in the model's
// memory, where hardware would have seen both.
func (h *hca) doorbell(ctx ctxID, page uint32, val [8]byte) {
	qpn := binary.BigEndian.Uint32(val[4:]) >> 8
	q, ok := h.qps[qpn]
	if !ok || q.ctx != ctx {
		h.fault(ctx, "doorbell %x on UAR page %#x names QP %#x, which is not this context's", val, page, qpn)
		return
	}
	if p := uint32(prm.Qpc.UarPage.Get(q.qpc)); p != page {
		h.fault(ctx, "doorbell %x for QP %#x on UAR page %#x, but the QP's uar_page is %#x", val, qpn, page, p)
		return
	}
	h.runSQ(q)
	for _, o := range h.qps {
		if o != q && o.ctx == ctx && uint32(prm.Qpc.UarPage.Get(o.qpc)) == page && o.dbr != nil && o.sq.entries > 0 &&
			uint16(dbrWord(o.dbr, 1)) != o.sqCI {
			h.runSQ(o)
		}
	}
}

// Faults returns what the data path found wrong with this context's use
// of it, oldest first, for tests: doorbells that name no QP of the
// context or come through another UAR page, doorbell records past the
// ring, WQEs past the doorbell record, CQ overruns, CQEs due on a CQ
// without a buffer, and what the model does not run (which the WQE's
// error completion also reports). Errors a WQE meets as hardware would
// (a bad key, no receive WQE...) are not faults: they are completions,
// and WQEErrors says why.
func (d *Device) Faults() []string { return d.log(&d.h.faults) }

// WQEErrors returns, oldest first, why each WQE of this context's QPs
// that completed with an error (other than a flush) failed, for tests
// and debugging.
func (d *Device) WQEErrors() []string { return d.log(&d.h.wqeErrors) }

func (d *Device) log(l *[]fault) []string {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	var out []string
	for _, f := range *l {
		if f.ctx == d.id {
			out = append(out, f.msg)
		}
	}
	return out
}
