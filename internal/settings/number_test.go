package settings

import (
	"encoding/json"
	"math"
	"testing"
)

func TestNumber(t *testing.T) {
	tests := []struct {
		name    string
		v       any
		want    float64
		isInt   bool
		isValid bool
	}{
		{"int", -3, -3, true, true},
		{"int32", int32(7), 7, true, true},
		{"int64", int64(1) << 53, 1 << 53, true, true},
		{"uint64 beyond int64", uint64(math.MaxUint64), math.MaxUint64, true, true},
		{"float32", float32(0.1), float64(float32(0.1)), false, true},
		{"float64", 2.5, 2.5, false, true},
		{"integral float64 is a float", 3.0, 3, false, true},
		{"NaN", math.NaN(), math.NaN(), false, true},
		{"infinity", math.Inf(-1), math.Inf(-1), false, true},
		{"json int", json.Number("32"), 32, true, true},
		{"json negative int", json.Number("-7"), -7, true, true},
		{"json float", json.Number("32.0"), 32, false, true},
		{"json exponent", json.Number("1e3"), 1000, false, true},
		{"json int beyond int64", json.Number("99999999999999999999"), 1e20, false, true},
		{"json beyond float64", json.Number("1e999"), 0, false, false},
		{"json not a number", json.Number("x"), 0, false, false},
		{"bool", true, 0, false, false},
		{"string", "1", 0, false, false},
		{"nil", nil, 0, false, false},
		{"list", []any{1}, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, isInt, ok := Number(tt.v)
			same := f == tt.want || math.IsNaN(f) && math.IsNaN(tt.want)
			if !same || isInt != tt.isInt || ok != tt.isValid {
				t.Errorf("Number(%#v) = %v, %v, %v; want %v, %v, %v", tt.v, f, isInt, ok, tt.want, tt.isInt, tt.isValid)
			}
		})
	}
}
