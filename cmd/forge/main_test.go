package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/0k-lab/agent-forge/pkg/buildinfo"
	"github.com/0k-lab/agent-forge/pkg/cli"
)

func TestRunVersionAndUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("--version: %v", err)
	}
	if out.String() != buildinfo.Line("forge")+"\n" {
		t.Fatalf("version %q", out.String())
	}
	out.Reset()
	err := run(context.Background(), nil, strings.NewReader(""), &out, &errOut)
	if cli.ExitCode(err) != cli.ExitUsage || out.Len() != 0 {
		t.Fatalf("no args: exit %d stdout %q", cli.ExitCode(err), out.String())
	}
}
