package gate

import (
	"net/http"

	"github.com/0k-lab/agent-forge/pkg/buildinfo"
	"github.com/0k-lab/agent-forge/pkg/store"
)

// versionView is the body of GET /v1/version: the running Gate's release
// identity and the store schema version it migrates to. The installer and
// forge doctor compare it with the install receipt.
type versionView struct {
	Version       string `json:"version"`
	Commit        string `json:"commit"`
	SchemaVersion int    `json:"schema_version"`
}

func (g *Gate) handleVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, versionView{
		Version:       buildinfo.Version(),
		Commit:        buildinfo.Commit(),
		SchemaVersion: store.SchemaVersion,
	})
}
