//go:build amd64

#include "textflag.h"

// func sum16AVX2(p []byte) uint64
//
// sum16AVX2 returns the integer sum of the little-endian 16-bit words of
// p; len(p) is a multiple of 128 and at most 1 MiB. Each 32-bit lane of
// Y0-Y3 adds the low and the high word of its dword a step, at most
// 2·0xFFFF, so 8192 steps cannot overflow it; at the end the lanes are
// widened to 64 bits and added.
TEXT ·sum16AVX2(SB), NOSPLIT, $0-32
	MOVQ     p_base+0(FP), SI
	MOVQ     p_len+8(FP), CX
	SHRQ     $7, CX
	VPCMPEQD Y15, Y15, Y15
	VPSRLD   $16, Y15, Y14 // 0000FFFF in each dword
	VPSRLQ   $32, Y15, Y15 // 00000000FFFFFFFF in each qword
	VPXOR    Y0, Y0, Y0
	VPXOR    Y1, Y1, Y1
	VPXOR    Y2, Y2, Y2
	VPXOR    Y3, Y3, Y3
	TESTQ    CX, CX
	JZ       widen

step:
	VMOVDQU 0(SI), Y4
	VMOVDQU 32(SI), Y5
	VMOVDQU 64(SI), Y6
	VMOVDQU 96(SI), Y7
	VPSRLD  $16, Y4, Y9
	VPSRLD  $16, Y5, Y10
	VPSRLD  $16, Y6, Y11
	VPSRLD  $16, Y7, Y12
	VPAND   Y14, Y4, Y4
	VPAND   Y14, Y5, Y5
	VPAND   Y14, Y6, Y6
	VPAND   Y14, Y7, Y7
	VPADDD  Y4, Y0, Y0
	VPADDD  Y5, Y1, Y1
	VPADDD  Y6, Y2, Y2
	VPADDD  Y7, Y3, Y3
	VPADDD  Y9, Y0, Y0
	VPADDD  Y10, Y1, Y1
	VPADDD  Y11, Y2, Y2
	VPADDD  Y12, Y3, Y3
	ADDQ    $128, SI
	DECQ    CX
	JNZ     step

widen:
	// Add the low and the high dword of each qword, then everything.
	VPSRLQ       $32, Y0, Y4
	VPSRLQ       $32, Y1, Y5
	VPSRLQ       $32, Y2, Y6
	VPSRLQ       $32, Y3, Y7
	VPAND        Y15, Y0, Y0
	VPAND        Y15, Y1, Y1
	VPAND        Y15, Y2, Y2
	VPAND        Y15, Y3, Y3
	VPADDQ       Y4, Y0, Y0
	VPADDQ       Y5, Y1, Y1
	VPADDQ       Y6, Y2, Y2
	VPADDQ       Y7, Y3, Y3
	VPADDQ       Y1, Y0, Y0
	VPADDQ       Y3, Y2, Y2
	VPADDQ       Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDQ       X1, X0, X0
	VMOVQ        X0, AX
	VZEROUPPER
	MOVQ         AX, ret+24(FP)
	RET
