package search

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/internal/settings"
)

func TestParseSpaceRefusesMisspelledKeywords(t *testing.T) {
	hint := func(k string) string { return " (for a constant mapping, write {literal: {" + k + ": ...}})" }
	tests := []struct {
		name  string
		space map[string]any
		want  string
	}{
		{"underscore", map[string]any{"lr": map[string]any{"log_uniform": []any{0.001, 0.1}}},
			`param_space.lr.log_uniform: unknown distribution, did you mean "loguniform"?` + hint("log_uniform")},
		{"camel case", map[string]any{"lr": map[string]any{"LogUniform": []any{0.001, 0.1}}},
			`param_space.lr.LogUniform: unknown distribution, did you mean "loguniform"?` + hint("LogUniform")},
		{"dash", map[string]any{"x": map[string]any{"grid-search": []any{1, 2}}},
			`param_space.x.grid-search: unknown distribution, did you mean "grid_search"?` + hint("grid-search")},
		{"no underscore", map[string]any{"x": map[string]any{"gridsearch": []any{1, 2}}},
			`param_space.x.gridsearch: unknown distribution, did you mean "grid_search"?` + hint("gridsearch")},
		{"capital", map[string]any{"x": map[string]any{"Choice": []any{1, 2}}},
			`param_space.x.Choice: unknown distribution, did you mean "choice"?` + hint("Choice")},
		{"swapped letters", map[string]any{"x": map[string]any{"unifrom": []any{0, 1}}},
			`param_space.x.unifrom: unknown distribution, did you mean "uniform"?` + hint("unifrom")},
		{"missing letter", map[string]any{"bs": map[string]any{"lograndit": []any{16, 256}}},
			`param_space.bs.lograndit: unknown distribution, did you mean "lograndint"?` + hint("lograndit")},
		{"plural", map[string]any{"x": map[string]any{"choices": []any{1, 2}}},
			`param_space.x.choices: unknown distribution, did you mean "choice"?` + hint("choices")},
		{"two edits", map[string]any{"x": map[string]any{"random": []any{0, 1}}},
			`param_space.x.random: unknown distribution, did you mean "randn"?` + hint("random")},
		{"split quantized name", map[string]any{"x": map[string]any{"q_log_rand_int": []any{1, 10, 2}}},
			`param_space.x.q_log_rand_int: unknown distribution, did you mean "qlograndint"?` + hint("q_log_rand_int")},
		{"sampleFrom", map[string]any{"wd": map[string]any{"sampleFrom": "f"}},
			`param_space.wd.sampleFrom: unknown keyword, did you mean "sample_from"?` + hint("sampleFrom")},
		{"misspelled literal", map[string]any{"x": map[string]any{"litteral": map[string]any{"a": 1}}},
			`param_space.x.litteral: unknown keyword, did you mean "literal"?` + hint("litteral")},
		{"deep and in a list", map[string]any{"m": map[string]any{"layers": []any{1, map[string]any{"rand_int": []any{1, 4}}}}},
			`param_space.m.layers.1.rand_int: unknown distribution, did you mean "randint"?` + hint("rand_int")},
		{"in a choice value", map[string]any{"x": map[string]any{"choice": []any{1, map[string]any{"opt": map[string]any{"uniforms": []any{0, 1}}}}}},
			`param_space.x.choice.1.opt.uniforms: unknown distribution, did you mean "uniform"?` + hint("uniforms")},
		{"in a grid_search value", map[string]any{"x": map[string]any{"grid_search": []any{[]any{map[string]any{"Randn": nil}}}}},
			`param_space.x.grid_search.0.0.Randn: unknown distribution, did you mean "randn"?` + hint("Randn")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSpace(tt.space)
			if err == nil || settings.Prefix("param_space", err).Error() != tt.want {
				t.Errorf("error:\n got %v\nwant %s", err, tt.want)
			}
			var ke *settings.Error
			if !errors.As(err, &ke) {
				t.Errorf("error %T is not a *settings.Error", err)
			}
		})
	}
}

func TestLiteral(t *testing.T) {
	lit := func(v any) map[string]any { return map[string]any{"literal": v} }
	s := mustParse(t, map[string]any{
		"lr":     lit(map[string]any{"log_uniform": []any{0.001, 0.1}}),
		"dist":   lit(map[string]any{"uniform": []any{0, 1}}),
		"nested": lit(lit(1)),
		"n":      lit(3),
		"list":   []any{lit(map[string]any{"randn": nil})},
		"c":      map[string]any{"choice": []any{lit(map[string]any{"grid_search": []any{1}})}},
		"g":      map[string]any{"grid_search": []any{map[string]any{"a": lit(map[string]any{"choice": "x"})}}},
	})
	want := map[string]any{
		"lr":     map[string]any{"log_uniform": []any{0.001, 0.1}},
		"dist":   map[string]any{"uniform": []any{0, 1}},
		"nested": map[string]any{"literal": 1},
		"n":      3,
		"list":   []any{map[string]any{"randn": nil}},
		"c":      map[string]any{"grid_search": []any{1}},
		"g":      map[string]any{"a": map[string]any{"choice": "x"}},
	}
	config, tag := s.Trial(0, 1)
	if diff := cmp.Diff(want, config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if tag != `0_c=grid_search_1,g=a_choice_x` {
		t.Errorf("tag = %q: a literal is no domain and has no place in it", tag)
	}
	if s.GridSize() != 1 {
		t.Errorf("GridSize = %d, want 1", s.GridSize())
	}
}

func TestKeyProblemLeavesOrdinaryKeysAlone(t *testing.T) {
	for _, k := range []string{"object_ref", "name", "lr", "x", "a", "range", "mode", "value", "constant", "normal", "mean", "rank", "units", "sgd", "adam"} {
		if msg := keyProblem(k); msg != "" {
			t.Errorf("keyProblem(%q) = %q, want none", k, msg)
		}
	}
}

// The space itself is the config's mapping: a key named like a keyword is
// a config key there (it panicked as a domain: found by FuzzParseYAML).
func TestTopLevelKeysAreConfigKeys(t *testing.T) {
	for _, space := range []map[string]any{
		{"choice": []any{map[string]any{}}},
		{"log_uniform": []any{1, 2}},
		{"literal": 3},
	} {
		s := mustParse(t, space)
		config, tag := s.Trial(0, 1)
		if diff := cmp.Diff(space, config); diff != "" || tag != "0" {
			t.Errorf("config (-want +got):\n%s\ntag %q", diff, tag)
		}
	}
}
