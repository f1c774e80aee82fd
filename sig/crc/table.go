package crc

import "encoding/binary"

// The pure-Go implementation: slicing-by-16. Table j maps a byte to the
// register change it causes when j more bytes follow it in the same
// 16-byte step, so one step costs sixteen independent look-ups; an 8-byte
// step (tables 0-7) and single bytes (table 0) take the rest.

// t10difTab holds the CRC-16/T10-DIF slicing tables.
var t10difTab = makeTable16(T10DIFPoly)

func makeTable16(poly uint16) *[16][256]uint16 {
	t := new([16][256]uint16)
	for b := range 256 {
		crc := uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ poly
			} else {
				crc <<= 1
			}
		}
		t[0][b] = crc
	}
	for j := 1; j < 16; j++ {
		for b := range 256 {
			v := t[j-1][b]
			t[j][b] = v<<8 ^ t[0][v>>8]
		}
	}
	return t
}

// updateT10DIFTable continues a CRC-16/T10-DIF over p.
func updateT10DIFTable(crc uint16, p []byte) uint16 {
	t := t10difTab
	for len(p) >= 16 {
		crc = t[15][p[0]^byte(crc>>8)] ^ t[14][p[1]^byte(crc)] ^
			t[13][p[2]] ^ t[12][p[3]] ^ t[11][p[4]] ^ t[10][p[5]] ^
			t[9][p[6]] ^ t[8][p[7]] ^ t[7][p[8]] ^ t[6][p[9]] ^
			t[5][p[10]] ^ t[4][p[11]] ^ t[3][p[12]] ^ t[2][p[13]] ^
			t[1][p[14]] ^ t[0][p[15]]
		p = p[16:]
	}
	for len(p) >= 8 {
		crc = t[7][p[0]^byte(crc>>8)] ^ t[6][p[1]^byte(crc)] ^
			t[5][p[2]] ^ t[4][p[3]] ^ t[3][p[4]] ^ t[2][p[5]] ^
			t[1][p[6]] ^ t[0][p[7]]
		p = p[8:]
	}
	for _, b := range p {
		crc = crc<<8 ^ t[0][b^byte(crc>>8)]
	}
	return crc
}

// makeTable64 builds the slicing tables of a CRC-64 with polynomial poly
// (normal form) for the MSB-first register, or for the LSB-first
// (reflected) register when refl is set.
func makeTable64(poly uint64, refl bool) [16][256]uint64 {
	var t [16][256]uint64
	if refl {
		rpoly := reverse64(poly)
		for b := range 256 {
			crc := uint64(b)
			for range 8 {
				if crc&1 != 0 {
					crc = crc>>1 ^ rpoly
				} else {
					crc >>= 1
				}
			}
			t[0][b] = crc
		}
		for j := 1; j < 16; j++ {
			for b := range 256 {
				v := t[j-1][b]
				t[j][b] = v>>8 ^ t[0][byte(v)]
			}
		}
		return t
	}
	for b := range 256 {
		crc := uint64(b) << 56
		for range 8 {
			if crc&(1<<63) != 0 {
				crc = crc<<1 ^ poly
			} else {
				crc <<= 1
			}
		}
		t[0][b] = crc
	}
	for j := 1; j < 16; j++ {
		for b := range 256 {
			v := t[j-1][b]
			t[j][b] = v<<8 ^ t[0][v>>56]
		}
	}
	return t
}

// updateTable continues the MSB-first register reg over p.
func updateTable(t *[16][256]uint64, reg uint64, p []byte) uint64 {
	for len(p) >= 16 {
		reg ^= binary.BigEndian.Uint64(p)
		q := binary.BigEndian.Uint64(p[8:])
		reg = t[15][reg>>56] ^ t[14][byte(reg>>48)] ^ t[13][byte(reg>>40)] ^
			t[12][byte(reg>>32)] ^ t[11][byte(reg>>24)] ^ t[10][byte(reg>>16)] ^
			t[9][byte(reg>>8)] ^ t[8][byte(reg)] ^
			t[7][q>>56] ^ t[6][byte(q>>48)] ^ t[5][byte(q>>40)] ^
			t[4][byte(q>>32)] ^ t[3][byte(q>>24)] ^ t[2][byte(q>>16)] ^
			t[1][byte(q>>8)] ^ t[0][byte(q)]
		p = p[16:]
	}
	for len(p) >= 8 {
		reg ^= binary.BigEndian.Uint64(p)
		reg = t[7][reg>>56] ^ t[6][byte(reg>>48)] ^ t[5][byte(reg>>40)] ^
			t[4][byte(reg>>32)] ^ t[3][byte(reg>>24)] ^ t[2][byte(reg>>16)] ^
			t[1][byte(reg>>8)] ^ t[0][byte(reg)]
		p = p[8:]
	}
	for _, b := range p {
		reg = reg<<8 ^ t[0][b^byte(reg>>56)]
	}
	return reg
}

// updateTableRefl continues the LSB-first register reg over p.
func updateTableRefl(t *[16][256]uint64, reg uint64, p []byte) uint64 {
	for len(p) >= 16 {
		reg ^= binary.LittleEndian.Uint64(p)
		q := binary.LittleEndian.Uint64(p[8:])
		reg = t[15][byte(reg)] ^ t[14][byte(reg>>8)] ^ t[13][byte(reg>>16)] ^
			t[12][byte(reg>>24)] ^ t[11][byte(reg>>32)] ^ t[10][byte(reg>>40)] ^
			t[9][byte(reg>>48)] ^ t[8][reg>>56] ^
			t[7][byte(q)] ^ t[6][byte(q>>8)] ^ t[5][byte(q>>16)] ^
			t[4][byte(q>>24)] ^ t[3][byte(q>>32)] ^ t[2][byte(q>>40)] ^
			t[1][byte(q>>48)] ^ t[0][q>>56]
		p = p[16:]
	}
	for len(p) >= 8 {
		reg ^= binary.LittleEndian.Uint64(p)
		reg = t[7][byte(reg)] ^ t[6][byte(reg>>8)] ^ t[5][byte(reg>>16)] ^
			t[4][byte(reg>>24)] ^ t[3][byte(reg>>32)] ^ t[2][byte(reg>>40)] ^
			t[1][byte(reg>>48)] ^ t[0][reg>>56]
		p = p[8:]
	}
	for _, b := range p {
		reg = reg>>8 ^ t[0][b^byte(reg)]
	}
	return reg
}
