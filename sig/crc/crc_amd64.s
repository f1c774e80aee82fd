//go:build amd64

#include "textflag.h"
#include "go_asm.h"

// See keys.go for the algorithm. Registers in both functions: AX the
// foldKeys, SI the next data byte, CX the bytes left, X8 (Z8) the byte
// shuffle that puts a 16-byte lane in polynomial order.

// REDUCE_MSB leaves in R8 the MSB-first CRC register of the 128-bit
// remainder in X3: T = Xh·(x^128 mod P) + Xl·x^64, then Barrett.
#define REDUCE_MSB \
	MOVQ      foldKeys_final(AX), X9; \
	MOVO      X3, X4; \
	PCLMULQDQ $0x01, X9, X4; \
	MOVQ      X3, DX; \
	MOVQ      X4, R8; \
	PEXTRQ    $1, X4, R9; \
	XORQ      DX, R9; \
	MOVQ      R9, X5; \
	MOVQ      foldKeys_mu(AX), X6; \
	PCLMULQDQ $0x00, X6, X5; \
	PEXTRQ    $1, X5, R10; \
	XORQ      R9, R10; \
	MOVQ      R10, X5; \
	MOVQ      foldKeys_poly(AX), X6; \
	PCLMULQDQ $0x00, X6, X5; \
	MOVQ      X5, R11; \
	XORQ      R11, R8

// REDUCE_LSB is REDUCE_MSB for bit-reversed values: the low qword of X3
// holds Xh, products come out one bit up, and the Barrett steps shift
// back by one.
#define REDUCE_LSB \
	MOVQ      foldKeys_final(AX), X9; \
	MOVO      X3, X4; \
	PCLMULQDQ $0x00, X9, X4; \
	PEXTRQ    $1, X3, DX; \
	MOVQ      X4, R9; \
	XORQ      DX, R9; \
	PEXTRQ    $1, X4, R8; \
	MOVQ      R9, X5; \
	MOVQ      foldKeys_mu(AX), X6; \
	PCLMULQDQ $0x00, X6, X5; \
	MOVQ      X5, R10; \
	SHLQ      $1, R10; \
	XORQ      R9, R10; \
	MOVQ      R10, X5; \
	MOVQ      foldKeys_poly(AX), X6; \
	PCLMULQDQ $0x00, X6, X5; \
	MOVQ      X5, R11; \
	PEXTRQ    $1, X5, R12; \
	SHRQ      $63, R11; \
	SHLQ      $1, R12; \
	ORQ       R12, R11; \
	XORQ      R11, R8

// FOLD16 moves the remainder X3 forward by 128 bits (X9 holds k128) and
// adds the next 16 data bytes.
#define FOLD16 \
	MOVOU     0(SI), X10; \
	PSHUFB    X8, X10; \
	MOVO      X3, X4; \
	PCLMULQDQ $0x00, X9, X3; \
	PCLMULQDQ $0x11, X9, X4; \
	PXOR      X4, X3; \
	PXOR      X10, X3; \
	ADDQ      $16, SI; \
	SUBQ      $16, CX

// func foldCLMUL(k *foldKeys, reg uint64, p []byte) uint64
TEXT ·foldCLMUL(SB), NOSPLIT, $0-48
	MOVQ  k+0(FP), AX
	MOVQ  reg+8(FP), BX
	MOVQ  p_base+16(FP), SI
	MOVQ  p_len+24(FP), CX
	MOVOU foldKeys_shuf(AX), X8

	// The register is xored into the first 64 message bits: the high
	// qword of the first lane MSB-first, the low qword reflected.
	MOVQ BX, X4
	CMPQ foldKeys_refl(AX), $0
	JNE  load
	PSLLDQ $8, X4

load:
	MOVOU  0(SI), X0
	MOVOU  16(SI), X1
	MOVOU  32(SI), X2
	MOVOU  48(SI), X3
	PSHUFB X8, X0
	PSHUFB X8, X1
	PSHUFB X8, X2
	PSHUFB X8, X3
	PXOR   X4, X0
	ADDQ   $64, SI
	SUBQ   $64, CX
	MOVOU  foldKeys_k512(AX), X9

loop64:
	CMPQ      CX, $64
	JB        fold4
	MOVOU     0(SI), X10
	MOVOU     16(SI), X11
	MOVOU     32(SI), X12
	MOVOU     48(SI), X13
	PSHUFB    X8, X10
	PSHUFB    X8, X11
	PSHUFB    X8, X12
	PSHUFB    X8, X13
	MOVO      X0, X4
	MOVO      X1, X5
	MOVO      X2, X6
	MOVO      X3, X7
	PCLMULQDQ $0x00, X9, X0
	PCLMULQDQ $0x11, X9, X4
	PCLMULQDQ $0x00, X9, X1
	PCLMULQDQ $0x11, X9, X5
	PCLMULQDQ $0x00, X9, X2
	PCLMULQDQ $0x11, X9, X6
	PCLMULQDQ $0x00, X9, X3
	PCLMULQDQ $0x11, X9, X7
	PXOR      X4, X0
	PXOR      X10, X0
	PXOR      X5, X1
	PXOR      X11, X1
	PXOR      X6, X2
	PXOR      X12, X2
	PXOR      X7, X3
	PXOR      X13, X3
	ADDQ      $64, SI
	SUBQ      $64, CX
	JMP       loop64

fold4:
	// X3 += X0·x^384 + X1·x^256 + X2·x^128
	MOVOU     foldKeys_k384(AX), X9
	MOVO      X0, X4
	PCLMULQDQ $0x00, X9, X0
	PCLMULQDQ $0x11, X9, X4
	MOVOU     foldKeys_k256(AX), X9
	MOVO      X1, X5
	PCLMULQDQ $0x00, X9, X1
	PCLMULQDQ $0x11, X9, X5
	MOVOU     foldKeys_k128(AX), X9
	MOVO      X2, X6
	PCLMULQDQ $0x00, X9, X2
	PCLMULQDQ $0x11, X9, X6
	PXOR      X0, X3
	PXOR      X4, X3
	PXOR      X1, X5
	PXOR      X2, X6
	PXOR      X5, X3
	PXOR      X6, X3

loop16:
	CMPQ CX, $16
	JB   reduce
	FOLD16
	JMP  loop16

reduce:
	CMPQ foldKeys_refl(AX), $0
	JNE  reduceLSB
	REDUCE_MSB
	MOVQ R8, ret+40(FP)
	RET

reduceLSB:
	REDUCE_LSB
	MOVQ R8, ret+40(FP)
	RET

// func foldAVX512(k *foldKeys, reg uint64, p []byte) uint64
TEXT ·foldAVX512(SB), NOSPLIT, $0-48
	MOVQ            k+0(FP), AX
	MOVQ            reg+8(FP), BX
	MOVQ            p_base+16(FP), SI
	MOVQ            p_len+24(FP), CX
	VBROADCASTI32X4 foldKeys_shuf(AX), Z8

	VMOVQ BX, X4
	CMPQ  foldKeys_refl(AX), $0
	JNE   load
	VPSLLDQ $8, X4, X4

load:
	VMOVDQU64       0(SI), Z0
	VMOVDQU64       64(SI), Z1
	VMOVDQU64       128(SI), Z2
	VMOVDQU64       192(SI), Z3
	VPSHUFB         Z8, Z0, Z0
	VPSHUFB         Z8, Z1, Z1
	VPSHUFB         Z8, Z2, Z2
	VPSHUFB         Z8, Z3, Z3
	VPXORQ          Z4, Z0, Z0
	ADDQ            $256, SI
	SUBQ            $256, CX
	VBROADCASTI32X4 foldKeys_k2048(AX), Z9

loop256:
	CMPQ       CX, $256
	JB         fold4
	VMOVDQU64  0(SI), Z10
	VMOVDQU64  64(SI), Z11
	VMOVDQU64  128(SI), Z12
	VMOVDQU64  192(SI), Z13
	VPSHUFB    Z8, Z10, Z10
	VPSHUFB    Z8, Z11, Z11
	VPSHUFB    Z8, Z12, Z12
	VPSHUFB    Z8, Z13, Z13
	VPCLMULQDQ $0x00, Z9, Z0, Z4
	VPCLMULQDQ $0x11, Z9, Z0, Z0
	VPCLMULQDQ $0x00, Z9, Z1, Z5
	VPCLMULQDQ $0x11, Z9, Z1, Z1
	VPCLMULQDQ $0x00, Z9, Z2, Z6
	VPCLMULQDQ $0x11, Z9, Z2, Z2
	VPCLMULQDQ $0x00, Z9, Z3, Z7
	VPCLMULQDQ $0x11, Z9, Z3, Z3
	VPTERNLOGQ $0x96, Z10, Z4, Z0
	VPTERNLOGQ $0x96, Z11, Z5, Z1
	VPTERNLOGQ $0x96, Z12, Z6, Z2
	VPTERNLOGQ $0x96, Z13, Z7, Z3
	ADDQ       $256, SI
	SUBQ       $256, CX
	JMP        loop256

fold4:
	// Z3 += Z0·x^1536 + Z1·x^1024 + Z2·x^512, lane by lane
	VBROADCASTI32X4 foldKeys_k1536(AX), Z9
	VPCLMULQDQ      $0x00, Z9, Z0, Z4
	VPCLMULQDQ      $0x11, Z9, Z0, Z0
	VBROADCASTI32X4 foldKeys_k1024(AX), Z9
	VPCLMULQDQ      $0x00, Z9, Z1, Z5
	VPCLMULQDQ      $0x11, Z9, Z1, Z1
	VBROADCASTI32X4 foldKeys_k512(AX), Z9
	VPCLMULQDQ      $0x00, Z9, Z2, Z6
	VPCLMULQDQ      $0x11, Z9, Z2, Z2
	VPTERNLOGQ      $0x96, Z4, Z0, Z3
	VPTERNLOGQ      $0x96, Z5, Z1, Z3
	VPTERNLOGQ      $0x96, Z6, Z2, Z3

loop64:
	CMPQ       CX, $64
	JB         lanes
	VMOVDQU64  0(SI), Z10
	VPSHUFB    Z8, Z10, Z10
	VPCLMULQDQ $0x00, Z9, Z3, Z4
	VPCLMULQDQ $0x11, Z9, Z3, Z3
	VPTERNLOGQ $0x96, Z10, Z4, Z3
	ADDQ       $64, SI
	SUBQ       $64, CX
	JMP        loop64

lanes:
	// X3 = L0·x^384 + L1·x^256 + L2·x^128 + L3 for the lanes L0..L3 of
	// Z3; the fourth constant pair is zero.
	VMOVDQU64     foldKeys_k384(AX), Z9
	VPCLMULQDQ    $0x00, Z9, Z3, Z4
	VPCLMULQDQ    $0x11, Z9, Z3, Z5
	VEXTRACTI32X4 $3, Z3, X6
	VPTERNLOGQ    $0x96, Z6, Z5, Z4
	VEXTRACTI64X4 $1, Z4, Y5
	VPXORQ        Y5, Y4, Y4
	VEXTRACTI128  $1, Y4, X5
	VPXOR         X5, X4, X3
	VZEROUPPER
	MOVOU         foldKeys_k128(AX), X9

loop16:
	CMPQ CX, $16
	JB   reduce
	FOLD16
	JMP  loop16

reduce:
	CMPQ foldKeys_refl(AX), $0
	JNE  reduceLSB
	REDUCE_MSB
	MOVQ R8, ret+40(FP)
	RET

reduceLSB:
	REDUCE_LSB
	MOVQ R8, ret+40(FP)
	RET
