package hostside

import (
	"os"
	"path/filepath"
	"testing"
)

// TestUsage: allocated blocks are counted, a hard-linked file once, a
// sparse file by what it allocates.
func TestUsage(t *testing.T) {
	d := t.TempDir()
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i)
	}
	if err := os.WriteFile(filepath.Join(d, "a"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Link(filepath.Join(d, "a"), filepath.Join(d, "a2"))
	f, _ := os.Create(filepath.Join(d, "sparse"))
	f.Truncate(1 << 30)
	f.Close()
	u, err := Usage(d)
	if err != nil {
		t.Fatal(err)
	}
	if u < 1<<20 || u > 1<<20+256<<10 {
		t.Errorf("usage %d, want about 1 MiB (one copy of a, nothing for the sparse file)", u)
	}
}

// BenchmarkUsage is the watchdog's cost per check over a repository-sized
// writable layer: 5,000 files of 4 KiB in 100 directories.
func BenchmarkUsage(b *testing.B) {
	d := b.TempDir()
	buf := make([]byte, 4096)
	for i := range 100 {
		sub := filepath.Join(d, "dir", string(rune('a'+i%26)), filepath.Base(filepath.Join("x", string(rune('0'+i/26)))))
		os.MkdirAll(sub, 0o755)
		for j := range 50 {
			os.WriteFile(filepath.Join(sub, "f"+string(rune('a'+j%26))+string(rune('a'+j/26))), buf, 0o644)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Usage(d); err != nil {
			b.Fatal(err)
		}
	}
}
