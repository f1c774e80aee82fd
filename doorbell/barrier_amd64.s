#include "textflag.h"

// func sfence()
TEXT ·sfence(SB), NOSPLIT|NOFRAME, $0-0
	SFENCE
	RET
