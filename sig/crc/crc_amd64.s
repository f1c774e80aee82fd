//go:build amd64

#include "textflag.h"
#include "go_asm.h"

// See keys.go for the algorithm. Registers: AX the foldKeys, SI the next
// data byte, CX the bytes left, X8 (Y8, Z8) the byte shuffle that puts
// each 16-byte lane in polynomial order (a byte reversal MSB-first, the
// identity reflected), X0-X7 (four of them for the last 64 to 127 bytes,
// X3 alone below 64) or Y0-Y3 or Z0-Z3 the accumulators.
//
// Three widths share the end of the work: PCLMULQDQ on XMM registers
// (legacy SSE encoding, for CPUs without AVX), VPCLMULQDQ on YMM registers
// (VEX encoding, AVX2) and on ZMM registers (EVEX, AVX-512). The YMM and
// ZMM paths clear the upper halves (VZEROUPPER) before they continue in
// the SSE code. Reflected data needs no shuffle, so the YMM and ZMM main
// loops take it straight from memory.

// T_MSB sets X4 to T = Xh·(x^128 mod P) + Xl·x^64 for the remainder X in
// X3 (MSB-first: Xh is the high qword).
#define T_MSB \
	MOVQ      foldKeys_final(AX), X9; \
	MOVO      X3, X4; \
	PCLMULQDQ $0x01, X9, X4; \
	PSLLDQ    $8, X3; \
	PXOR      X3, X4

// T_LSB is T_MSB for bit-reversed values: Xh is the low qword, and so is
// Th in the result.
#define T_LSB \
	MOVQ      foldKeys_final(AX), X9; \
	MOVO      X3, X4; \
	PCLMULQDQ $0x00, X9, X4; \
	PSRLDQ    $8, X3; \
	PXOR      X3, X4

// BARRETT_MSB leaves T mod P in R8 for T in X4: q = Th + floor(Th·mu /
// x^64), T mod P = Tl + (q·poly mod x^64), each value used in the qword
// where the step before left it.
#define BARRETT_MSB \
	MOVOU     foldKeys_final(AX), X9; \
	MOVQ      foldKeys_poly(AX), X6; \
	MOVO      X4, X5; \
	PCLMULQDQ $0x11, X9, X5; \
	PXOR      X4, X5; \
	PCLMULQDQ $0x01, X6, X5; \
	PXOR      X4, X5; \
	MOVQ      X5, R8

// BARRETT_LSB is BARRETT_MSB for bit-reversed values, with the 65-bit
// multipliers of keys.go: the low qword of Th·rbar[0] is q; the high qword
// of q·rbar[1], plus q where rp0 says so, plus Tl is T mod P.
#define BARRETT_LSB \
	MOVOU     foldKeys_rbar(AX), X9; \
	MOVOU     foldKeys_rp0(AX), X7; \
	MOVO      X4, X5; \
	PCLMULQDQ $0x00, X9, X5; \
	MOVO      X5, X6; \
	PCLMULQDQ $0x10, X9, X5; \
	PSLLDQ    $8, X6; \
	PAND      X7, X6; \
	PXOR      X4, X5; \
	PXOR      X6, X5; \
	PEXTRQ    $1, X5, R8

// ZBARRETT_MSB and ZBARRETT_LSB are BARRETT_MSB and BARRETT_LSB for the
// ZMM path, before its VZEROUPPER: VEX and EVEX forms, three operands and
// a ternary xor, which leave out the register copies; the constants go to
// X21 and X22, which keeps Z8 and Z9 for the next block.
#define ZBARRETT_MSB \
	VMOVDQU64  foldKeys_final(AX), X21; \
	VMOVQ      foldKeys_poly(AX), X22; \
	VPCLMULQDQ $0x11, X21, X4, X5; \
	VPXORQ     X4, X5, X5; \
	VPCLMULQDQ $0x01, X22, X5, X5; \
	VPXORQ     X4, X5, X5; \
	VMOVQ      X5, R8

#define ZBARRETT_LSB \
	VMOVDQU64  foldKeys_rbar(AX), X21; \
	VPCLMULQDQ $0x00, X21, X4, X5; \
	VPCLMULQDQ $0x10, X21, X5, X6; \
	VPSLLDQ    $8, X5, X5; \
	VPAND      foldKeys_rp0(AX), X5, X5; \
	VPTERNLOGQ $0x96, X4, X5, X6; \
	VPEXTRQ    $1, X6, R8

// FOLD_XMM, FOLD_YMM and FOLD_ZMM set a to a·x^d + b lane by lane, d the
// distance of the constant pairs in k; t is scratch. The _MEM forms take
// b from memory.
#define FOLD_XMM(k, a, b, t) \
	MOVO      a, t; \
	PCLMULQDQ $0x00, k, a; \
	PCLMULQDQ $0x11, k, t; \
	PXOR      t, a; \
	PXOR      b, a

// FOLD_XMM_LOAD sets a to a·x^d + the 16 bytes at m in polynomial order
// (put in b by the shuffle s); FOLD_XMM_REFL is it for reflected data,
// which needs no shuffle. END_XMM moves a to the end and 64 bits on with
// the row of fin at byte offset off (t is scratch), leaving the sum of
// the two products in a; it takes the row from memory, where legacy SSE
// needs a 16-byte aligned operand, as foldKeys is (TestKeysAligned).
#define FOLD_XMM_LOAD(k, a, m, s, b, t) \
	MOVOU  m, b; \
	PSHUFB s, b; \
	FOLD_XMM(k, a, b, t)

#define FOLD_XMM_REFL(k, a, m, b, t) \
	MOVOU m, b; \
	FOLD_XMM(k, a, b, t)

#define END_XMM(off, a, t) \
	MOVO      a, t; \
	PCLMULQDQ $0x00, (foldKeys_fin+off)(AX), a; \
	PCLMULQDQ $0x11, (foldKeys_fin+off)(AX), t; \
	PXOR      t, a

#define FOLD_YMM(k, a, b, t) \
	VPCLMULQDQ $0x00, k, a, t; \
	VPCLMULQDQ $0x11, k, a, a; \
	VPXOR      b, t, t; \
	VPXOR      t, a, a

#define FOLD_YMM_MEM(k, a, m, t) \
	VPCLMULQDQ $0x00, k, a, t; \
	VPCLMULQDQ $0x11, k, a, a; \
	VPXOR      m, t, t; \
	VPXOR      t, a, a

#define FOLD_ZMM(k, a, b, t) \
	VPCLMULQDQ $0x00, k, a, t; \
	VPCLMULQDQ $0x11, k, a, a; \
	VPTERNLOGQ $0x96, b, t, a

// func foldBlocks(k *foldKeys, lvl int, reg, xor uint64, p []byte, n, stride int, sums []uint64)
//
// foldBlocks folds len(sums) blocks (at least one), each result xored
// with xor; fold is one block of it.
TEXT ·foldBlocks(SB), NOSPLIT|NOFRAME, $0-96
	MOVQ k+0(FP), AX
	MOVQ lvl+8(FP), DX
	MOVQ reg+16(FP), BX
	MOVQ xor+24(FP), R10
	MOVQ p_base+32(FP), SI
	MOVQ n+56(FP), CX
	MOVQ stride+64(FP), R12
	MOVQ sums_base+72(FP), R11
	MOVQ sums_len+80(FP), R13
	MOVQ SI, DI
	MOVQ CX, R9
	JMP  foldBody<>(SB)

// func fold(k *foldKeys, lvl int, reg uint64, p []byte) uint64
//
// fold is foldBlocks on one block, its result not xored; its callers
// have checked the level and the length.
TEXT ·fold(SB), NOSPLIT|NOFRAME, $0-56
	MOVQ k+0(FP), AX
	MOVQ lvl+8(FP), DX
	MOVQ reg+16(FP), BX
	MOVQ p_base+24(FP), SI
	MOVQ p_len+32(FP), CX
	XORQ R10, R10
	LEAQ ret+48(FP), R11
	MOVQ $1, R13
	JMP  foldBody<>(SB)

// CHECK_FOLD jumps to slow unless the assembly takes the level in DX (lo
// to levelAVX512) and the length in CX whole (foldsWhole: rotated right
// by 4 bits, n - 16 is at most (foldChunk - 16) / 16 only when n is a
// multiple of 16 from 16 to foldChunk); R9 is scratch.
#define CHECK_FOLD(lo, slow) \
	LEAQ -lo(DX), R9; \
	CMPQ R9, $(const_levelAVX512-lo); \
	JA   slow; \
	LEAQ -const_foldMin(CX), R9; \
	RORQ $4, R9; \
	CMPQ R9, $((const_foldChunk-const_foldMin)>>4); \
	JA   slow

// func checksum64(c *CRC64, lvl int, p []byte) uint64
//
// checksum64 is c.Checksum(p) with the implementation lvl: the fold when
// it takes p whole and the output is not the register reversed, else (a
// tail call) checksum64Slow.
TEXT ·checksum64(SB), NOSPLIT|NOFRAME, $0-48
	MOVQ lvl+8(FP), DX
	MOVQ p_len+24(FP), CX
	CHECK_FOLD(const_levelCLMUL, slow64)
	MOVQ c+0(FP), DI
	CMPB CRC64_swap(DI), $0
	JNE  slow64
	MOVQ CRC64_k(DI), AX
	LEAQ kernel64_keys(AX), AX
	MOVQ CRC64_init(DI), BX
	MOVQ (CRC64_p+Params64_XorOut)(DI), R10
	MOVQ p_base+16(FP), SI
	LEAQ ret+40(FP), R11
	MOVQ $1, R13
	JMP  foldBody<>(SB)

slow64:
	JMP ·checksum64Slow(SB)

// func fold32(k *kernel32, lvl int, reg uint64, p []byte) uint64
//
// fold32 is checksum64 for CRC32C and CRC32 (register in, register out):
// the fold from fold32Level on, else (a tail call) fold32Slow.
TEXT ·fold32(SB), NOSPLIT|NOFRAME, $0-56
	MOVQ lvl+8(FP), DX
	MOVQ p_len+32(FP), CX
	CHECK_FOLD(const_fold32Level, slow32)
	MOVQ k+0(FP), AX
	MOVQ kernel32_keys(AX), AX
	MOVQ reg+16(FP), BX
	MOVQ p_base+24(FP), SI
	XORQ R10, R10
	LEAQ ret+48(FP), R11
	MOVQ $1, R13
	JMP  foldBody<>(SB)

slow32:
	JMP ·fold32Slow(SB)

// func t10dif64(lvl int, reg uint64, p []byte) uint64
//
// t10dif64 is checksum64 for T10DIF (the CRC in the top 16 bits of the
// register): the fold, or (a tail call) t10dif64Slow.
TEXT ·t10dif64(SB), NOSPLIT|NOFRAME, $0-48
	MOVQ lvl+0(FP), DX
	MOVQ p_len+24(FP), CX
	CHECK_FOLD(const_levelCLMUL, slowT10)
	MOVQ ·t10difKeys(SB), AX
	MOVQ reg+8(FP), BX
	MOVQ p_base+16(FP), SI
	XORQ R10, R10
	LEAQ ret+40(FP), R11
	MOVQ $1, R13
	JMP  foldBody<>(SB)

slowT10:
	JMP ·t10dif64Slow(SB)

// foldBody is the work of fold, checksum64, fold32, t10dif64 and foldBlocks,
// which jump to it with the arguments in registers: AX the
// foldKeys, DX the level, BX the register, SI and CX the data (at least 16
// bytes, a multiple of 16), R10 a value to xor into the result and R11 the
// address of the result; R13 the number of blocks of CX bytes to fold (1
// but for foldBlocks), one every R12 bytes from SI, each from BX, their
// results stored one after the other from R11. It returns to their
// caller. When R13 is more than 1, DI and R9 hold the block and its
// length (foldBlocks sets them; the one-block entries need not, as their
// only block ends the call before either is read).
TEXT foldBody<>(SB), NOSPLIT|NOFRAME, $0-0
block:
	CMPQ DX, $const_levelAVX512
	JNE  notZMM
	CMPQ CX, $256
	JAE  zmm

notZMM:
	CMPQ DX, $const_levelAVX2
	JB   xmm
	CMPQ CX, $128
	JAE  ymm

xmm:
	// Eight XMM accumulators, 128 bytes a step (four for 64 to 127 bytes,
	// one below 64). The register goes into X9 and is xored into the first
	// 64 message bits: the high qword of the first lane MSB-first, the low
	// qword reflected. Reflected data needs no shuffle (the identity), so
	// its main loop leaves the PSHUFB out, which on many CPUs competes with
	// PCLMULQDQ for one port.
	MOVOU foldKeys_shuf(AX), X8
	MOVQ  BX, X9
	CMPQ  foldKeys_refl(AX), $0
	JNE   xmmShort
	PSLLDQ $8, X9

xmmShort:
	CMPQ CX, $128
	JAE  xmm8
	CMPQ CX, $64
	JAE  xmmLoad

	// Fewer than 64 bytes: one accumulator.
	MOVOU  0(SI), X3
	PSHUFB X8, X3
	PXOR   X9, X3
	ADDQ   $16, SI
	SUBQ   $16, CX
	MOVOU  foldKeys_k128(AX), X9
	JMP    loop16

xmm8:
	MOVOU  0(SI), X0
	MOVOU  16(SI), X1
	MOVOU  32(SI), X2
	MOVOU  48(SI), X3
	MOVOU  64(SI), X4
	MOVOU  80(SI), X5
	MOVOU  96(SI), X6
	MOVOU  112(SI), X7
	CMPQ   foldKeys_refl(AX), $0
	JNE    xmm8First
	PSHUFB X8, X0
	PSHUFB X8, X1
	PSHUFB X8, X2
	PSHUFB X8, X3
	PSHUFB X8, X4
	PSHUFB X8, X5
	PSHUFB X8, X6
	PSHUFB X8, X7

xmm8First:
	PXOR   X9, X0
	MOVOU  foldKeys_k1024(AX), X9
	ADDQ   $128, SI

	// CX runs 256 bytes behind the data left, so that the loop ends when
	// it goes negative.
	SUBQ $256, CX
	JL   xmm8Left
	CMPQ foldKeys_refl(AX), $0
	JNE  xmm8LoopRefl

xmm8Loop:
	FOLD_XMM_LOAD(X9, X0, 0(SI), X8, X10, X11)
	FOLD_XMM_LOAD(X9, X1, 16(SI), X8, X12, X13)
	FOLD_XMM_LOAD(X9, X2, 32(SI), X8, X14, X15)
	FOLD_XMM_LOAD(X9, X3, 48(SI), X8, X10, X11)
	FOLD_XMM_LOAD(X9, X4, 64(SI), X8, X12, X13)
	FOLD_XMM_LOAD(X9, X5, 80(SI), X8, X14, X15)
	FOLD_XMM_LOAD(X9, X6, 96(SI), X8, X10, X11)
	FOLD_XMM_LOAD(X9, X7, 112(SI), X8, X12, X13)
	ADDQ $128, SI
	SUBQ $128, CX
	JGE  xmm8Loop
	JMP  xmm8Left

xmm8LoopRefl:
	FOLD_XMM_REFL(X9, X0, 0(SI), X10, X11)
	FOLD_XMM_REFL(X9, X1, 16(SI), X12, X13)
	FOLD_XMM_REFL(X9, X2, 32(SI), X14, X15)
	FOLD_XMM_REFL(X9, X3, 48(SI), X10, X11)
	FOLD_XMM_REFL(X9, X4, 64(SI), X12, X13)
	FOLD_XMM_REFL(X9, X5, 80(SI), X14, X15)
	FOLD_XMM_REFL(X9, X6, 96(SI), X10, X11)
	FOLD_XMM_REFL(X9, X7, 112(SI), X12, X13)
	ADDQ $128, SI
	SUBQ $128, CX
	JGE  xmm8LoopRefl

xmm8Left:
	ADDQ $128, CX
	JNZ  xmmFold8

	// The data ended with the accumulators: T is the sum of each moved
	// to the end and 64 bits on (rows 8-15 of fin).
	END_XMM(128, X0, X8)
	END_XMM(144, X1, X9)
	END_XMM(160, X2, X10)
	END_XMM(176, X3, X11)
	END_XMM(192, X4, X12)
	END_XMM(208, X5, X13)
	END_XMM(224, X6, X14)
	END_XMM(240, X7, X15)
	PXOR X1, X0
	PXOR X3, X2
	PXOR X5, X4
	PXOR X7, X6
	PXOR X2, X0
	PXOR X6, X4
	PXOR X0, X4
	JMP  barrett

xmmFold8:
	// X0-X3 = X0-X3·x^512 + X4-X7, then on with four accumulators
	// (64 bytes a step while 64 are left).
	MOVOU foldKeys_k512(AX), X9
	FOLD_XMM(X9, X0, X4, X10)
	FOLD_XMM(X9, X1, X5, X11)
	FOLD_XMM(X9, X2, X6, X12)
	FOLD_XMM(X9, X3, X7, X13)
	JMP   xmmLoop

xmmLoad:
	MOVOU  0(SI), X0
	MOVOU  16(SI), X1
	MOVOU  32(SI), X2
	MOVOU  48(SI), X3
	PSHUFB X8, X0
	PSHUFB X8, X1
	PSHUFB X8, X2
	PSHUFB X8, X3
	PXOR   X9, X0
	ADDQ   $64, SI
	SUBQ   $64, CX
	MOVOU  foldKeys_k512(AX), X9

xmmLoop:
	CMPQ   CX, $64
	JB     xmmEnd
	MOVOU  0(SI), X10
	MOVOU  16(SI), X11
	MOVOU  32(SI), X12
	MOVOU  48(SI), X13
	PSHUFB X8, X10
	PSHUFB X8, X11
	PSHUFB X8, X12
	PSHUFB X8, X13
	FOLD_XMM(X9, X0, X10, X4)
	FOLD_XMM(X9, X1, X11, X5)
	FOLD_XMM(X9, X2, X12, X6)
	FOLD_XMM(X9, X3, X13, X7)
	ADDQ   $64, SI
	SUBQ   $64, CX
	JMP    xmmLoop

xmmEnd:
	TESTQ CX, CX
	JNZ   xmmFold4

	// The data ended with the accumulators: T is the sum of each moved
	// to the end and 64 bits on (rows 12-15 of fin).
	MOVOU     (foldKeys_fin+192)(AX), X9
	MOVOU     (foldKeys_fin+208)(AX), X10
	MOVOU     (foldKeys_fin+224)(AX), X11
	MOVOU     (foldKeys_fin+240)(AX), X12
	MOVO      X0, X4
	MOVO      X1, X5
	MOVO      X2, X6
	MOVO      X3, X7
	PCLMULQDQ $0x00, X9, X0
	PCLMULQDQ $0x11, X9, X4
	PCLMULQDQ $0x00, X10, X1
	PCLMULQDQ $0x11, X10, X5
	PCLMULQDQ $0x00, X11, X2
	PCLMULQDQ $0x11, X11, X6
	PCLMULQDQ $0x00, X12, X3
	PCLMULQDQ $0x11, X12, X7
	PXOR      X0, X4
	PXOR      X1, X5
	PXOR      X2, X6
	PXOR      X3, X7
	PXOR      X5, X4
	PXOR      X7, X6
	PXOR      X6, X4
	JMP       barrett

xmmFold4:
	// X3 += X0·x^384 + X1·x^256 + X2·x^128
	MOVOU     foldKeys_k384(AX), X9
	MOVOU     foldKeys_k256(AX), X10
	MOVOU     foldKeys_k128(AX), X11
	MOVO      X0, X4
	MOVO      X1, X5
	MOVO      X2, X6
	PCLMULQDQ $0x00, X9, X0
	PCLMULQDQ $0x11, X9, X4
	PCLMULQDQ $0x00, X10, X1
	PCLMULQDQ $0x11, X10, X5
	PCLMULQDQ $0x00, X11, X2
	PCLMULQDQ $0x11, X11, X6
	PXOR      X0, X4
	PXOR      X1, X5
	PXOR      X2, X6
	PXOR      X4, X3
	PXOR      X6, X5
	PXOR      X5, X3
	MOVO      X11, X9
	JMP       loop16

ymm:
	// Four YMM accumulators, 128 bytes a step. CX runs 256 bytes behind
	// the data left, so that the loop ends when it goes negative.
	VBROADCASTI128 foldKeys_shuf(AX), Y8
	VBROADCASTI128 foldKeys_k1024(AX), Y9
	VMOVQ          BX, X4
	SUBQ           $256, CX
	CMPQ           foldKeys_refl(AX), $0
	JE             ymmNormal

	VPXOR   0(SI), Y4, Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	ADDQ    $128, SI
	TESTQ   CX, CX
	JL      ymmLeft

ymmLoopRefl:
	FOLD_YMM_MEM(Y9, Y0, 0(SI), Y4)
	FOLD_YMM_MEM(Y9, Y1, 32(SI), Y5)
	FOLD_YMM_MEM(Y9, Y2, 64(SI), Y6)
	FOLD_YMM_MEM(Y9, Y3, 96(SI), Y7)
	ADDQ $128, SI
	SUBQ $128, CX
	JGE  ymmLoopRefl
	JMP  ymmLeft

ymmNormal:
	VPSLLDQ $8, X4, X4
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VPSHUFB Y8, Y0, Y0
	VPSHUFB Y8, Y1, Y1
	VPSHUFB Y8, Y2, Y2
	VPSHUFB Y8, Y3, Y3
	VPXOR   Y4, Y0, Y0
	ADDQ    $128, SI
	TESTQ   CX, CX
	JL      ymmLeft

ymmLoopNormal:
	VMOVDQU 0(SI), Y10
	VMOVDQU 32(SI), Y11
	VMOVDQU 64(SI), Y12
	VMOVDQU 96(SI), Y13
	VPSHUFB Y8, Y10, Y10
	VPSHUFB Y8, Y11, Y11
	VPSHUFB Y8, Y12, Y12
	VPSHUFB Y8, Y13, Y13
	FOLD_YMM(Y9, Y0, Y10, Y4)
	FOLD_YMM(Y9, Y1, Y11, Y5)
	FOLD_YMM(Y9, Y2, Y12, Y6)
	FOLD_YMM(Y9, Y3, Y13, Y7)
	ADDQ    $128, SI
	SUBQ    $128, CX
	JGE     ymmLoopNormal

ymmLeft:
	ADDQ $128, CX
	JNZ  ymmFold4

	// The data ended with the accumulators: every lane moves to the end
	// and 64 bits on in one step (rows 8-15 of fin), and T is the sum of
	// the lanes.
	VMOVDQU    (foldKeys_fin+128)(AX), Y9
	VMOVDQU    (foldKeys_fin+160)(AX), Y10
	VMOVDQU    (foldKeys_fin+192)(AX), Y11
	VMOVDQU    (foldKeys_fin+224)(AX), Y12
	VPCLMULQDQ $0x00, Y9, Y0, Y4
	VPCLMULQDQ $0x11, Y9, Y0, Y0
	VPCLMULQDQ $0x00, Y10, Y1, Y5
	VPCLMULQDQ $0x11, Y10, Y1, Y1
	VPCLMULQDQ $0x00, Y11, Y2, Y6
	VPCLMULQDQ $0x11, Y11, Y2, Y2
	VPCLMULQDQ $0x00, Y12, Y3, Y7
	VPCLMULQDQ $0x11, Y12, Y3, Y3
	VPXOR      Y4, Y0, Y0
	VPXOR      Y5, Y1, Y1
	VPXOR      Y6, Y2, Y2
	VPXOR      Y7, Y3, Y3
	VPXOR      Y1, Y0, Y0
	VPXOR      Y3, Y2, Y2
	VPXOR      Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPXOR      X1, X0, X4
	VZEROUPPER
	JMP        barrett

ymmFold4:
	// Y3 += Y0·x^768 + Y1·x^512 + Y2·x^256, lane by lane
	VBROADCASTI128 foldKeys_k768(AX), Y9
	VBROADCASTI128 foldKeys_k512(AX), Y10
	VBROADCASTI128 foldKeys_k256(AX), Y11
	VPCLMULQDQ     $0x00, Y9, Y0, Y4
	VPCLMULQDQ     $0x11, Y9, Y0, Y0
	VPCLMULQDQ     $0x00, Y10, Y1, Y5
	VPCLMULQDQ     $0x11, Y10, Y1, Y1
	VPCLMULQDQ     $0x00, Y11, Y2, Y6
	VPCLMULQDQ     $0x11, Y11, Y2, Y2
	VPXOR          Y4, Y0, Y0
	VPXOR          Y5, Y1, Y1
	VPXOR          Y6, Y2, Y2
	VPXOR          Y0, Y3, Y3
	VPXOR          Y2, Y1, Y1
	VPXOR          Y1, Y3, Y3

ymmLoop32:
	CMPQ    CX, $32
	JB      ymmLanes
	VMOVDQU 0(SI), Y10
	VPSHUFB Y8, Y10, Y10
	FOLD_YMM(Y11, Y3, Y10, Y4)
	ADDQ    $32, SI
	SUBQ    $32, CX
	JMP     ymmLoop32

ymmLanes:
	// X3 = L0·x^128 + L1 for the lanes L0, L1 of Y3.
	VMOVDQU      foldKeys_k128(AX), X9
	VEXTRACTI128 $1, Y3, X6
	VPCLMULQDQ   $0x00, X9, X3, X4
	VPCLMULQDQ   $0x11, X9, X3, X5
	VPXOR        X4, X5, X5
	VPXOR        X6, X5, X3
	VZEROUPPER
	JMP          loop16

zmm:
	// Four ZMM accumulators, 256 bytes a step; CX runs 512 bytes behind
	// the data left. Z9 (the constants of the step), Z8 (the byte
	// shuffle, which reflected data does not need) and Z20 (the register
	// in its place in the first lane) stay for the blocks after the first.
	// The bit order is tested once here, and again only before a next
	// block (zmmDone).
	VBROADCASTI32X4 foldKeys_k2048(AX), Z9
	VMOVQ           BX, X20
	CMPQ            foldKeys_refl(AX), $0
	JE              zmmSetNormal

zmmRefl:
	SUBQ      $512, CX
	VPXORQ    0(SI), Z20, Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	ADDQ      $256, SI
	TESTQ     CX, CX
	JL        zmmLeft

zmmLoopRefl:
	FOLD_ZMM(Z9, Z0, 0(SI), Z4)
	FOLD_ZMM(Z9, Z1, 64(SI), Z5)
	FOLD_ZMM(Z9, Z2, 128(SI), Z6)
	FOLD_ZMM(Z9, Z3, 192(SI), Z7)
	ADDQ $256, SI
	SUBQ $256, CX
	JGE  zmmLoopRefl
	JMP  zmmLeft

zmmSetNormal:
	VBROADCASTI32X4 foldKeys_shuf(AX), Z8
	VPSLLDQ         $8, X20, X20

zmmNormal:
	SUBQ      $512, CX
	VMOVDQU64 0(SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VPSHUFB   Z8, Z0, Z0
	VPSHUFB   Z8, Z1, Z1
	VPSHUFB   Z8, Z2, Z2
	VPSHUFB   Z8, Z3, Z3
	VPXORQ    Z20, Z0, Z0
	ADDQ      $256, SI
	TESTQ     CX, CX
	JL        zmmLeft

zmmLoopNormal:
	VMOVDQU64 0(SI), Z10
	VMOVDQU64 64(SI), Z11
	VMOVDQU64 128(SI), Z12
	VMOVDQU64 192(SI), Z13
	VPSHUFB   Z8, Z10, Z10
	VPSHUFB   Z8, Z11, Z11
	VPSHUFB   Z8, Z12, Z12
	VPSHUFB   Z8, Z13, Z13
	FOLD_ZMM(Z9, Z0, Z10, Z4)
	FOLD_ZMM(Z9, Z1, Z11, Z5)
	FOLD_ZMM(Z9, Z2, Z12, Z6)
	FOLD_ZMM(Z9, Z3, Z13, Z7)
	ADDQ      $256, SI
	SUBQ      $256, CX
	JGE       zmmLoopNormal

zmmLeft:
	ADDQ $256, CX
	JNZ  zmmFold4

	// The data ended with the accumulators: every lane moves to the end
	// and 64 bits on in one step (fin), and T is the sum of the lanes.
	VMOVDQU64  foldKeys_fin(AX), Z10
	VMOVDQU64  (foldKeys_fin+64)(AX), Z11
	VMOVDQU64  (foldKeys_fin+128)(AX), Z12
	VMOVDQU64  (foldKeys_fin+192)(AX), Z13
	VPCLMULQDQ $0x00, Z10, Z0, Z4
	VPCLMULQDQ $0x11, Z10, Z0, Z0
	VPCLMULQDQ $0x00, Z11, Z1, Z5
	VPCLMULQDQ $0x11, Z11, Z1, Z1
	VPCLMULQDQ $0x00, Z12, Z2, Z6
	VPCLMULQDQ $0x11, Z12, Z2, Z2
	VPCLMULQDQ $0x00, Z13, Z3, Z7
	VPCLMULQDQ $0x11, Z13, Z3, Z3
	VPTERNLOGQ $0x96, Z4, Z5, Z0
	VPTERNLOGQ $0x96, Z6, Z7, Z1
	VPTERNLOGQ $0x96, Z2, Z3, Z0
	VPXORQ     Z1, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPXORQ     Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPXOR      X1, X0, X4
	CMPQ       foldKeys_refl(AX), $0
	JNE        zmmBarrettLSB
	ZBARRETT_MSB
	JMP        zmmDone

zmmBarrettLSB:
	ZBARRETT_LSB

zmmDone:
	// done without leaving the ZMM registers: the next block goes
	// straight to the main loop.
	XORQ R10, R8
	MOVQ R8, (R11)
	DECQ R13
	JZ   zmmLast
	ADDQ $8, R11
	ADDQ R12, DI
	MOVQ DI, SI
	MOVQ R9, CX
	CMPQ foldKeys_refl(AX), $0
	JNE  zmmRefl
	JMP  zmmNormal

zmmLast:
	VZEROUPPER
	RET

zmmFold4:
	// Z3 += Z0·x^1536 + Z1·x^1024 + Z2·x^512, lane by lane; the loops
	// below take the shuffle (the reflected main loop did not need it).
	VBROADCASTI32X4 foldKeys_shuf(AX), Z8
	VBROADCASTI32X4 foldKeys_k1536(AX), Z9
	VBROADCASTI32X4 foldKeys_k1024(AX), Z10
	VBROADCASTI32X4 foldKeys_k512(AX), Z11
	VPCLMULQDQ      $0x00, Z9, Z0, Z4
	VPCLMULQDQ      $0x11, Z9, Z0, Z0
	VPCLMULQDQ      $0x00, Z10, Z1, Z5
	VPCLMULQDQ      $0x11, Z10, Z1, Z1
	VPCLMULQDQ      $0x00, Z11, Z2, Z6
	VPCLMULQDQ      $0x11, Z11, Z2, Z2
	VPTERNLOGQ      $0x96, Z4, Z0, Z3
	VPTERNLOGQ      $0x96, Z5, Z1, Z6
	VPTERNLOGQ      $0x96, Z6, Z2, Z3

zmmLoop64:
	CMPQ      CX, $64
	JB        zmmLanes
	VMOVDQU64 0(SI), Z10
	VPSHUFB   Z8, Z10, Z10
	FOLD_ZMM(Z11, Z3, Z10, Z4)
	ADDQ      $64, SI
	SUBQ      $64, CX
	JMP       zmmLoop64

zmmLanes:
	// X3 = L0·x^384 + L1·x^256 + L2·x^128 + L3 for the lanes L0-L3 of
	// Z3; the fourth constant pair of the row is zero.
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
	// One accumulator, 16 bytes a step; X9 holds k128.
	CMPQ      CX, $16
	JB        reduce
	MOVOU     0(SI), X10
	PSHUFB    X8, X10
	FOLD_XMM(X9, X3, X10, X4)
	ADDQ      $16, SI
	SUBQ      $16, CX
	JMP       loop16

reduce:
	CMPQ foldKeys_refl(AX), $0
	JNE  reduceLSB
	T_MSB
	BARRETT_MSB
	JMP  done

reduceLSB:
	T_LSB
	BARRETT_LSB
	JMP  done

barrett:
	CMPQ foldKeys_refl(AX), $0
	JNE  barrettLSB
	BARRETT_MSB
	JMP  done

barrettLSB:
	BARRETT_LSB

done:
	XORQ R10, R8
	MOVQ R8, (R11)
	DECQ R13
	JZ   last
	ADDQ $8, R11
	ADDQ R12, DI
	MOVQ DI, SI
	MOVQ R9, CX
	JMP  block

last:
	RET

// func cpuid7ECX() uint32
//
// cpuid7ECX returns ECX of CPUID leaf 7, sub-leaf 0: the structured
// extended features (bit 10 is VPCLMULQDQ). The caller has checked that
// the leaf exists.
TEXT ·cpuid7ECX(SB), NOSPLIT, $0-4
	MOVL $7, AX
	MOVL $0, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET
