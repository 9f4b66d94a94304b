package store

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestCheckSynced(t *testing.T) {
	for _, c := range []struct {
		name, body string
		ok         bool
	}{
		{"synced", `{"status":"synced","path":"/s/forge.db","txid":7,"replicated_txid":7}`, true},
		{"no change", `{"status":"no_change","path":"/s/forge.db","txid":7,"replicated_txid":7}`, true},
		{"more fields", `{"status":"synced","txid":7,"replicated_txid":9,"later":true}`, true},
		{"replica behind", `{"status":"synced","txid":8,"replicated_txid":7}`, false},
		{"local only", `{"status":"synced_local","txid":7,"replicated_txid":7}`, false},
		{"no replicated txid", `{"status":"synced","txid":7}`, false},
		{"txid string", `{"status":"synced","txid":"7","replicated_txid":7}`, false},
		{"negative", `{"status":"synced","txid":-1,"replicated_txid":7}`, false},
		{"not json", `synced`, false},
		{"array", `[]`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkSynced([]byte(c.body))
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok %v", err, c.ok)
			}
			if err != nil && !errors.Is(err, errLitestream) {
				t.Fatalf("err = %v, not errLitestream", err)
			}
		})
	}
}

func TestListedState(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	body := `{"databases":[{"path":"/o/x.db","status":"open"},` +
		`{"path":"/s/forge.db","status":"replicating","last_sync_at":"2026-12-01T11:00:00+01:00"}]}`
	st, err := listedState([]byte(body), "/s/forge.db")
	if err != nil || st.Status != "replicating" || !st.LastSync.Equal(at) {
		t.Fatalf("%+v %v", st, err)
	}
	if lag, ok := st.Lag(at.Add(3 * time.Second)); !ok || lag != 3*time.Second {
		t.Fatalf("lag %v %v", lag, ok)
	}
	if lag, ok := st.Lag(at.Add(-time.Second)); !ok || lag != 0 {
		t.Fatalf("lag before the sync %v %v", lag, ok)
	}
	if _, ok := (ReplicaState{Status: "replicating"}).Lag(at); ok {
		t.Fatal("a replica that never synced has a lag")
	}
	for name, b := range map[string]string{
		"absent":       `{"databases":[{"path":"/o/x.db","status":"open"}]}`,
		"no list":      `{}`,
		"no status":    `{"databases":[{"path":"/s/forge.db"}]}`,
		"bad time":     `{"databases":[{"path":"/s/forge.db","status":"replicating","last_sync_at":"yesterday"}]}`,
		"not json":     `<html>`,
		"list is null": `{"databases":null}`,
	} {
		if _, err := listedState([]byte(b), "/s/forge.db"); !errors.Is(err, errLitestream) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// FuzzLitestreamAnswers: no answer panics either decoder; an accepted
// /sync answer says the replica holds the database's newest transaction,
// and an accepted /list answer names the database.
func FuzzLitestreamAnswers(f *testing.F) {
	f.Add([]byte(`{"status":"synced","path":"/s/forge.db","txid":7,"replicated_txid":7}`))
	f.Add([]byte(`{"databases":[{"path":"/s/forge.db","status":"replicating","last_sync_at":"2026-12-01T11:00:00Z"}]}`))
	f.Add([]byte(`{"status":"no_change","txid":18446744073709551615,"replicated_txid":18446744073709551615}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if checkSynced(b) == nil {
			var a struct {
				Status         string `json:"status"`
				TXID           uint64 `json:"txid"`
				ReplicatedTXID uint64 `json:"replicated_txid"`
			}
			if err := json.Unmarshal(b, &a); err != nil || a.ReplicatedTXID < a.TXID ||
				(a.Status != "synced" && a.Status != "no_change") {
				t.Fatalf("accepted %q", b)
			}
		}
		if _, err := listedState(b, "/s/forge.db"); err == nil {
			var a struct {
				Databases []struct {
					Path string `json:"path"`
				} `json:"databases"`
			}
			named := false
			if json.Unmarshal(b, &a) == nil {
				for _, d := range a.Databases {
					named = named || d.Path == "/s/forge.db"
				}
			}
			if !named {
				t.Fatalf("accepted %q without the database", b)
			}
		}
	})
}
