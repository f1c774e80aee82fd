#include "textflag.h"

// func sfence()
TEXT ·sfence(SB), NOSPLIT|NOFRAME, $0-0
	SFENCE
	RET

// func cpuid0() (ebx, edx, ecx uint32)
TEXT ·cpuid0(SB), NOSPLIT, $0-12
	XORL AX, AX
	XORL CX, CX
	CPUID
	MOVL BX, ebx+0(FP)
	MOVL DX, edx+4(FP)
	MOVL CX, ecx+8(FP)
	RET
