// Command fake-github serves package githubfake for e2e scripts:
//
//	fake-github pki DIR
//	fake-github serve -listen 127.0.0.1:443 -pki DIR -git-root DIR -log FILE -ready FILE [-app FILE -tokens FILE]
//
// pki writes a fresh test CA and server certificate into DIR. serve answers
// github.com (git smart HTTP) and api.github.com over TLS on -listen, and
// the control routes (POST /fault) over plain HTTP on an OS-chosen
// loopback port whose address it writes to the -ready file once both
// listeners are open. It stops on SIGTERM or SIGINT.
//
// With -app (see app.go), api.github.com is githubfake.API for that App:
// installation tokens authenticate git too, every minted token value is
// appended to the -tokens file, and the repositories get the workflows
// guard as their pre-receive hook. The control routes then also take
// POST /api-fault and POST /installation, and the people of a test
// (githubfake's issues_people.go): POST /act (open, edit, label, comment
// on and review issues and pull requests as a login), POST /collaborator
// (a login's role) and GET /issue-state?owner=&repo=&number=.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/githubfake"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fake-github:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: fake-github pki DIR | serve FLAGS")
	}
	switch args[0] {
	case "pki":
		if len(args) != 2 {
			return errors.New("usage: fake-github pki DIR")
		}
		return githubfake.WritePKI(args[1], time.Now())
	case "serve":
		return serve(ctx, args[1:], stderr)
	}
	return fmt.Errorf("unknown command %q", args[0])
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:443", "TLS listen address")
	pki := fs.String("pki", "", "directory written by `fake-github pki`")
	gitRoot := fs.String("git-root", "", "directory of <owner>/<repo>.git bare repositories")
	logPath := fs.String("log", "", "request log (JSON lines)")
	ready := fs.String("ready", "", "file to write the control address to once serving")
	appPath := fs.String("app", "", "fake GitHub App (JSON, see app.go); enables the API")
	tokensPath := fs.String("tokens", "", "file receiving every minted token value (with -app)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pki == "" || *gitRoot == "" || *logPath == "" || *ready == "" || fs.NArg() != 0 {
		return errors.New("serve needs -pki, -git-root, -log and -ready")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(*pki, githubfake.CertFile), filepath.Join(*pki, githubfake.KeyFile))
	if err != nil {
		return err
	}
	reqLog, err := githubfake.OpenLog(*logPath)
	if err != nil {
		return err
	}
	defer reqLog.Close()
	srv := githubfake.New(*gitRoot, git, reqLog)
	if *appPath != "" {
		cfg, err := loadApp(*appPath)
		if err != nil {
			return err
		}
		if *tokensPath == "" {
			return errors.New("-app needs -tokens")
		}
		tokens, err := os.OpenFile(*tokensPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer tokens.Close()
		if err := installHooks(*gitRoot, cfg); err != nil {
			return err
		}
		githubfake.NewAPI(cfg, *gitRoot, git, time.Now, tokens).Attach(srv)
	}

	tlsLn, err := tls.Listen("tcp", *listen, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	ctlLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tlsLn.Close()
		return err
	}
	main := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	control := &http.Server{Handler: srv.Control, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- main.Serve(tlsLn) }()
	go func() { errc <- control.Serve(ctlLn) }()
	tmp := *ready + ".tmp"
	if err := os.WriteFile(tmp, []byte(ctlLn.Addr().String()+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, *ready); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = control.Shutdown(sctx)
	return main.Shutdown(sctx)
}
