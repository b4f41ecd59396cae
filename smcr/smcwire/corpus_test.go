package smcwire

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteFuzzCorpus regenerates testdata/fuzz/{FuzzCLC,FuzzLLC,FuzzCDC}
// from the SMC messages of the captures when SMCWIRE_WRITE_CORPUS=1; it
// otherwise checks that every corpus file is in the go fuzz format.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("SMCWIRE_WRITE_CORPUS") != "1" {
		files, err := filepath.Glob("testdata/fuzz/Fuzz*/*")
		require.NoError(t, err)
		require.NotEmpty(t, files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(string(b), "go test fuzz v1\n[]byte("), f)
		}
		return
	}
	for _, name := range []string{"smc_r_v2.pcap", "smcr_close.pcap", "smcr_echo_small.pcap"} {
		c := loadCapture(t, name)
		base := strings.TrimSuffix(name, ".pcap")
		seen := map[string]bool{}
		write := func(target string, m wireMsg, kind string) {
			key := target + string(m.data)
			if seen[key] { // retransmissions and identical messages once
				return
			}
			seen[key] = true
			dir := filepath.Join("testdata", "fuzz", target)
			require.NoError(t, os.MkdirAll(dir, 0o755))
			file := filepath.Join(dir, fmt.Sprintf("%s-%03d-%s", base, m.frame, kind))
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", m.data)
			require.NoError(t, os.WriteFile(file, []byte(body), 0o644))
		}
		for _, m := range c.tcp {
			if cl, err := ParseCLC(m.data); err == nil {
				write("FuzzCLC", m, strings.ToLower(cl.Type().String()))
			}
		}
		for _, m := range c.sends {
			switch Classify(m.data) {
			case KindCDC:
				write("FuzzCDC", m, "cdc")
			case KindLLCv1, KindLLCv2:
				l, _ := ParseLLC(m.data)
				write("FuzzLLC", m, strings.ToLower(l.Type().String()))
			}
		}
	}
}
