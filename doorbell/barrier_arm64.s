#include "textflag.h"

// func dmbOSHST()
TEXT ·dmbOSHST(SB), NOSPLIT|NOFRAME, $0-0
	DMB $0x2 // OSHST
	RET

// func dsbST()
TEXT ·dsbST(SB), NOSPLIT|NOFRAME, $0-0
	DSB $0xe // ST (full system)
	RET
