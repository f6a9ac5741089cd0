package docker

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/storage"

	"github.com/rollcage/rollcage/sandbox"
)

// TestLayerDir: a fork refuses, with ErrUnsupported and what it needs,
// engines whose writable layer it cannot copy.
func TestLayerDir(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		driver  storage.DriverData
		want    string // the dir, or a part of the error
		wantErr bool
	}{
		{"overlay2", storage.DriverData{Name: "overlay2", Data: map[string]string{"UpperDir": dir}}, dir, false},
		{"no upper dir", storage.DriverData{Name: "vfs"}, `storage driver "vfs" shows no writable layer`, true},
		{"unreadable", storage.DriverData{Name: "overlay2", Data: map[string]string{"UpperDir": filepath.Join(dir, "gone")}}, "run rollcage as root", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := dcontainer.InspectResponse{ContainerJSONBase: &dcontainer.ContainerJSONBase{GraphDriver: tc.driver}}
			got, err := layerDir(st)
			if tc.wantErr {
				if !errors.Is(err, sandbox.ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("layerDir: %v, want ErrUnsupported saying %q", err, tc.want)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("layerDir = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
