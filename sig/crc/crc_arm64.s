//go:build arm64

#include "textflag.h"
#include "go_asm.h"

// See keys.go for the algorithm and crc_amd64.s for the same steps on
// amd64. Registers: R0 the foldKeys, R2 the next data byte, R3 the bytes
// left, R5 the reflected flag, V8 the byte shuffle that puts each 16-byte
// lane in polynomial order, V31 zero, V0-V7 the accumulators.

// FOLD sets a to a·x^d + b, d the distance of the constant pair in k; t is
// scratch.
#define FOLD(k, a, b, t) \
	VPMULL  k.D1, a.D1, t.Q1; \
	VPMULL2 k.D2, a.D2, a.Q1; \
	VEOR    t.B16, a.B16, a.B16; \
	VEOR    b.B16, a.B16, a.B16

// func fold(k *foldKeys, lvl int, reg uint64, p []byte) uint64
TEXT ·fold(SB), NOSPLIT, $0-56
	MOVD k+0(FP), R0
	MOVD reg+16(FP), R1
	MOVD p_base+24(FP), R2
	MOVD p_len+32(FP), R3
	MOVD foldKeys_refl(R0), R5
	VEOR V31.B16, V31.B16, V31.B16
	ADD  $foldKeys_shuf, R0, R4
	VLD1 (R4), [V8.B16]

	// The register is xored into the first 64 message bits: the high
	// doubleword of the first lane MSB-first, the low one reflected.
	VEOR V10.B16, V10.B16, V10.B16
	VMOV R1, V10.D[0]
	CBNZ R5, short
	VEXT $8, V10.B16, V31.B16, V10.B16

short:
	CMP $64, R3
	BHS load

	// Fewer than 64 bytes: one accumulator.
	VLD1.P 16(R2), [V3.B16]
	VTBL   V8.B16, [V3.B16], V3.B16
	VEOR   V10.B16, V3.B16, V3.B16
	SUB    $16, R3
	ADD    $foldKeys_k128, R0, R4
	VLD1   (R4), [V9.D2]
	B      loop16

load:
	CMP $128, R3
	BLO load4

	// Eight accumulators, 128 bytes a step, while 128 bytes are left.
	VLD1.P 64(R2), [V0.B16, V1.B16, V2.B16, V3.B16]
	VLD1.P 64(R2), [V4.B16, V5.B16, V6.B16, V7.B16]
	VTBL   V8.B16, [V0.B16], V0.B16
	VTBL   V8.B16, [V1.B16], V1.B16
	VTBL   V8.B16, [V2.B16], V2.B16
	VTBL   V8.B16, [V3.B16], V3.B16
	VTBL   V8.B16, [V4.B16], V4.B16
	VTBL   V8.B16, [V5.B16], V5.B16
	VTBL   V8.B16, [V6.B16], V6.B16
	VTBL   V8.B16, [V7.B16], V7.B16
	VEOR   V10.B16, V0.B16, V0.B16
	SUB    $128, R3
	ADD    $foldKeys_k1024, R0, R4
	VLD1   (R4), [V9.D2]

loop8:
	CMP    $128, R3
	BLO    end8
	VLD1.P 64(R2), [V16.B16, V17.B16, V18.B16, V19.B16]
	VLD1.P 64(R2), [V20.B16, V21.B16, V22.B16, V23.B16]
	VTBL   V8.B16, [V16.B16], V16.B16
	VTBL   V8.B16, [V17.B16], V17.B16
	VTBL   V8.B16, [V18.B16], V18.B16
	VTBL   V8.B16, [V19.B16], V19.B16
	VTBL   V8.B16, [V20.B16], V20.B16
	VTBL   V8.B16, [V21.B16], V21.B16
	VTBL   V8.B16, [V22.B16], V22.B16
	VTBL   V8.B16, [V23.B16], V23.B16
	FOLD(V9, V0, V16, V24)
	FOLD(V9, V1, V17, V25)
	FOLD(V9, V2, V18, V26)
	FOLD(V9, V3, V19, V27)
	FOLD(V9, V4, V20, V28)
	FOLD(V9, V5, V21, V29)
	FOLD(V9, V6, V22, V30)
	FOLD(V9, V7, V23, V11)
	SUB    $128, R3
	B      loop8

end8:
	// V0-V3 = V0-V3·x^512 + V4-V7: four accumulators.
	ADD  $foldKeys_k512, R0, R4
	VLD1 (R4), [V9.D2]
	FOLD(V9, V0, V4, V24)
	FOLD(V9, V1, V5, V25)
	FOLD(V9, V2, V6, V26)
	FOLD(V9, V3, V7, V27)
	B    loop

load4:
	// Four accumulators, 64 bytes a step.
	VLD1.P 64(R2), [V0.B16, V1.B16, V2.B16, V3.B16]
	VTBL   V8.B16, [V0.B16], V0.B16
	VTBL   V8.B16, [V1.B16], V1.B16
	VTBL   V8.B16, [V2.B16], V2.B16
	VTBL   V8.B16, [V3.B16], V3.B16
	VEOR   V10.B16, V0.B16, V0.B16
	SUB    $64, R3
	ADD    $foldKeys_k512, R0, R4
	VLD1   (R4), [V9.D2]

loop:
	CMP    $64, R3
	BLO    end
	VLD1.P 64(R2), [V10.B16, V11.B16, V12.B16, V13.B16]
	VTBL   V8.B16, [V10.B16], V10.B16
	VTBL   V8.B16, [V11.B16], V11.B16
	VTBL   V8.B16, [V12.B16], V12.B16
	VTBL   V8.B16, [V13.B16], V13.B16
	FOLD(V9, V0, V10, V4)
	FOLD(V9, V1, V11, V5)
	FOLD(V9, V2, V12, V6)
	FOLD(V9, V3, V13, V7)
	SUB    $64, R3
	B      loop

end:
	CBNZ R3, fold4

	// The data ended with the accumulators: T is the sum of each moved
	// to the end and 64 bits on (the last row of fin).
	ADD     $(foldKeys_fin+192), R0, R4
	VLD1    (R4), [V9.D2, V10.D2, V11.D2, V12.D2]
	VPMULL  V9.D1, V0.D1, V4.Q1
	VPMULL2 V9.D2, V0.D2, V0.Q1
	VPMULL  V10.D1, V1.D1, V5.Q1
	VPMULL2 V10.D2, V1.D2, V1.Q1
	VPMULL  V11.D1, V2.D1, V6.Q1
	VPMULL2 V11.D2, V2.D2, V2.Q1
	VPMULL  V12.D1, V3.D1, V7.Q1
	VPMULL2 V12.D2, V3.D2, V3.Q1
	VEOR    V0.B16, V4.B16, V4.B16
	VEOR    V1.B16, V5.B16, V5.B16
	VEOR    V2.B16, V6.B16, V6.B16
	VEOR    V3.B16, V7.B16, V7.B16
	VEOR    V5.B16, V4.B16, V4.B16
	VEOR    V7.B16, V6.B16, V6.B16
	VEOR    V6.B16, V4.B16, V4.B16
	B       barrett

fold4:
	// V3 += V0·x^384 + V1·x^256 + V2·x^128
	ADD     $foldKeys_k384, R0, R4
	VLD1    (R4), [V9.D2, V10.D2, V11.D2]
	VPMULL  V9.D1, V0.D1, V4.Q1
	VPMULL2 V9.D2, V0.D2, V0.Q1
	VPMULL  V10.D1, V1.D1, V5.Q1
	VPMULL2 V10.D2, V1.D2, V1.Q1
	VPMULL  V11.D1, V2.D1, V6.Q1
	VPMULL2 V11.D2, V2.D2, V2.Q1
	VEOR    V0.B16, V4.B16, V4.B16
	VEOR    V1.B16, V5.B16, V5.B16
	VEOR    V2.B16, V6.B16, V6.B16
	VEOR    V4.B16, V3.B16, V3.B16
	VEOR    V6.B16, V5.B16, V5.B16
	VEOR    V5.B16, V3.B16, V3.B16
	VMOV    V11.B16, V9.B16

loop16:
	// One accumulator, 16 bytes a step; V9 holds k128.
	CMP    $16, R3
	BLO    reduce
	VLD1.P 16(R2), [V10.B16]
	VTBL   V8.B16, [V10.B16], V10.B16
	FOLD(V9, V3, V10, V4)
	SUB    $16, R3
	B      loop16

reduce:
	// T = Xh·(x^128 mod P) + Xl·x^64 into V4 (see crc_amd64.s).
	ADD  $foldKeys_final, R0, R4
	VLD1 (R4), [V9.D2]
	VDUP V9.D[0], V10.D2
	CBNZ R5, reduceLSB
	VPMULL2 V10.D2, V3.D2, V4.Q1
	VEXT    $8, V3.B16, V31.B16, V5.B16
	VEOR    V5.B16, V4.B16, V4.B16
	B       barrettMSB

reduceLSB:
	VPMULL V10.D1, V3.D1, V4.Q1
	VEXT   $8, V31.B16, V3.B16, V5.B16
	VEOR   V5.B16, V4.B16, V4.B16
	B      barrettLSB

barrett:
	// T mod P for T in V4; V9 holds final and mu.
	ADD  $foldKeys_final, R0, R4
	VLD1 (R4), [V9.D2]
	CBNZ R5, barrettLSB

barrettMSB:
	MOVD    foldKeys_poly(R0), R6
	VDUP    R6, V6.D2
	VPMULL2 V9.D2, V4.D2, V5.Q1
	VEOR    V4.B16, V5.B16, V5.B16
	VPMULL2 V6.D2, V5.D2, V5.Q1
	VEOR    V4.B16, V5.B16, V5.B16
	VMOV    V5.D[0], R7
	MOVD    R7, ret+48(FP)
	RET

barrettLSB:
	MOVD   foldKeys_poly(R0), R6
	VDUP   R6, V6.D2
	VDUP   V9.D[1], V10.D2
	VPMULL V10.D1, V4.D1, V5.Q1
	VSHL   $1, V5.D2, V5.D2
	VEOR   V4.B16, V5.B16, V5.B16
	VPMULL V6.D1, V5.D1, V5.Q1
	VMOV   V5.D[0], R7
	VMOV   V5.D[1], R8
	VMOV   V4.D[1], R9
	LSR    $63, R7, R7
	ORR    R8<<1, R7, R7
	EOR    R9, R7, R7
	MOVD   R7, ret+48(FP)
	RET
