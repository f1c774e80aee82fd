package model

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/prm"
)

// The crypto objects against rdma-core 44.0's libmlx5 (testdata/README.md,
// crypto_cmds.jsonl): prm's layouts read what libmlx5
// wrote and the fake firmware answered, the model takes libmlx5's DEK
// mailboxes, and its query answers are the bytes libmlx5 read.

const cryptoCmdsPath = "testdata/crypto_cmds.jsonl"

// cryptoCapsRecord is a caps record: a fake device's caps as the harness
// set them, and the pages libmlx5 read.
type cryptoCapsRecord struct {
	Kind   string `json:"kind"`
	Case   string `json:"case"`
	Device struct {
		General struct {
			Crypto      uint64 `json:"crypto"`
			Single      uint64 `json:"aes_xts_single_block_le_tweak"`
			Multi       uint64 `json:"aes_xts_multi_block_be_tweak"`
			GeneralObjs string `json:"general_obj_types"`
		} `json:"general_caps"`
		Page struct {
			Operational uint64 `json:"wrapped_crypto_operational"`
			Going       uint64 `json:"wrapped_crypto_going_to_commissioning"`
			Method      string `json:"wrapped_import_method"`
			LogDEKs     uint64 `json:"log_max_num_deks"`
			LogKEKs     uint64 `json:"log_max_num_import_keks"`
			LogCreds    uint64 `json:"log_max_num_creds"`
			Failed      string `json:"failed_selftests"`
			QueryFails  string `json:"query_fails_with_status"`
		} `json:"crypto_caps_page"`
	} `json:"device"`
	General string `json:"general"`
	Crypto  string `json:"crypto"`
}

// TestOracleCryptoCaps reads every fake device's pages with the model's
// fields: they are the values the harness set.
func TestOracleCryptoCaps(t *testing.T) {
	n := 0
	oracle.Records(t, cryptoCmdsPath, func(r *cryptoCapsRecord) bool { return r.Kind == "caps" }, func(r *cryptoCapsRecord) {
		n++
		gen := unhex(t, r.General)
		g := r.Device.General
		wantFields(t, r.Case, gen, []fieldWant{
			{prm.CmdHcaCap.Crypto, g.Crypto}, {prm.CmdHcaCap.AesXtsSingleBlockLeTweak, g.Single}, {prm.CmdHcaCap.AesXtsMultiBlockBeTweak, g.Multi},
			{prm.CmdHcaCap.GeneralObjTypes, num(t, g.GeneralObjs)},
		})
		if r.Crypto == "" {
			return // libmlx5 did not read the page, or the query failed
		}
		pg, p := unhex(t, r.Crypto), r.Device.Page
		wantFields(t, r.Case, pg, []fieldWant{
			{prm.CryptoCap.WrappedCryptoOperational, p.Operational}, {prm.CryptoCap.WrappedCryptoGoingToCommissioning, p.Going},
			{prm.CryptoCap.WrappedImportMethod, num(t, p.Method)}, {prm.CryptoCap.LogMaxNumDeks, p.LogDEKs},
			{prm.CryptoCap.LogMaxNumImportKeks, p.LogKEKs}, {prm.CryptoCap.LogMaxNumCreds, p.LogCreds},
			{prm.CryptoCap.FailedSelftests, num(t, p.Failed)},
		})
	})
	if n == 0 {
		t.Fatal("no caps records")
	}
}

// cryptoObjRecord is a DEK or login command libmlx5 sent.
type cryptoObjRecord struct {
	Kind  string `json:"kind"`
	Case  string `json:"case"`
	Input struct {
		Call string `json:"call"`
		DEK  *struct {
			KeySize   uint64 `json:"key_size"`
			HasKeytag bool   `json:"has_keytag"`
			Mode      string `json:"mode"`
			Opaque    string `json:"opaque"`
			Key       string `json:"key"`
			Garbage   bool   `json:"key_garbage_tail"`
		} `json:"dek_init_attr"`
		Login *struct {
			Cred       string `json:"credential_id"`
			KEK        string `json:"import_kek_id"`
			Credential string `json:"credential"`
		} `json:"login_attr"`
		LoginEx *struct {
			Cred       string `json:"credential_id"`
			KEK        string `json:"import_kek_id"`
			Credential string `json:"credential"`
		} `json:"login_attr_ex"`
		DeviceState uint64 `json:"device_state"`
	} `json:"input"`
	Ret    int    `json:"ret"`
	CmdIn  string `json:"cmd_in"`
	CmdOut string `json:"cmd_out"`
}

func readCryptoObjs(t *testing.T) []*cryptoObjRecord {
	var rs []*cryptoObjRecord
	oracle.Records(t, cryptoCmdsPath, func(r *cryptoObjRecord) bool { return r.Kind == "obj" }, func(r *cryptoObjRecord) { rs = append(rs, r) })
	if len(rs) == 0 {
		t.Fatal("no object records")
	}
	return rs
}

// TestOracleCryptoCreateLayouts reads every CREATE_GENERAL_OBJECT libmlx5
// wrote with the model's fields: they hold the call's attributes.
func TestOracleCryptoCreateLayouts(t *testing.T) {
	deks, logins := 0, 0
	for _, r := range readCryptoObjs(t) {
		in := unhex(t, r.CmdIn)
		if prm.GeneralObjInCmdHdr.Opcode.Get(in) != prm.MLX5_CMD_OP_CREATE_GENERAL_OBJECT {
			continue
		}
		if len(in) != genObjLen {
			t.Errorf("%s: %d-byte mailbox, want %d", r.Case, len(in), genObjLen)
			continue
		}
		obj := genObj.Bytes(in)
		switch typ := prm.GeneralObjInCmdHdr.ObjType.Get(in); {
		case typ == prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY && r.Input.DEK != nil:
			deks++
			a := r.Input.DEK
			tag := uint64(0)
			if a.HasKeytag {
				tag = 1
			}
			if prm.EncryptionKeyObj.KeySize.Get(obj) != a.KeySize || prm.EncryptionKeyObj.HasKeytag.Get(obj) != tag ||
				prm.EncryptionKeyObj.KeyType.Get(obj) != prm.MLX5_ENCRYPTION_KEY_OBJ_KEY_PURPOSE_AES_XTS || prm.EncryptionKeyObj.State.Get(obj) != 0 ||
				!bytes.Equal(prm.EncryptionKeyObj.Opaque.Bytes(obj), unhex(t, a.Opaque)) ||
				!bytes.Equal(prm.EncryptionKeyObj.Key.Bytes(obj), unhex(t, a.Key)) {
				t.Errorf("%s: the DEK fields do not hold the call's attributes: %x", r.Case, obj)
			}
		case typ == prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN:
			a := r.Input.Login
			if a == nil {
				a = r.Input.LoginEx
			}
			if a == nil {
				continue // a setup record
			}
			logins++
			want := make([]byte, 48)
			copy(want, unhex(t, a.Credential))
			if prm.CryptoLoginObj.CredentialPointer.Get(obj) != num(t, a.Cred) || prm.CryptoLoginObj.SessionImportKekPtr.Get(obj) != num(t, a.KEK) ||
				prm.CryptoLoginObj.State.Get(obj) != 0 || !bytes.Equal(prm.CryptoLoginObj.Credential.Bytes(obj), want) {
				t.Errorf("%s: the login fields do not hold the call's attributes: %x", r.Case, obj)
			}
		default:
			t.Errorf("%s: obj_type %#x", r.Case, typ)
		}
	}
	if deks == 0 || logins == 0 {
		t.Fatalf("%d DEK and %d login creates", deks, logins)
	}
}

// TestOracleCryptoPlaintextDEKs runs libmlx5's plaintext DEK creates on the
// model, with the model's PD, and compares the model's QUERY answer with
// the one libmlx5 read (the fake firmware's, state READY).
func TestOracleCryptoPlaintextDEKs(t *testing.T) {
	d := newDev(t, "cx7")
	_, pdn := createPD(t, d)
	created := map[string]uint32{} // case prefix -> the model's DEK
	ran := 0
	for _, r := range readCryptoObjs(t) {
		if !strings.HasPrefix(r.Case, "dek/plaintext_multi/plaintext/") || r.Ret != 0 {
			continue
		}
		in := unhex(t, r.CmdIn)
		prefix := r.Case[:strings.LastIndexByte(r.Case, '/')]
		switch prm.GeneralObjInCmdHdr.Opcode.Get(in) {
		case prm.MLX5_CMD_OP_CREATE_GENERAL_OBJECT:
			prm.EncryptionKeyObj.Pd.At(genObj).Set(in, uint64(pdn))
			out := make([]byte, hdrLen)
			st := d.Exec(in, out)
			// libmlx5 sends what the caller left past the key
			// (r.Input.DEK.Garbage): the model ignores it, as a ConnectX
			// does (docs/MODEL.md, "Crypto objects").
			if st != prm.MLX5_CMD_STAT_OK {
				t.Errorf("%s: %v", r.Case, st)
				continue
			}
			ran++
			id := uint32(prm.GeneralObjOutCmdHdr.ObjId.Get(out))
			created[prefix] = id
			// key1 + key2 (+ keytag) from the key field's first byte.
			key, k := unhex(t, r.Input.DEK.Key), d.h.deks[id]
			n := k.keyBits / 8
			if !bytes.Equal(k.key1, key[:n]) || !bytes.Equal(k.key2, key[n:2*n]) || k.hasKeytag && !bytes.Equal(k.keytag[:], key[2*n:2*n+8]) {
				t.Errorf("%s: the model kept key1 %x key2 %x keytag %x", r.Case, k.key1, k.key2, k.keytag)
			}
		case prm.MLX5_CMD_OP_QUERY_GENERAL_OBJECT:
			if r.Input.DeviceState != prm.MLX5_ENCRYPTION_KEY_OBJ_STATE_READY || !strings.HasSuffix(r.Case, "/query_ready") {
				continue
			}
			id, ok := created[prefix]
			if !ok {
				t.Errorf("%s: no DEK created for it", r.Case)
				continue
			}
			prm.GeneralObjInCmdHdr.ObjId.Set(in, uint64(id))
			out := make([]byte, genObjLen)
			if st := d.Exec(in, out); st != prm.MLX5_CMD_STAT_OK {
				t.Errorf("%s: %v", r.Case, st)
				continue
			}
			want := unhex(t, r.CmdOut)
			prm.EncryptionKeyObj.Pd.At(genObj).Set(want, uint64(pdn))
			prm.GeneralObjOutCmdHdr.ObjId.Set(want, 0)
			if !bytes.Equal(out, want) {
				t.Errorf("%s: the model answered\n%x\nlibmlx5 read\n%x", r.Case, out, want)
			}
		}
	}
	if ran == 0 || len(created) == 0 {
		t.Fatal("no plaintext DEK ran")
	}
}

// TestOracleCryptoLoginQuery compares the model's QUERY answer for a
// login with the one libmlx5 read for the same credential and KEK IDs.
func TestOracleCryptoLoginQuery(t *testing.T) {
	var create, query *cryptoObjRecord
	for _, r := range readCryptoObjs(t) {
		switch r.Case {
		case "login_obj/create_len48_cred_0x7_kek_0x8":
			create = r
		case "login_obj/query_valid":
			query = r
		}
	}
	if create == nil || query == nil {
		t.Fatal("no login_obj/create_len48_cred_0x7_kek_0x8 and query_valid")
	}
	d := newDevOpt(t, "cx7", wrappedOpts())
	credID, kekID := uint32(num(t, create.Input.LoginEx.Cred)), uint32(num(t, create.Input.LoginEx.KEK))
	if err := d.SetCryptoCredential(credID, testCred); err != nil {
		t.Fatal(err)
	}
	if err := d.SetImportKEK(kekID, testKEK); err != nil {
		t.Fatal(err)
	}
	// libmlx5's mailbox with a credential this device takes.
	in := unhex(t, create.CmdIn)
	copy(prm.CryptoLoginObj.Credential.At(genObj).Bytes(in), wrap(t, testKEK, testCred))
	out := make([]byte, hdrLen)
	if st := d.Exec(in, out); st != prm.MLX5_CMD_STAT_OK {
		t.Fatalf("create: %v", st)
	}
	q := unhex(t, query.CmdIn)
	prm.GeneralObjInCmdHdr.ObjId.Set(q, prm.GeneralObjOutCmdHdr.ObjId.Get(out))
	got := make([]byte, genObjLen)
	if st := d.Exec(q, got); st != prm.MLX5_CMD_STAT_OK {
		t.Fatalf("query: %v", st)
	}
	want := unhex(t, query.CmdOut)
	prm.GeneralObjOutCmdHdr.ObjId.Set(want, 0)
	if !bytes.Equal(got, want) {
		t.Errorf("the model answered\n%x\nlibmlx5 read\n%x", got, want)
	}
}
