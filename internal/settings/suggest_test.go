package settings

import "testing"

func TestSuggest(t *testing.T) {
	known := []string{"checkpoint_config", "failure_config", "name", "stop", "storage_path", "sync_config"}
	tests := []struct{ name, want string }{
		{"stop_", "stop"},
		{"storagePath", "storage_path"},
		{"sync-config", "sync_config"},
		{"Sync_Confg", "sync_config"},
		{"nmae", "name"},
		{"x", ""},
		{"checkpointing", ""},
	}
	for _, tt := range tests {
		if got := Suggest(tt.name, known); got != tt.want {
			t.Errorf("Suggest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
