package allocator

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// The value parsers of c10's ConfigTokenizer are std::stoull and std::stod,
// which take the longest prefix of the token that is a number, as strtoull
// and strtod do, and throw std::invalid_argument when there is none and
// std::out_of_range when the value does not fit. cStoull and cStod do the
// same; their error tells which of the two it would have been.

// numErr is a conversion std::stoull or std::stod refuses.
type numErr struct{ rangeErr bool }

// cStoull is std::stoull(s) in base 10: optional sign, decimal digits, the
// rest ignored. As in C, a minus sign negates in unsigned arithmetic ("-1"
// is 2^64-1); a magnitude of 2^64 or more is out of range.
func cStoull(s string) (uint64, *numErr) {
	i, neg := 0, false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	var v uint64
	over := false
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		hi, lo := bits.Mul64(v, 10)
		lo, c := bits.Add64(lo, uint64(s[i]-'0'), 0)
		if hi != 0 || c != 0 {
			over = true
		}
		v = lo
	}
	switch {
	case i == start:
		return 0, &numErr{}
	case over:
		return 0, &numErr{rangeErr: true}
	case neg:
		v = -v
	}
	return v, nil
}

// cStod is std::stod(s): the longest prefix strtod reads (decimal or
// hexadecimal, "inf", "infinity", "nan", "nan(chars)", any case, optional
// sign), the rest ignored. A finite number too large for a double, or one
// too small for a normal double (strtod sets ERANGE on underflow), is out
// of range.
func cStod(s string) (float64, *numErr) {
	i := 0
	sign := ""
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		sign = s[i : i+1]
		i++
	}
	rest := strings.ToLower(s[i:])
	switch {
	case strings.HasPrefix(rest, "infinity"), strings.HasPrefix(rest, "inf"):
		if sign == "-" {
			return math.Inf(-1), nil
		}
		return math.Inf(1), nil
	case strings.HasPrefix(rest, "nan"):
		return math.NaN(), nil
	}
	hex := len(rest) > 2 && rest[0] == '0' && rest[1] == 'x' && (isHex(rest[2]) || rest[2] == '.' && len(rest) > 3 && isHex(rest[3]))
	digit := isDec
	if hex {
		digit = isHex
		i += 2
	}
	start := i
	nonzero := false
	for ; i < len(s) && digit(s[i]); i++ {
		nonzero = nonzero || s[i] != '0'
	}
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && digit(s[i]); i++ {
			nonzero = nonzero || s[i] != '0'
		}
	}
	if i == start || i == start+1 && s[start] == '.' {
		return 0, &numErr{}
	}
	end, hasExp := i, false
	if i < len(s) && (!hex && (s[i] == 'e' || s[i] == 'E') || hex && (s[i] == 'p' || s[i] == 'P')) {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for ; k < len(s) && isDec(s[k]); k++ {
		}
		if k > j {
			end, hasExp = k, true
		}
	}
	num := sign + s[start:end]
	if hex {
		num = sign + "0x" + s[start:end]
		if !hasExp {
			num += "p0"
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil && !isRange(err) {
		return 0, &numErr{}
	}
	if math.IsInf(v, 0) || nonzero && math.Abs(v) < 0x1p-1022 {
		return 0, &numErr{rangeErr: true}
	}
	return v, nil
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func isDec(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDec(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
