package main

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/0k-lab/agent-forge/pkg/githubfake"
)

// appFile is the -app file: the fake App, the PEM file of its private key
// (the fake keeps only the public half) and its installations.
type appFile struct {
	AppID          int64                           `json:"app_id"`
	ClientID       string                          `json:"client_id"`
	Slug           string                          `json:"slug"`
	PrivateKeyFile string                          `json:"private_key_file"`
	Installations  []githubfake.InstallationConfig `json:"installations"`
	Public         []string                        `json:"public_repositories"`
	RunsWindowSecs int                             `json:"runs_window_seconds"`
	// PushLog: the file the pre-receive hook logs each push's object count to.
	PushLog string `json:"push_log"`
}

func loadApp(path string) (githubfake.AppConfig, error) {
	var f appFile
	b, err := os.ReadFile(path)
	if err != nil {
		return githubfake.AppConfig{}, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return githubfake.AppConfig{}, err
	}
	pemBytes, err := os.ReadFile(f.PrivateKeyFile)
	if err != nil {
		return githubfake.AppConfig{}, err
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return githubfake.AppConfig{}, errors.New("app key: no PEM block")
	}
	var key *rsa.PrivateKey
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		key = k
	} else if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		key, _ = k.(*rsa.PrivateKey)
	}
	if key == nil {
		return githubfake.AppConfig{}, errors.New("app key: not an RSA private key")
	}
	return githubfake.AppConfig{AppID: f.AppID, ClientID: f.ClientID, PublicKey: &key.PublicKey, Installations: f.Installations,
		PublicRepositories: f.Public, RunsWindow: time.Duration(f.RunsWindowSecs) * time.Second, PushLog: f.PushLog, Slug: f.Slug}, nil
}

// installHooks puts GitHub's push checks (rulesets, the workflows
// guard, the object count) into every existing repository the
// installations name.
func installHooks(gitRoot string, cfg githubfake.AppConfig) error {
	for _, in := range cfg.Installations {
		for _, repo := range in.Repositories {
			dir := filepath.Join(gitRoot, in.Owner, repo+".git")
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				continue
			}
			if err := githubfake.WriteWorkflowHook(dir); err != nil {
				return err
			}
		}
	}
	return nil
}
