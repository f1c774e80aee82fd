package model

import (
	"crypto/subtle"
	"fmt"
	"slices"

	"github.com/mlx5go/mlx5go/prm"
)

// The crypto objects of the firmware: crypto logins and DEKs, the
// CRYPTO_LOGIN and ENCRYPTION_KEY general objects, and the credentials and
// import KEKs a crypto officer provisions. docs/MODEL.md, "Crypto
// objects", gives the source of every rule.

// dekObj is a data encryption key: an ENCRYPTION_KEY general object of
// key purpose AES-XTS, as the firmware keeps it after CREATE_GENERAL_OBJECT
// (unwrapped, when it was imported wrapped).
type dekObj struct {
	uid uint16
	ctx ctxID
	pdn uint32
	// keyBits is 128 or 256: the size of each of key1 and key2.
	keyBits int
	// key1 encrypts the data, key2 the tweak (IEEE 1619).
	key1, key2 []byte
	hasKeytag  bool
	keytag     [8]byte
	opaque     [8]byte
	// state is MLX5_ENCRYPTION_KEY_OBJ_STATE_READY (0) or _ERROR (1).
	state uint8
}

// loginObj is a CRYPTO_LOGIN general object: a session of the uid that
// created it with a credential and an import KEK.
type loginObj struct {
	uid       uint16
	ctx       ctxID
	cred, kek uint32 // credential_pointer, session_import_kek_ptr
	state     uint8  // MLX5_CRYPTO_LOGIN_OBJ_STATE_VALID or _INVALID
}

func (o *loginObj) owner() ctxID { return o.ctx }

// cryptoStore is what a crypto officer provisions on the device (not
// firmware objects: Objects does not count them), and the logins made
// with it.
type cryptoStore struct {
	creds  map[uint32][]byte // credential ID -> plaintext credential
	keks   map[uint32][]byte // import KEK ID -> AES key
	logins map[uint32]*loginObj
}

func newCryptoStore() cryptoStore {
	return cryptoStore{creds: map[uint32][]byte{}, keks: map[uint32][]byte{}, logins: map[uint32]*loginObj{}}
}

// Syndromes of the crypto commands, beside those of errors.go.
const (
	SyndromeCryptoState   uint32 = 0x4d000010 // the engine failed its self-tests, or is in commissioning mode
	SyndromeCryptoMode    uint32 = 0x4d000011 // a crypto login on an engine in plaintext import mode
	SyndromeLoginExists   uint32 = 0x4d000012 // the uid has a crypto login already
	SyndromeBadCredential uint32 = 0x4d000013 // no such credential or import KEK, or the credential does not match
	SyndromeNoLogin       uint32 = 0x4d000014 // a wrapped DEK, and the uid has no valid crypto login
	SyndromeUnwrap        uint32 = 0x4d000015 // the wrapped key fails AES key wrap's integrity check
)

// Object numbers of the crypto objects (the model's choice, as for the
// others): DEK numbers fit the 24-bit dek pointer of the crypto BSF.
const (
	firstDEK   = 0x1
	firstLogin = 0x1
)

// genObjType is a general object type the firmware implements: its
// CREATE, QUERY and DESTROY_GENERAL_OBJECT (ops, by genCreate, genQuery
// and genDestroy), and where its object lies in the create input (in) and
// the query output (out), right after the 16-byte header. Each op gets
// that object (nil for a destroy).
type genObjType struct {
	ops     [3]func(h *hca, c *fwCall, obj []byte) *fwErr
	in, out prm.Field
}

const (
	genCreate = iota
	genQuery
	genDestroy
)

var genObjTypes = map[uint16]genObjType{
	prm.MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY: {
		ops: [3]func(*hca, *fwCall, []byte) *fwErr{createDEK, queryDEK, destroyDEK},
		in:  prm.CreateEncryptionKeyIn.EncryptionKeyObject,
		out: prm.QueryEncryptionKeyObjOut.Obj,
	},
	prm.MLX5_OBJ_TYPE_CRYPTO_LOGIN: {
		ops: [3]func(*hca, *fwCall, []byte) *fwErr{createLogin, queryLogin, destroyLogin},
		in:  prm.CreateCryptoLoginObjIn.LoginObj,
		out: prm.QueryCryptoLoginObjOut.Obj,
	},
}

// The general object commands.
var (
	createGeneralObj  = genObjCmd(genCreate)
	queryGeneralObj   = genObjCmd(genQuery)
	destroyGeneralObj = genObjCmd(genDestroy)
)

// genObjCmd runs command op of the type the header's obj_type names. A
// type the model does not implement is refused as an opcode it does not
// implement (BAD_OP_ERR); one the profile's general_obj_types lacks, as a
// missing capability; a create input or query output too short for the
// type's object, as a bad mailbox length.
func genObjCmd(op int) func(h *hca, c *fwCall) *fwErr {
	return func(h *hca, c *fwCall) *fwErr {
		typ := uint16(c.get(prm.GeneralObjInCmdHdr.ObjType))
		t, ok := genObjTypes[typ]
		in, out := hdrLen, hdrLen
		switch op {
		case genCreate:
			in = fieldEnd(t.in)
		case genQuery:
			out = fieldEnd(t.out)
		}
		switch {
		case !ok:
			return fail(prm.MLX5_CMD_STAT_BAD_OP_ERR, SyndromeBadOpcode)
		case h.prof.cap(prm.CmdHcaCap.GeneralObjTypes)&(1<<typ) == 0:
			return badParam(SyndromeNoCap)
		case len(c.in) < in:
			return fail(prm.MLX5_CMD_STAT_BAD_INP_LEN_ERR, SyndromeInputLength)
		case len(c.out) < out:
			return fail(prm.MLX5_CMD_STAT_BAD_OUTP_LEN_ERR, SyndromeOutputLength)
		}
		var obj []byte
		switch op {
		case genCreate:
			obj = t.in.Bytes(c.in)
		case genQuery:
			obj = t.out.Bytes(c.out)
		}
		return t.ops[op](h, c, obj)
	}
}

// fieldEnd is the byte just past a byte-aligned field.
func fieldEnd(f prm.Field) int { return int(f.Off+f.Width) / 8 }

// The engine's modes, from the HCA's crypto caps page.

func (h *hca) cryptoWrapped() bool {
	return h.prof.cryptoCap(prm.CryptoCap.WrappedImportMethod)&prm.MLX5_CRYPTO_CAPS_WRAPPED_IMPORT_METHOD_AES != 0
}

// cryptoReady refuses every login and DEK of an engine that failed a
// self-test (the error state of FIPS 140) or, wrapped, is still in
// commissioning mode.
func (h *hca) cryptoReady() *fwErr {
	if h.prof.cryptoCap(prm.CryptoCap.FailedSelftests) != 0 ||
		h.cryptoWrapped() && h.prof.cryptoCap(prm.CryptoCap.WrappedCryptoOperational) == 0 {
		return fail(prm.MLX5_CMD_STAT_BAD_SYS_STATE_ERR, SyndromeCryptoState)
	}
	return nil
}

// sessionKEK is the import KEK of uid's crypto login, which a wrapped DEK
// is imported and queried with; an error if the uid has no valid login.
func (h *hca) sessionKEK(uid uint16) ([]byte, *fwErr) {
	for _, l := range h.crypto.logins {
		if l.uid == uid && l.state == prm.MLX5_CRYPTO_LOGIN_OBJ_STATE_VALID {
			return h.crypto.keks[l.kek], nil
		}
	}
	return nil, fail(prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR, SyndromeNoLogin)
}

// CRYPTO_LOGIN.

func createLogin(h *hca, c *fwCall, obj []byte) *fwErr {
	if e := h.cryptoReady(); e != nil {
		return e
	}
	if !h.cryptoWrapped() {
		return badParam(SyndromeCryptoMode)
	}
	for _, l := range h.crypto.logins {
		if l.uid == c.uid {
			return fail(prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR, SyndromeLoginExists)
		}
	}
	credID := uint32(prm.CryptoLoginObj.CredentialPointer.Get(obj))
	kekID := uint32(prm.CryptoLoginObj.SessionImportKekPtr.Get(obj))
	cred, okC := h.crypto.creds[credID]
	kek, okK := h.crypto.keks[kekID]
	if !okC || !okK {
		return badParam(SyndromeBadCredential)
	}
	got, err := KeyUnwrap(kek, prm.CryptoLoginObj.Credential.Bytes(obj))
	if err != nil {
		return badParam(SyndromeBadCredential)
	}
	match := subtle.ConstantTimeCompare(got, cred) == 1
	clear(got)
	if !match {
		return badParam(SyndromeBadCredential)
	}
	n, ok := alloc(h, "crypto login", h.crypto.logins, firstLogin, 1<<24)
	if !ok {
		return limitReached()
	}
	h.crypto.logins[n] = &loginObj{uid: c.uid, ctx: c.ctx, cred: credID, kek: kekID, state: prm.MLX5_CRYPTO_LOGIN_OBJ_STATE_VALID}
	prm.GeneralObjOutCmdHdr.ObjId.Set(c.out, uint64(n))
	return nil
}

// namedObj finds the object of table m a query or destroy names by its
// obj_id, and checks that it is the command's uid's.
func namedObj[T interface{ ownerUID() uint16 }](m map[uint32]T, c *fwCall) (uint32, T, *fwErr) {
	n := uint32(c.get(prm.GeneralObjInCmdHdr.ObjId))
	o, ok := m[n]
	if !ok {
		return n, o, noObject()
	}
	return n, o, checkOwner(o.ownerUID(), c.uid)
}

func (o *loginObj) ownerUID() uint16 { return o.uid }
func (o *dekObj) ownerUID() uint16   { return o.uid }

func queryLogin(h *hca, c *fwCall, obj []byte) *fwErr {
	_, l, e := namedObj(h.crypto.logins, c)
	if e != nil {
		return e
	}
	prm.CryptoLoginObj.State.Set(obj, uint64(l.state))
	prm.CryptoLoginObj.CredentialPointer.Set(obj, uint64(l.cred))
	prm.CryptoLoginObj.SessionImportKekPtr.Set(obj, uint64(l.kek))
	return nil
}

func destroyLogin(h *hca, c *fwCall, _ []byte) *fwErr {
	n, _, e := namedObj(h.crypto.logins, c)
	if e != nil {
		return e
	}
	delete(h.crypto.logins, n)
	return nil
}

// ENCRYPTION_KEY (DEK).

func createDEK(h *hca, c *fwCall, obj []byte) *fwErr {
	if e := h.cryptoReady(); e != nil {
		return e
	}
	if prm.EncryptionKeyObj.KeyType.Get(obj) != prm.MLX5_ENCRYPTION_KEY_OBJ_KEY_PURPOSE_AES_XTS {
		return badParam(SyndromeBadValue)
	}
	var keyBytes int
	switch prm.EncryptionKeyObj.KeySize.Get(obj) {
	case prm.MLX5_GENERAL_OBJECT_TYPE_ENCRYPTION_KEY_KEY_SIZE_128:
		keyBytes = 16
	case prm.MLX5_GENERAL_OBJECT_TYPE_ENCRYPTION_KEY_KEY_SIZE_256:
		keyBytes = 32
	default:
		return badParam(SyndromeBadValue)
	}
	pdn := uint32(prm.EncryptionKeyObj.Pd.Get(obj))
	if e := h.pdRef(pdn, c.uid); e != nil {
		return e
	}
	end := limit(firstDEK, h.prof.cryptoCap(prm.CryptoCap.LogMaxNumDeks))
	if uint64(len(h.deks)) >= uint64(end-firstDEK) {
		return limitReached()
	}
	hasKeytag := prm.EncryptionKeyObj.HasKeytag.Get(obj) != 0
	// The key field holds key1 + key2 (+ keytag), in plaintext or
	// wrapped, from its first byte (mlx5dv_dek_create(3)'s table); what
	// follows is not read. libmlx5 copies the caller's whole 128-byte key
	// array, and rdma-core's test_mlx5_crypto, which passes on a ConnectX,
	// leaves garbage past a shorter key there (pyverbs' Mlx5DEKInitAttr
	// copies 128 bytes from it).
	n := 2 * keyBytes
	if hasKeytag {
		n += 8
	}
	field := prm.EncryptionKeyObj.Key.Bytes(obj)
	var plain []byte
	if h.cryptoWrapped() {
		kek, e := h.sessionKEK(c.uid)
		if e != nil {
			return e
		}
		var err error
		if plain, err = KeyUnwrap(kek, field[:n+8]); err != nil {
			return badParam(SyndromeUnwrap)
		}
	} else {
		plain = slices.Clone(field[:n])
	}
	defer clear(plain)
	id, _ := alloc(h, "dek", h.deks, firstDEK, end)
	d := &dekObj{uid: c.uid, ctx: c.ctx, pdn: pdn, keyBits: 8 * keyBytes, hasKeytag: hasKeytag,
		key1: slices.Clone(plain[:keyBytes]), key2: slices.Clone(plain[keyBytes : 2*keyBytes]), state: prm.MLX5_ENCRYPTION_KEY_OBJ_STATE_READY}
	if hasKeytag {
		copy(d.keytag[:], plain[2*keyBytes:])
	}
	copy(d.opaque[:], prm.EncryptionKeyObj.Opaque.Bytes(obj))
	h.deks[id] = d
	h.pds[pdn].refs++
	prm.GeneralObjOutCmdHdr.ObjId.Set(c.out, uint64(id))
	return nil
}

// queryDEK answers the DEK's attributes, never its key. A wrapped
// engine's DEK is queried only in a valid crypto login.
func queryDEK(h *hca, c *fwCall, obj []byte) *fwErr {
	_, d, e := namedObj(h.deks, c)
	if e != nil {
		return e
	}
	if h.cryptoWrapped() {
		if _, e := h.sessionKEK(c.uid); e != nil {
			return e
		}
	}
	prm.EncryptionKeyObj.State.Set(obj, uint64(d.state))
	size := uint64(prm.MLX5_GENERAL_OBJECT_TYPE_ENCRYPTION_KEY_KEY_SIZE_128)
	if d.keyBits == 256 {
		size = prm.MLX5_GENERAL_OBJECT_TYPE_ENCRYPTION_KEY_KEY_SIZE_256
	}
	prm.EncryptionKeyObj.KeySize.Set(obj, size)
	if d.hasKeytag {
		prm.EncryptionKeyObj.HasKeytag.Set(obj, 1)
	}
	prm.EncryptionKeyObj.KeyType.Set(obj, prm.MLX5_ENCRYPTION_KEY_OBJ_KEY_PURPOSE_AES_XTS)
	prm.EncryptionKeyObj.Pd.Set(obj, uint64(d.pdn))
	copy(prm.EncryptionKeyObj.Opaque.Bytes(obj), d.opaque[:])
	return nil
}

// destroyDEK destroys the DEK even if a crypto mkey's BSF names it, as
// DESTROY_PSV does a PSV a signature BSF names: the BSFs are the UMRs',
// which the firmware's commands do not track. The mkey's next transfer
// finds no DEK (docs/MODEL.md, "Crypto objects").
func destroyDEK(h *hca, c *fwCall, _ []byte) *fwErr {
	n, d, e := namedObj(h.deks, c)
	if e != nil {
		return e
	}
	h.releaseDEK(n, d)
	return nil
}

func (h *hca) releaseDEK(n uint32, d *dekObj) {
	clear(d.key1)
	clear(d.key2)
	if pd, ok := h.pds[d.pdn]; ok {
		pd.refs--
	}
	delete(h.deks, n)
}

// purgeCrypto drops context ctx's DEKs and crypto logins (purge).
func (h *hca) purgeCrypto(ctx ctxID) {
	for n, d := range h.deks {
		if d.ctx == ctx {
			h.releaseDEK(n, d)
		}
	}
	dropCtx(h.crypto.logins, ctx)
}

// The crypto officer's side, for tests: what a device's tools provision.

// officerTable is one of the two tables a crypto officer provisions.
type officerTable struct {
	what  string // "credential", "import KEK"
	table func(*cryptoStore) map[uint32][]byte
	log   prm.Field // the crypto caps' limit of the table
	check func([]byte) error
	// cred and kek give the credential and import KEK IDs whose logins
	// an entry's deletion invalidates, for the entry of ID id.
	cred, kek func(id uint32) uint32
}

func officerID(id uint32) uint32 { return id }
func officerNoID(uint32) uint32  { return ^uint32(0) } // no ID: pointers are 24 bits

var (
	credentials = officerTable{"credential", func(s *cryptoStore) map[uint32][]byte { return s.creds },
		prm.CryptoCap.LogMaxNumCreds, checkCredential, officerID, officerNoID}
	importKEKs = officerTable{"import KEK", func(s *cryptoStore) map[uint32][]byte { return s.keks },
		prm.CryptoCap.LogMaxNumImportKeks, checkKEK, officerNoID, officerID}
)

// officer checks that the HCA has a wrapped engine and id fits the 24-bit
// pointers of crypto_login_obj.
func (d *Device) officer(call string, id uint32) error {
	switch {
	case d.h.prof.crypto == nil:
		return fmt.Errorf("model: %s: profile %s has no crypto engine", call, d.h.prof.name)
	case !d.h.cryptoWrapped():
		return fmt.Errorf("model: %s: the crypto engine is in plaintext import mode (Options.Crypto.Wrapped)", call)
	case id >= 1<<24:
		return fmt.Errorf("model: %s: ID %#x does not fit 24 bits", call, id)
	}
	return nil
}

// invalidateLogins marks the logins made with credential cred or import
// KEK kek INVALID, as mlx5dv_crypto_login(3) says deleting either does.
func (h *hca) invalidateLogins(cred, kek uint32) {
	for _, l := range h.crypto.logins {
		if l.cred == cred || l.kek == kek {
			l.state = prm.MLX5_CRYPTO_LOGIN_OBJ_STATE_INVALID
		}
	}
}

// drop deletes entry id of table t, zeroes it and invalidates its logins.
func (h *hca) drop(t officerTable, id uint32) {
	m := t.table(&h.crypto)
	clear(m[id])
	delete(m, id)
	h.invalidateLogins(t.cred(id), t.kek(id))
}

// store stores v under id in table t, replacing (as a deletion does) what
// was there, within 2^t.log entries.
func (d *Device) store(t officerTable, id uint32, v []byte) error {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	call := "set " + t.what
	if err := d.officer(call, id); err != nil {
		return err
	}
	if err := t.check(v); err != nil {
		return err
	}
	m := t.table(&d.h.crypto)
	if _, ok := m[id]; ok {
		d.h.drop(t, id)
	} else if uint64(len(m)) >= 1<<d.h.prof.cryptoCap(t.log) {
		return fmt.Errorf("model: %s: the device holds 2^%s of them", call, t.log.Name)
	}
	m[id] = slices.Clone(v)
	return nil
}

// remove deletes entry id of table t.
func (d *Device) remove(t officerTable, id uint32) error {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	call := "delete " + t.what
	if err := d.officer(call, id); err != nil {
		return err
	}
	if _, ok := t.table(&d.h.crypto)[id]; !ok {
		return fmt.Errorf("model: %s: no %s %#x", call, t.what, id)
	}
	d.h.drop(t, id)
	return nil
}

// SetCryptoCredential stores credential id (40 bytes, in plaintext) on a
// software ConnectX whose engine is in the wrapped import method, as a
// crypto officer does: a crypto login names it by id and brings it
// wrapped with an import KEK. A credential already stored under id is
// replaced, and the logins made with it become INVALID.
func (d *Device) SetCryptoCredential(id uint32, credential []byte) error {
	return d.store(credentials, id, credential)
}

// DeleteCryptoCredential deletes credential id: the crypto logins made
// with it become INVALID (mlx5dv_crypto_login(3)); the DEKs imported in
// them stay usable.
func (d *Device) DeleteCryptoCredential(id uint32) error { return d.remove(credentials, id) }

// SetImportKEK stores import KEK id, an AES key of 16 or 32 bytes, on a
// software ConnectX whose engine is in the wrapped import method: a
// crypto login's credential, and the DEKs imported in it, come wrapped
// with it (KeyWrap). A KEK already stored under id is replaced, and the
// logins made with it become INVALID.
func (d *Device) SetImportKEK(id uint32, key []byte) error { return d.store(importKEKs, id, key) }

// DeleteImportKEK deletes import KEK id: the crypto logins made with it
// become INVALID (mlx5dv_crypto_login(3)); the DEKs imported with it stay
// usable.
func (d *Device) DeleteImportKEK(id uint32) error { return d.remove(importKEKs, id) }

// InjectDEKError puts DEK id of this context in the ERROR state, as a
// corruption of the DEK's memory would (mlx5dv_dek_create(3)): QUERY
// reports it, and the crypto data path finds the DEK in ERROR
// (docs/MODEL.md, "Crypto data path").
func (d *Device) InjectDEKError(id uint32) error {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	k, ok := d.h.deks[id]
	if !ok || k.ctx != d.id {
		return fmt.Errorf("model: no DEK %#x on this context", id)
	}
	k.state = prm.MLX5_ENCRYPTION_KEY_OBJ_STATE_ERROR
	return nil
}

// commission provisions what CRYPTO_OPERATIONAL set: the credential and
// import KEK of ID 0 (profile.withCrypto checked them).
func (h *hca) commission(o CryptoOptions) {
	o.Credential, o.ImportKEK = slices.Clone(o.Credential), slices.Clone(o.ImportKEK)
	h.cryptoOpt = o
	if o.Credential != nil {
		h.crypto.creds[0] = slices.Clone(o.Credential)
		h.crypto.keks[0] = slices.Clone(o.ImportKEK)
	}
}
