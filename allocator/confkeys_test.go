package allocator

import (
	"strings"
	"testing"
)

// Every key of ConfKeys is one ParseConf knows (it may refuse the value
// "x", never the key).
func TestConfKeys(t *testing.T) {
	for _, k := range ConfKeys {
		if _, err := ParseConf(k + ":x"); err != nil && strings.Contains(err.Error(), "Unrecognized key") {
			t.Errorf("%s: %v", k, err)
		}
	}
	if _, err := ParseConf("no_such_key:x"); err == nil || !strings.Contains(err.Error(), "Unrecognized key") {
		t.Errorf("an unknown key is not refused as such: %v", err)
	}
}
