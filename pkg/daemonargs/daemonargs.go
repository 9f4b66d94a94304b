// Package daemonargs parses the command line forge-gate and forge-worker
// share: `-config PATH` or `--version` (one or two leading dashes), each at
// most once, never both, and nothing else. A repeated flag is a usage
// error rather than "the last one wins", so a wrapper script that appends
// its own -config cannot silently replace the operator's.
package daemonargs

import (
	"errors"
	"flag"
	"io"
	"strconv"
)

// ErrUsage is returned for every command line Parse refuses; the caller
// prints its own usage line and exits 2.
var ErrUsage = errors.New("daemonargs: usage")

// Parse returns the config path, or version true when --version was asked
// for. Exactly one of the two is set when err is nil.
func Parse(args []string) (config string, version bool, err error) {
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c onceString
	var v onceBool
	fs.Var(&c, "config", "path to the JSON config file")
	fs.Var(&v, "version", "print the version and exit")
	if fs.Parse(args) != nil || fs.NArg() != 0 || v.value == c.set {
		return "", false, ErrUsage
	}
	if c.set && c.value == "" {
		return "", false, ErrUsage
	}
	return c.value, v.value, nil
}

// onceString is a string flag that may be given at most once.
type onceString struct {
	value string
	set   bool
}

func (f *onceString) String() string { return f.value }

func (f *onceString) Set(s string) error {
	if f.set {
		return errors.New("flag given more than once")
	}
	f.value, f.set = s, true
	return nil
}

// onceBool is a boolean flag that may be given at most once.
type onceBool struct {
	value bool
	set   bool
}

func (f *onceBool) String() string { return strconv.FormatBool(f.value) }

func (f *onceBool) IsBoolFlag() bool { return true }

func (f *onceBool) Set(s string) error {
	if f.set {
		return errors.New("flag given more than once")
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	f.value, f.set = b, true
	return nil
}
