package doctor

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/0k-lab/agent-forge/pkg/install"
	"github.com/0k-lab/agent-forge/pkg/store"
)

// maxGateConfig bounds the read of the installed gate.json (the Gate's own
// limit).
const maxGateConfig = 1 << 20

// checkSpace compares the free space of the Gate's state file system with
// the Gate's free-space floor (gate.json free_space_floor_bytes, else the
// default): below it the Gate is in storage_full and refuses writes
// (DECISIONS 20). The reason gives both in MiB.
func (d *doctor) checkSpace() string {
	var c struct {
		Floor int64 `json:"free_space_floor_bytes"`
	}
	ok, err := d.gateConfig(&c)
	if !ok {
		return "the Gate config cannot be read"
	}
	if err != nil || c.Floor < 0 || c.Floor > store.MaxFloorBytes || (c.Floor != 0 && c.Floor < store.MinFloorBytes) {
		return "the Gate config's free_space_floor_bytes is not valid"
	}
	sp, err := store.StatSpace(filepath.Dir(install.RealPath(d.f, install.Database)))
	if err != nil {
		return "the free space of the state file system cannot be read"
	}
	floor := store.Floor(sp.Total, c.Floor)
	if sp.Free < floor {
		return fmt.Sprintf("the state file system has %d MiB free, below the Gate's free-space floor of %d MiB: the Gate refuses writes (storage_full) until space is freed", sp.Free>>20, floor>>20)
	}
	return ""
}

// gateConfig reads the Gate's config (bounded) and decodes into v the
// fields it names, which are all a check reads (the Gate validates the
// whole file). ok is false when the file cannot be read; err says it
// does not decode.
func (d *doctor) gateConfig(v any) (ok bool, err error) {
	b, err := d.f.ReadFile(install.GateConfig, maxGateConfig)
	if err != nil {
		return false, nil
	}
	return true, json.Unmarshal(b, v)
}
