package doctor

import (
	"encoding/json"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/0k-lab/agent-forge/pkg/ident"
	"github.com/0k-lab/agent-forge/pkg/install"
)

// serviceDefaultPath is the PATH systemd gives a system service whose
// environment sets none.
const serviceDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// checkAgentCLI reports the agent CLI the plugin at path drives, as its
// --cli line names it (the variable naming its executable, its default
// name, the release the adapter was checked against), whether worker.json
// runs the plugin, and whether the Worker would find the CLI: the
// variable's value in the Worker's environment file, else the default
// name in that file's PATH (systemd's default without one); only those two
// variables are read from it, and nothing found is run. A CLI missing for
// a plugin worker.json runs fails the check (every job would end
// plugin_incompatible); for one it does not run it is reported only.
func (d *doctor) checkAgentCLI(path string) string {
	out, err := d.f.Run(d.ctx, path, "--cli")
	line, ok := strings.CutSuffix(string(out), "\n")
	f := strings.Split(line, " ")
	if err != nil || !ok || len(f) != 3 || !ident.ValidEnvName(f[0]) || !validCLIName(f[1]) || !validRelease(f[2]) {
		return path + " does not name its agent CLI (--cli)"
	}
	envName, name, checked := f[0], f[1], f[2]
	env := d.workerEnv(envName, "PATH")
	found := d.findCLI(env[envName], name, env["PATH"])
	configured := d.runsPlugin(path)
	runs := "worker.json does not run it"
	if configured {
		runs = "worker.json runs it"
	}
	where := "not found (" + envName + ", or " + name + " in the PATH of " + install.WorkerEnv + ")"
	if found != "" {
		where = "found at " + found
	}
	d.note(runs + "; its CLI " + name + " (checked against " + checked + ") is " + where)
	if configured && found == "" {
		return "worker.json runs " + path + " but its CLI " + name + " is not found (" + envName + ", or " + name + " in the Worker's PATH)"
	}
	return ""
}

// validCLIName: an executable's name, no path.
func validCLIName(s string) bool {
	return s != "" && len(s) <= 64 && s[0] != '-' && s[0] != '.' && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == ""
}

// validRelease: an npm package at a version, "@scope/name@1.2.3".
func validRelease(s string) bool {
	return len(s) > 2 && len(s) <= 128 && strings.Contains(s[1:], "@") &&
		strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789._-@/") == ""
}

// workerEnv returns the values of names in the Worker's environment file
// (NAME=value lines); a missing or unreadable file, or a name it does not
// set, gives "" (PATH: systemd's default).
func (d *doctor) workerEnv(names ...string) map[string]string {
	env := map[string]string{}
	if b, err := d.f.ReadFile(install.WorkerEnv, 64<<10); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok && slices.Contains(names, k) {
				env[k] = v
			}
		}
	}
	if env["PATH"] == "" {
		env["PATH"] = serviceDefaultPath
	}
	return env
}

// findCLI returns where the Worker would find the CLI: bin when it names
// a path, else bin (or name when bin is empty) in an absolute directory
// of pathList; "" when there is no regular executable file or symbolic
// link there (a link is not followed).
func (d *doctor) findCLI(bin, name, pathList string) string {
	present := func(p string) bool {
		fi, err := d.f.Lstat(p)
		return err == nil && (fi.Mode()&fs.ModeSymlink != 0 || fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0)
	}
	if strings.Contains(bin, "/") {
		if filepath.IsAbs(bin) && present(filepath.Clean(bin)) {
			return filepath.Clean(bin)
		}
		return ""
	}
	if bin != "" {
		name = bin
	}
	for _, dir := range filepath.SplitList(pathList) {
		if p := filepath.Join(dir, name); filepath.IsAbs(dir) && present(p) {
			return p
		}
	}
	return ""
}

// runsPlugin reports whether a plugin of the installed worker.json starts
// the program at path (its argv[0]).
func (d *doctor) runsPlugin(path string) bool {
	b, err := d.f.ReadFile(install.WorkerConfig, 1<<20)
	if err != nil {
		return false
	}
	var c struct {
		Plugins []struct {
			Argv []string `json:"argv"`
		} `json:"plugins"`
	}
	if json.Unmarshal(b, &c) != nil {
		return false
	}
	return slices.ContainsFunc(c.Plugins, func(p struct {
		Argv []string `json:"argv"`
	}) bool {
		return len(p.Argv) > 0 && p.Argv[0] == path
	})
}
