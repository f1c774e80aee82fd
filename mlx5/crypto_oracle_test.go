package mlx5

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// The crypto caps, login and DEK commands against libmlx5 44.0
// (testdata/crypto_caps.jsonl and crypto_objs.jsonl, README): every
// record's libmlx5 call is made through mlx5's API on a context whose
// kernel replays the record. Each ioctl mlx5 sends must be the next one
// libmlx5 sent, byte for byte (oracle.Compare; handles and fds by value),
// and is answered with the recorded output, new handle and errno; when
// the call returns, every recorded ioctl must have been sent. The result
// (ok or errno, state, opaque, caps) must be libmlx5's, except where
// cryptoDifferences says why mlx5 refuses what libmlx5 accepted.

// replay is a recording context that answers from a list of recorded
// ioctls, in order.
type replay struct {
	*Context
	t    *testing.T
	kase string
	want []replayCall
	over bool // the test is over: the context's Close is answered, not checked
}

// replayCall is a recorded ioctl with its attributes' handles: the value
// an idr_in or idr_destroy attribute carried, the one an idr_new got.
type replayCall struct {
	oracle.Call
	ret     int // the errno the kernel returned
	handles []struct {
		Value    uint64 `json:"value"`
		Returned uint64 `json:"returned"`
	}
}

// replayCalls decodes a recorded command list.
func replayCalls(t *testing.T, raw json.RawMessage) []replayCall {
	t.Helper()
	if len(raw) == 0 {
		return nil
	}
	var calls []oracle.Call
	var handles []struct {
		Ret   int `json:"ret"`
		Attrs []struct {
			Value    uint64 `json:"value"`
			Returned uint64 `json:"returned"`
		} `json:"attrs"`
	}
	if err := json.Unmarshal(raw, &calls); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &handles); err != nil {
		t.Fatal(err)
	}
	out := make([]replayCall, len(calls))
	for i := range calls {
		out[i].Call, out[i].ret = calls[i], handles[i].Ret
		for _, a := range handles[i].Attrs {
			out[i].handles = append(out[i].handles, struct {
				Value    uint64 `json:"value"`
				Returned uint64 `json:"returned"`
			}{a.Value, a.Returned})
		}
	}
	return out
}

func newReplay(t *testing.T) *replay {
	r := &replay{t: t}
	uctx := uverbs.NewRecordingContext(uverbs.DriverMLX5, func(c *uverbs.Call) unix.Errno {
		t.Helper()
		if r.over {
			return 0
		}
		if len(r.want) == 0 {
			t.Errorf("%s: mlx5 sent %s %d/%d, libmlx5 nothing more", r.kase, c.Op, c.Hdr.ObjectID, c.Hdr.MethodID)
			return unix.EPROTO
		}
		w := r.want[0]
		r.want = r.want[1:]
		oracle.Compare(t, w.Call, got(c))
		for i, a := range w.Attrs {
			if i >= len(c.Attrs) {
				break
			}
			switch a.Dir {
			case "out":
				copy(c.Data[i], oracle.Unhex(t, a.OutHex))
			case "idr_new":
				c.Attrs[i].Data = w.handles[i].Returned
			case "idr_in", "idr_destroy":
				if c.Attrs[i].Data != w.handles[i].Value {
					t.Errorf("%s: %s %s: handle %d, libmlx5 %d", r.kase, w.Object, w.Method, c.Attrs[i].Data, w.handles[i].Value)
				}
			}
		}
		return unix.Errno(w.ret)
	})
	r.Context = NewContext(&kernelDevice{ctx: uctx, devx: true})
	t.Cleanup(func() { r.over = true; r.Context.Close() })
	return r
}

// expect queues the record's ioctls (of the DEVX objects, and the general
// commands) for the next call.
func (r *replay) expect(kase string, raw json.RawMessage) {
	r.t.Helper()
	if len(r.want) != 0 {
		r.t.Errorf("%s: mlx5 did not send %s, which libmlx5 sent", r.kase, r.want[0].Call)
	}
	r.kase, r.want = kase, nil
	for _, k := range replayCalls(r.t, raw) {
		if k.Op == "ioctl" && strings.HasPrefix(k.Object, "MLX5_DEVX") {
			r.want = append(r.want, k)
		}
	}
}

// done fails the test if a recorded ioctl was not sent.
func (r *replay) done() {
	r.t.Helper()
	if len(r.want) != 0 {
		r.t.Errorf("%s: mlx5 did not send %s, which libmlx5 sent", r.kase, r.want[0].Call)
	}
	r.want = nil
}

// openCaps replays a device open's QUERY_HCA_CAPs: the general caps, then
// the crypto page when libmlx5 read it (CryptoCaps reads it on first
// need; libmlx5 at open). It returns the PD numbers the open allocated.
func (r *replay) openCaps(kase string, open json.RawMessage) []uint32 {
	r.t.Helper()
	var pdns []uint32
	for _, k := range replayCalls(r.t, open) {
		if k.Object == "DEVICE" && k.Method == "INVOKE_WRITE" && len(k.Attrs) == 4 && k.Attrs[0].Hex == "0300000000000000" {
			pdns = append(pdns, uint32(leUint(oracle.Unhex(r.t, k.Attrs[3].OutHex))))
		}
	}
	r.expect(kase, open)
	if _, err := r.CryptoCaps(); err != nil {
		r.t.Fatalf("%s: CryptoCaps: %v", kase, err)
	}
	r.done()
	return pdns
}

func leUint(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// pd is a PD of the replayed context with the recorded number (its verbs
// allocation is covered by the verbs replay tests).
func (r *replay) pd(pdn uint32) *PD { return &PD{c: r.Context, handle: 1, pdn: pdn} }

// isErrnoNamed reports whether err is nil for name "", else wraps the
// errno the vectors name so.
func isErrnoNamed(err error, name string) bool {
	if name == "" || err == nil {
		return name == "" && err == nil
	}
	e, ok := vectorErrnos[name]
	return ok && errors.Is(err, e)
}

// vectorErrnos are the errnos the crypto vectors name.
var vectorErrnos = map[string]unix.Errno{"EINVAL": unix.EINVAL, "EOPNOTSUPP": unix.EOPNOTSUPP, "ENOENT": unix.ENOENT,
	"EEXIST": unix.EEXIST, "EIO": unix.EIO, "ENOMEM": unix.ENOMEM, "EBUSY": unix.EBUSY}

// cryptoDifferences are the records where mlx5 refuses what libmlx5
// accepted, by case, and why (docs/MLX5.md, "Differences from libmlx5").
// mlx5 sends nothing for them.
var cryptoDifferences = map[string]string{
	"login_obj/create_len0":   "EINVAL: an empty credential (libmlx5 sends 48 zero bytes)",
	"login_obj/create_len64":  "EINVAL: a 64-byte credential, longer than the 48-byte field (libmlx5 writes past it into reserved bytes)",
	"login_obj/create_len192": "EINVAL: a 192-byte credential, longer than the 48-byte field (libmlx5 writes past it into reserved bytes)",
	"dek/wrapped_multi/wrapped_login_object/key_garbage_past_meaningful_len": "EINVAL: a 128-byte key for a 40-byte wrapped 128-bit key (libmlx5 sends all 128 bytes)",
	"dek/plaintext_multi/plaintext/key_garbage_past_meaningful_len":          "EINVAL: a 128-byte key for a 32-byte plaintext 128-bit key (libmlx5 sends all 128 bytes)",
}

// cryptoInexpressible are the records mlx5's API cannot state: a
// comp_mask (there is none), a key purpose other than AES-XTS (the only
// one). libmlx5 refused all of them with EINVAL before any command.
func cryptoInexpressible(kase string) bool {
	return strings.Contains(kase, "comp_mask") || strings.Contains(kase, "key_purpose_1")
}

type cryptoObjsRecord struct {
	Case  string `json:"case"`
	Input struct {
		Call      string `json:"call"`
		ObjID     string `json:"obj_id"`
		LoginAttr *struct {
			CredentialID string `json:"credential_id"`
			ImportKEKID  string `json:"import_kek_id"`
			Credential   string `json:"credential"`
		} `json:"login_attr"`
		LoginAttrEx *struct {
			CredentialID string `json:"credential_id"`
			ImportKEKID  string `json:"import_kek_id"`
			Credential   string `json:"credential"`
		} `json:"login_attr_ex"`
		DEK *struct {
			KeySize    int    `json:"key_size"`
			HasKeytag  bool   `json:"has_keytag"`
			PDNOf      string `json:"pdn_of"`
			Mode       string `json:"mode"`
			MeaningLen int    `json:"key_meaningful_len"`
			Garbage    bool   `json:"key_garbage_tail"`
			Opaque     string `json:"opaque"`
			Key        string `json:"key"`
		} `json:"dek_init_attr"`
	} `json:"input"`
	Result struct {
		Ret       int     `json:"ret"`
		OK        *bool   `json:"ok"`
		ErrnoName string  `json:"errno_name"`
		ObjID     string  `json:"obj_id"`
		StateName *string `json:"state_name"`
		Opaque    string  `json:"opaque"`
	} `json:"result"`
	KernelCmds json.RawMessage `json:"kernel_cmds"`
}

var loginStateMLX5DV = map[LoginState]string{LoginNone: "MLX5DV_CRYPTO_LOGIN_STATE_NO_LOGIN",
	LoginValid: "MLX5DV_CRYPTO_LOGIN_STATE_VALID", LoginInvalid: "MLX5DV_CRYPTO_LOGIN_STATE_INVALID"}
var dekStateMLX5DV = map[DEKState]string{DEKReady: "MLX5DV_DEK_STATE_READY", DEKError: "MLX5DV_DEK_STATE_ERROR"}

func TestOracleCryptoObjects(t *testing.T) {
	var r *replay
	var pd, pd2 *PD
	logins := map[string]*CryptoLoginObj{}
	deks := map[string]*DEK{}
	var lastLogin *CryptoLoginObj
	n, skipped := 0, 0
	oracle.Records(t, "testdata/crypto_objs.jsonl", func(*cryptoObjsRecord) bool { return true }, func(rec *cryptoObjsRecord) {
		n++
		if strings.HasPrefix(rec.Case, "setup/") {
			r = newReplay(t)
			pdns := r.openCaps(rec.Case, rec.KernelCmds)
			pd, pd2 = r.pd(pdns[0]), nil
			return
		}
		if strings.HasPrefix(rec.Case, "mkey/") {
			return // the crypto mkeys' replays are the mkey tests'
		}
		if cryptoInexpressible(rec.Case) {
			if k := replayCalls(t, rec.KernelCmds); rec.Result.ErrnoName != "EINVAL" || len(k) != 0 {
				t.Errorf("%s: libmlx5 %q with %d commands; the skip assumes EINVAL and none", rec.Case, rec.Result.ErrnoName, len(k))
			}
			skipped++
			return
		}
		in := rec.Input
		if (in.Call == "mlx5dv_crypto_login_destroy" && logins[in.ObjID] == nil) || (in.Call == "mlx5dv_dek_destroy" && deks[in.ObjID] == nil) {
			// The create was one of cryptoDifferences: nothing to destroy.
			if !strings.Contains(rec.Case, "_len") && !strings.Contains(rec.Case, "garbage") {
				t.Errorf("%s: destroys %s, which mlx5 did not create", rec.Case, in.ObjID)
			}
			skipped++
			return
		}
		why, differs := cryptoDifferences[rec.Case]
		if differs {
			r.expect(rec.Case, nil)
		} else {
			r.expect(rec.Case, rec.KernelCmds)
		}
		var err error
		var state, opaque string
		var obj any
		switch in.Call {
		case "mlx5dv_crypto_login":
			a := in.LoginAttr
			err = r.CryptoLogin(LoginOptions{CredentialID: uint32(oracle.Num(t, a.CredentialID)), ImportKEKID: uint32(oracle.Num(t, a.ImportKEKID)),
				Credential: oracle.Unhex(t, a.Credential)})
		case "mlx5dv_crypto_login_query_state":
			var st LoginState
			if st, err = r.CryptoLoginState(); err == nil {
				state = loginStateMLX5DV[st]
			}
		case "mlx5dv_crypto_logout":
			err = r.CryptoLogout()
		case "mlx5dv_crypto_login_create":
			a := in.LoginAttrEx
			var l *CryptoLoginObj
			l, err = r.CreateCryptoLogin(LoginOptions{CredentialID: uint32(oracle.Num(t, a.CredentialID)), ImportKEKID: uint32(oracle.Num(t, a.ImportKEKID)),
				Credential: oracle.Unhex(t, a.Credential)})
			if err == nil {
				logins[rec.Result.ObjID], lastLogin, obj = l, l, l
			}
		case "mlx5dv_crypto_login_query":
			var st LoginState
			if st, err = logins[in.ObjID].State(); err == nil {
				state = loginStateMLX5DV[st]
			}
		case "mlx5dv_crypto_login_destroy":
			l := logins[in.ObjID]
			err = l.Close()
			if l == lastLogin {
				lastLogin = nil
			}
		case "mlx5dv_dek_create":
			a := in.DEK
			p := pd
			if a.PDNOf == "pd2" {
				if pd2 == nil { // allocated without a record: its number from the command
					in := oracle.Unhex(t, replayCalls(t, rec.KernelCmds)[0].Attrs[1].Hex)
					pd2 = r.pd(uint32(prm.EncryptionKeyObj.Pd.At(prm.CreateEncryptionKeyIn.EncryptionKeyObject).Get(in)))
				}
				p = pd2
			}
			o := DEKOptions{KeyBits: map[int]int{0: 128, 1: 256}[a.KeySize], HasKeytag: a.HasKeytag, Key: oracle.Unhex(t, a.Key)}
			copy(o.Opaque[:], oracle.Unhex(t, a.Opaque))
			if !a.Garbage {
				o.Key = o.Key[:a.MeaningLen]
			}
			switch a.Mode {
			case "plaintext":
				o.Plaintext = true
			case "wrapped_login_object":
				o.Login = lastLogin
			}
			var d *DEK
			d, err = p.CreateDEK(o)
			if err == nil {
				deks[rec.Result.ObjID], obj = d, d
			}
		case "mlx5dv_dek_query":
			var info DEKInfo
			if info, err = deks[in.ObjID].Query(); err == nil {
				state, opaque = dekStateMLX5DV[info.State], hex.EncodeToString(info.Opaque[:])
			}
		case "mlx5dv_dek_destroy":
			err = deks[in.ObjID].Close()
		default:
			t.Fatalf("%s: call %s", rec.Case, in.Call)
		}
		r.done()
		libOK := rec.Result.Ret == 0 && (rec.Result.OK == nil || *rec.Result.OK)
		switch {
		case differs:
			if libOK != true || !errors.Is(err, unix.EINVAL) {
				t.Errorf("%s: %v; want %s (libmlx5 accepted it)", rec.Case, err, why)
			}
		case !isErrnoNamed(err, rec.Result.ErrnoName):
			t.Errorf("%s: %v, libmlx5 %q", rec.Case, err, rec.Result.ErrnoName)
		case err != nil:
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("%s: %v is a %T, not an *Error", rec.Case, err, err)
			}
		}
		if err == nil && rec.Result.StateName != nil && *rec.Result.StateName != state {
			t.Errorf("%s: state %q, libmlx5 %q", rec.Case, state, *rec.Result.StateName)
		}
		if err == nil && in.Call == "mlx5dv_dek_query" && opaque != rec.Result.Opaque {
			t.Errorf("%s: opaque %s, libmlx5 %s", rec.Case, opaque, rec.Result.Opaque)
		}
		if id := rec.Result.ObjID; obj != nil && id != "" {
			var got uint32
			switch o := obj.(type) {
			case *DEK:
				got = o.id
			case *CryptoLoginObj:
				got = o.id
			}
			if uint64(got) != oracle.Num(t, id) {
				t.Errorf("%s: object id %#x, libmlx5 %s", rec.Case, got, id)
			}
		}
	})
	if n < 165 {
		t.Errorf("%d records, want at least the 165 of the first recording", n)
	}
	t.Logf("%d records, %d that the API cannot state (or the destroys of what mlx5 refused) skipped", n, skipped)
}

type cryptoCapsRecord struct {
	Case  string `json:"case"`
	Input struct {
		Device json.RawMessage `json:"device"`
	} `json:"input"`
	Result struct {
		QueryDevice struct {
			CryptoCaps struct {
				FailedSelftests     uint16 `json:"failed_selftests"`
				CryptoEngines       uint8  `json:"crypto_engines"`
				WrappedImportMethod uint8  `json:"wrapped_import_method"`
				LogMaxNumDEKs       uint8  `json:"log_max_num_deks"`
				Flags               uint32 `json:"flags"`
			} `json:"crypto_caps"`
		} `json:"query_device"`
		Plaintext cryptoCapsAttempt `json:"dek_create_plaintext"`
		Session   cryptoCapsAttempt `json:"dek_create_session_without_login"`
		Wrapped   cryptoCapsAttempt `json:"crypto_login_create_and_dek_create_wrapped"`
		Login     cryptoCapsAttempt `json:"crypto_login_and_dek_create_session"`
	} `json:"result"`
	OpenCmds json.RawMessage `json:"open_cmds"`
}

type cryptoCapsAttempt struct {
	DEK         *struct{ Errno int } `json:"dek_create"`
	LoginCreate *struct{ Errno int } `json:"crypto_login_create"`
	Login       *struct {
		Ret int `json:"ret"`
	} `json:"crypto_login"`
	KernelCmds json.RawMessage `json:"kernel_cmds"`
}

// The caps derivation, and what each device profile lets a DEK and a
// login do: the same commands, the same errnos.
func TestOracleCryptoCaps(t *testing.T) {
	n := 0
	oracle.Records(t, "testdata/crypto_caps.jsonl", func(*cryptoCapsRecord) bool { return true }, func(rec *cryptoCapsRecord) {
		n++
		r := newReplay(t)
		pdns := r.openCaps(rec.Case, rec.OpenCmds)
		want := rec.Result.QueryDevice.CryptoCaps
		got, _ := r.CryptoCaps()
		if w := (CryptoCaps{FailedSelfTests: want.FailedSelftests, Engines: CryptoEngines(want.CryptoEngines),
			WrappedImport: CryptoWrappedImport(want.WrappedImportMethod), LogMaxDEKs: want.LogMaxNumDEKs, Flags: CryptoFlags(want.Flags)}); got != w {
			t.Errorf("%s: CryptoCaps %+v, libmlx5 %+v", rec.Case, got, w)
		}
		pd := r.pd(pdns[0])
		key := make([]byte, 128)
		for i := range key {
			key[i] = 0x80 + byte(i)
		}
		opaque := [8]byte{0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7}
		errnoOf := func(err error) int {
			var e unix.Errno
			for _, x := range []unix.Errno{unix.EINVAL, unix.EOPNOTSUPP, unix.EIO, unix.ENOMEM, unix.EBUSY, unix.EEXIST, unix.ENOENT} {
				if errors.Is(err, x) {
					e = x
					break
				}
			}
			if err != nil && e == 0 {
				t.Errorf("%s: %v has no errno", rec.Case, err)
			}
			return int(e)
		}
		check := func(what string, err error, want int) {
			t.Helper()
			if got := errnoOf(err); got != want {
				t.Errorf("%s: %s: %v (errno %d), libmlx5 errno %d", rec.Case, what, err, got, want)
			}
		}

		a := rec.Result.Plaintext
		r.expect(rec.Case+" plaintext", a.KernelCmds)
		d, err := pd.CreateDEK(DEKOptions{KeyBits: 128, Plaintext: true, Opaque: opaque, Key: key[:32]})
		check("plaintext DEK", err, a.DEK.Errno)
		if err == nil {
			d.Close()
		}
		r.done()

		a = rec.Result.Session
		r.expect(rec.Case+" session without login", a.KernelCmds)
		_, err = pd.CreateDEK(DEKOptions{KeyBits: 128, Opaque: opaque, Key: key[:40]})
		r.done()
		check("session DEK without a login", err, a.DEK.Errno)

		cred := make([]byte, 48)
		for i := range cred {
			cred[i] = 0x40 + byte(i)
		}
		a = rec.Result.Wrapped
		r.expect(rec.Case+" login object", a.KernelCmds)
		l, err := r.CreateCryptoLogin(LoginOptions{CredentialID: 0x11, ImportKEKID: 0x22, Credential: cred})
		check("login object", err, a.LoginCreate.Errno)
		if err == nil {
			d, err := pd.CreateDEK(DEKOptions{KeyBits: 128, Opaque: opaque, Key: key[:40], Login: l})
			check("DEK through the login object", err, a.DEK.Errno)
			if err == nil {
				d.Close()
			}
			l.Close()
		}
		r.done()

		a = rec.Result.Login
		r.expect(rec.Case+" context login", a.KernelCmds)
		err = r.CryptoLogin(LoginOptions{CredentialID: 0x11, ImportKEKID: 0x22, Credential: cred})
		check("context login", err, a.Login.Ret)
		if err == nil {
			d, err := pd.CreateDEK(DEKOptions{KeyBits: 128, Opaque: opaque, Key: key[:40]})
			check("DEK through the session", err, a.DEK.Errno)
			if err == nil {
				d.Close()
			}
			r.CryptoLogout()
		}
		r.done()
	})
	if n != 18 {
		t.Errorf("%d records, want 18", n)
	}
}
